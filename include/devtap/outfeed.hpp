#pragma once
/** The outfeed: tap points, producer handles, consumer coroutines, the receiver. */
#include <devtap/outfeed/codec.hpp>
#include <devtap/outfeed/consumer.hpp>
#include <devtap/outfeed/fingerprint.hpp>
#include <devtap/outfeed/outfeed.hpp>
#include <devtap/outfeed/receiver.hpp>
#include <devtap/outfeed/tap.hpp>
#include <devtap/outfeed/tap_point.hpp>
