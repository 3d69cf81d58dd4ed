#pragma once
/** Host taps through a device: what `cpu_context::tap` calls. */
#include <devtap/backend/device.hpp>
#include <devtap/errors.hpp>
#include <devtap/outfeed/outfeed.hpp>

#include <string>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** What a device points at while a receiver is attached to it (the receiver owns it). */
struct outfeed_port {
  devtap::outfeed out;
};

/** Taps `value` into the receiver attached to `dev`; throws outfeed_error if there is none. */
template <class T>
void host_tap(device& dev, const tap_point<T>& point, const T& value) {
  const outfeed_port* port = dev.attached_port();
  if (port == nullptr)
    throw outfeed_error("devtap: tap on device '" + dev.name() +
                        "' with no receiver attached (create a devtap::receiver for it first); nothing was written");
  host_tap(port->out, point, value);
}

}  // namespace detail
DEVTAP_END_NAMESPACE
