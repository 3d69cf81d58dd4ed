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

/** The outfeed of the receiver attached to `dev`; throws outfeed_error (naming `what`, e.g.
 *  "tap") if there is none. */
inline const devtap::outfeed& attached_outfeed(const device& dev, const char* what) {
  const outfeed_port* port = dev.attached_port();
  if (port == nullptr)
    throw outfeed_error(std::string("devtap: ") + what + " on device '" + dev.name() +
                        "' with no receiver attached (create a devtap::receiver for it first); nothing was written");
  return port->out;
}

/** Taps `value` into the receiver attached to `dev`; throws outfeed_error if there is none. */
template <class T>
void host_tap(device& dev, const tap_point<T>& point, const T& value) {
  host_tap(attached_outfeed(dev, "tap"), point, value);
}

}  // namespace detail
DEVTAP_END_NAMESPACE
