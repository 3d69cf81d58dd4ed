#pragma once
/** What a receiver asks of its devices: a ring (device::allocate_ring), checked; a callback once the
 *  work submitted so far has finished (device::after_pending_work), and what it does when a device
 *  cannot take one. */
#include <devtap/backend/device.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/receiver/reader.hpp>
#include <devtap/ring/close.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/ring/wake.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** dev.allocate_ring(capacity), checked: a device's error, or a ring that is not what was asked
 *  for (none, another capacity, a view without memory), is an outfeed_error naming both. */
inline std::unique_ptr<ring_allocation> allocate_checked_ring(device& dev, std::uint64_t capacity, const std::string& receiver_name,
                                                             const std::string& device_name) {
  const std::string where = "devtap: receiver '" + receiver_name + "': device '" + device_name + "': allocate_ring(" +
                            std::to_string(capacity) + ") ";
  std::unique_ptr<ring_allocation> ring;
  try {
    ring = dev.allocate_ring(capacity);
  } catch (const std::exception& e) {
    throw outfeed_error(where + "failed: " + e.what());
  }
  // (The host's view of a ring only devices produce into, a CUDA one, has no producer side.)
  const auto complete = [capacity](const ring_view& v, bool needs_producer) {
    return (v.producer != nullptr || !needs_producer) && v.consumer != nullptr && v.data != nullptr && v.capacity == capacity;
  };
  if (!ring) throw outfeed_error(where + "returned no ring");
  if (!complete(ring->host, ring->host_can_produce) || !complete(ring->producer, true))
    throw outfeed_error(where + "returned a ring that is not one of " + std::to_string(capacity) +
                        " bytes (a view without memory, or another capacity)");
  return ring;
}

/** Receivers kept for good: a device that could not queue a callback cannot say when its work,
 *  which may still use the receiver (a tap, a call), is done. Reachable, so not a leak. */
inline void keep_for_good(std::shared_ptr<receiver_state> state) noexcept {
  try {
    static auto* const kept = new std::pair<std::mutex, std::vector<std::shared_ptr<receiver_state>>>();
    std::lock_guard lock(kept->first);
    kept->second.push_back(std::move(state));
  } catch (...) {  // out of memory again: `state` goes with this frame, as it would have without us
  }
}

/** dev.after_pending_work(fn), for a device that may fail to take `fn` (out of memory, a user
 *  backend's error): `fn` is then dropped, `keep` kept for good, the failure logged and returned
 *  (empty: queued). The receiver's close(), destructor and constructor must go on either way. */
inline std::string post_after_pending_work(device& dev, std::function<void()> fn, const std::shared_ptr<receiver_state>& keep) noexcept {
  std::string why;  // (every step below may fail to allocate in turn: each is optional)
  try {
    dev.after_pending_work(std::move(fn));
    return why;
  } catch (const std::exception& e) {
    try {
      why = message_of(e);
    } catch (...) {
    }
  } catch (...) {
  }
  if (why.empty()) why = "unknown error";  // (short: no allocation)
  keep_for_good(keep);
  try {
    log(log_level::error, "receiver '{}': device '{}' could not queue a callback behind its work ({}): not waited for",
        keep->name, dev.name(), why);
  } catch (...) {
  }
  return why;
}

/** Ends a stream without an end marker (a ring the host does not produce into, as a CUDA device's;
 *  or one with no room for it): the reader ends it once the ring is empty and, where the host
 *  produces, every claim made before this was read. */
inline void end_without_marker(device_stream& stream) noexcept {
  close_ring(stream.ring->host, ring_ending);
  stream.device_done.store(true, std::memory_order_seq_cst);  // partner: the reader's seq_cst loads
  wake_reader(stream.ring->host);
}

/** Ends a stream without waiting for its device's work (which could not be waited for: `why`), and
 *  without blocking close(): with an end marker where one fits now (behind the records claimed
 *  before it, which the reader still waits for), else as a device whose producers cannot write one. */
inline void end_stream_without_waiting(receiver_state& state, device_stream& stream, const std::string& why) noexcept {
  if (stream.ended_by_close.exchange(true, std::memory_order_acq_rel)) return;  // the device ran the callback and then threw
  try {  // (the report's text only: the stream ends without it too)
    stream.work_failure = "could not wait for its pending work (" + why + "): its stream was ended before that work";
  } catch (...) {
  }
  state.mark_done(stream.work_done);
  if (stream.ring->host_can_produce && write_end_marker(stream.ring->host, overflow_policy::drop)) return;
  end_without_marker(stream);
}

/** Waits until the work submitted to each stream's device before the call has finished (its
 *  after_pending_work callback ran), or `deadline`; returns the devices still busy. A device that
 *  cannot queue the callback throws that error from here (barrier()). */
inline std::vector<std::string> wait_for_pending_work(const std::vector<std::unique_ptr<device_stream>>& streams,
                                                      std::chrono::steady_clock::time_point deadline) {
  struct pending_work {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<char> done;
  };
  auto work = std::make_shared<pending_work>();  // shared: a late callback outlives a timed-out wait
  work->done.assign(streams.size(), 0);
  for (std::size_t i = 0; i < streams.size(); ++i)
    streams[i]->dev->after_pending_work([work, i] {
      {
        std::lock_guard lock(work->mutex);
        work->done[i] = 1;
      }
      work->cv.notify_all();
    });
  std::vector<std::string> busy;
  std::unique_lock lock(work->mutex);
  work->cv.wait_until(lock, deadline, [&] { return std::find(work->done.begin(), work->done.end(), 0) == work->done.end(); });
  for (std::size_t i = 0; i < work->done.size(); ++i)
    if (!work->done[i]) busy.push_back(streams[i]->device_name);
  return busy;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
