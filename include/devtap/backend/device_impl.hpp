#pragma once
// The definitions of the device base (declared in device.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/device.hpp>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC void device::run_pending_work_callback(const std::function<void()>& fn) const noexcept {
  try {
    fn();
  } catch (const std::exception& e) {
    log(log_level::error, "{}: after_pending_work callback threw: {}", name(), e.what());
  } catch (...) {
    log(log_level::error, "{}: after_pending_work callback threw an unknown exception", name());
  }
}

DEVTAP_FUNC void device::retire_ring(std::shared_ptr<detail::ring_allocation> ring) {
  std::lock_guard lock(retired_mutex_);
  retired_ring_.swap(ring);  // the one retired before is freed here, after the lock
}

DEVTAP_END_NAMESPACE
