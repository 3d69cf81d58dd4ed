#pragma once
// The definitions of the device base (declared in device.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/device.hpp>
#include <devtap/ring/memory.hpp>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <utility>
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

namespace detail {
/** True while a host thread waits inside `ring` or a scope_guard pins it (ring_pin). Acquire: its
 *  partner is ring_pin's release decrement, after that thread's last touch of the ring. */
inline bool ring_pinned(const ring_allocation& ring) noexcept {
  ring_consumer_side* side = ring.host.consumer;
  return side != nullptr && std::atomic_ref<std::uint32_t>(side->host_waiters).load(std::memory_order_acquire) != 0;
}

/** Rings whose device went while they were pinned, freed once they are not (reachable: no leak). */
inline std::pair<std::mutex, std::vector<std::shared_ptr<ring_allocation>>>& orphaned_rings() {
  static auto* const orphans = new std::pair<std::mutex, std::vector<std::shared_ptr<ring_allocation>>>();
  return *orphans;
}
}  // namespace detail

DEVTAP_FUNC device::~device() {
  // A receiver still drains this device and will call it: nothing can be done safely any more (its
  // backend's part is gone). A client must close them first (close_attached_receiver).
  if (attached_.load(std::memory_order_acquire) != nullptr) {
    log(log_level::error,
        "device '{}' destroyed while a receiver still drains it: its client must close that receiver first "
        "(device::close_attached_receiver(), as cpu_client's destructor does); aborting",
        name_);
    std::abort();
  }
  // Such a thread leaves with an error (the ring is closed) and must still find the ring: it is
  // kept until it is not pinned any more (this happens only when a client goes while still in use).
  auto& [mutex, orphans] = detail::orphaned_rings();
  std::lock_guard lock(mutex);
  std::erase_if(orphans, [](const auto& ring) { return !detail::ring_pinned(*ring); });
  std::size_t kept = 0;
  for (auto& ring : retired_rings_)
    if (detail::ring_pinned(*ring)) orphans.push_back(std::move(ring)), ++kept;
  if (kept != 0)
    log(log_level::warn, "device '{}' destroyed while a host thread or scope_guard still used {} of its rings: kept until they are done",
        name_, kept);
}

DEVTAP_FUNC void device::retire_ring(std::shared_ptr<detail::ring_allocation> ring) {
  std::vector<std::shared_ptr<detail::ring_allocation>> freed;  // freed after the lock
  std::lock_guard lock(retired_mutex_);
  // Every ring retired before this one goes, unless a host thread still waits inside it.
  std::erase_if(retired_rings_, [&freed](std::shared_ptr<detail::ring_allocation>& r) {
    if (detail::ring_pinned(*r)) return false;
    freed.push_back(std::move(r));
    return true;
  });
  if (ring) retired_rings_.push_back(std::move(ring));
}

DEVTAP_END_NAMESPACE
