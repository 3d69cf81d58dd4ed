#pragma once
// The definitions of the device resolution of receiver options (declared in options.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/receiver/options.hpp>

#include <algorithm>
#include <bit>
#include <stdexcept>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC std::vector<device*> checked_receiver_devices(const receiver_options& options, const std::string& name) {
  if (!options.devices.empty() && !options.backends.empty())
    throw std::invalid_argument("devtap: receiver_options: give `devices` or `backends`, not both");
  if (options.close_timeout < std::chrono::milliseconds::zero())
    throw std::invalid_argument("devtap: receiver '" + name + "': close_timeout of " +
                                std::to_string(options.close_timeout.count()) +
                                " ms is negative (0 gives up on every device at once; milliseconds::max() waits as long as it takes)");
  if (options.overflow != overflow_policy::block && options.overflow != overflow_policy::drop &&
      options.overflow != overflow_policy::error)
    throw std::invalid_argument("devtap: receiver '" + name + "': overflow policy " +
                                std::to_string(static_cast<std::uint32_t>(options.overflow)) +
                                " is none of block, drop, error");
  std::vector<device*> devs = options.devices;
  if (devs.empty() && !options.backends.empty()) {
    for (auto it = options.backends.begin(); it != options.backends.end(); ++it) {
      if (std::find(options.backends.begin(), it, *it) != it)  // (else its first device is "listed twice")
        throw std::invalid_argument("devtap: receiver '" + name + "': backend '" + *it + "' is listed twice");
      try {
        for (device* d : devtap::devices(*it)) devs.push_back(d);
      } catch (const backend_error& e) {  // (the registry's message names no receiver)
        throw backend_error("devtap: receiver '" + name + "': receiver_options.backends: " + e.what());
      }
    }
  } else if (devs.empty()) {
    for (client* c : devtap::backends())
      for (device* d : c->local_devices()) devs.push_back(d);
  }
  if (devs.empty()) throw std::invalid_argument("devtap: receiver '" + name + "' has no devices");
  for (auto it = devs.begin(); it != devs.end(); ++it) {
    if (*it == nullptr) throw std::invalid_argument("devtap: receiver_options.devices holds a null device");
    if (std::find(devs.begin(), it, *it) != it)
      throw std::invalid_argument("devtap: device '" + (*it)->name() + "' is listed twice");
  }
  return devs;
}

DEVTAP_FUNC std::vector<std::string> names_within(const std::vector<device*>& devices) {
  std::vector<std::string> names;
  for (const device* d : devices) {
    std::string name = d->name();
    for (int n = 2; std::find(names.begin(), names.end(), name) != names.end(); ++n) name = d->name() + "#" + std::to_string(n);
    names.push_back(std::move(name));
  }
  return names;
}

DEVTAP_FUNC std::uint64_t ring_capacity_of(std::size_t budget_bytes, std::size_t devices, const std::string& name) {
  const std::uint64_t share = budget_bytes / devices;
  const std::uint64_t capacity = std::bit_floor(std::min<std::uint64_t>(share, max_ring_capacity));
  if (capacity < 256)
    throw std::invalid_argument("devtap: receiver '" + name + "': budget_bytes " + std::to_string(budget_bytes) +
                                " leaves less than 256 bytes per device");
  return capacity;
}

}  // namespace detail

DEVTAP_END_NAMESPACE
