#pragma once
/** The receiver side and what producers hold: tap points, call points, outfeed handles, consumer
 *  coroutines, the receiver. In a `.cu` file it also brings the device-side tap and call. */
#include <devtap/receiver/consumer.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/field_names.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/tap_point.hpp>
#if defined(__CUDACC__)
#  include <devtap/cuda/call.cuh>
#  include <devtap/cuda/tap.cuh>
#endif
