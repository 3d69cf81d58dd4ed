#pragma once
// The definitions of the device base (declared in device.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/device.hpp>
#include <devtap/ring/memory.hpp>

#include <atomic>
#include <vector>

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
  std::vector<std::shared_ptr<detail::ring_allocation>> freed;  // freed after the lock
  std::lock_guard lock(retired_mutex_);
  // Every ring retired before this one goes, unless a host thread still waits inside it. Acquire:
  // its partner is ring_pin's release decrement, after that thread's last touch of the ring.
  std::erase_if(retired_rings_, [&freed](std::shared_ptr<detail::ring_allocation>& r) {
    detail::ring_consumer_side* side = r->host.consumer;
    if (side != nullptr &&
        std::atomic_ref<std::uint32_t>(side->host_waiters).load(std::memory_order_acquire) != 0)
      return false;
    freed.push_back(std::move(r));
    return true;
  });
  if (ring) retired_rings_.push_back(std::move(ring));
}

DEVTAP_END_NAMESPACE
