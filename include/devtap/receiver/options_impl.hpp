#pragma once
// The definitions of the device resolution of receiver options (declared in options.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/receiver/options.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC std::vector<device*> resolve_receiver_devices(const receiver_options& options) {
  if (!options.devices.empty()) return options.devices;
  std::vector<device*> out;
  if (!options.backends.empty()) {
    for (const auto& name : options.backends)
      for (device* d : devtap::devices(name)) out.push_back(d);
  } else {
    for (client* c : devtap::backends())
      for (device* d : c->local_devices()) out.push_back(d);
  }
  return out;
}

}  // namespace detail

DEVTAP_END_NAMESPACE
