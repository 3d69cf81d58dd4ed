#pragma once
/** Host-side taps: what a cpu device's work (and any host thread) calls. */
#include <devtap/backend/device.hpp>
#include <devtap/outfeed/tap_point.hpp>

DEVTAP_BEGIN_NAMESPACE
namespace detail {
/** Taps `value` into the receiver attached to `dev`; throws outfeed_error if none. (Defined below.) */
template <class T>
void host_tap(device& dev, const tap_point<T>& point, const T& value);
}  // namespace detail
DEVTAP_END_NAMESPACE
