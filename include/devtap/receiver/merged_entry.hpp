#pragma once
/** A merged consumer (`receiver::attach(fn, devtap::merged)`): one consumer instance fed by every
 *  device in timestamp order (internal). Each device's reader hands its records in; a record goes
 *  out once every other device has shown a later one, ended, or been quiet for `merge_lag`; ties
 *  go by device, then sequence. A helper thread delivers what waits only on a quiet device. */
#include <devtap/backend/device.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/ring/wake.hpp>
#include <devtap/tap/tap_info.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

class merged_entry final : public consumer_entry {
public:
  /** Reports what the consumer threw, for the device whose record it was given. */
  using failure_sink = std::function<void(std::size_t device_index, std::exception_ptr)>;

  /** `inner` is the consumer itself, made for one instance shared by `devices` devices. */
  merged_entry(std::shared_ptr<consumer_entry> inner, std::size_t devices, std::chrono::milliseconds lag,
               failure_sink on_failure, std::uint32_t receiver_id)
      : consumer_entry(inner->fingerprint, inner->name), inner_(std::move(inner)), queues_(devices),
        lag_(std::max(lag, std::chrono::milliseconds(0))), on_failure_(std::move(on_failure)),
        helper_([this, receiver_id](std::stop_token stop) {
          receiver_read_here = receiver_id;  // it runs the consumer as the readers do (ring/wake.hpp)
          deliver_when_quiet(stop);
        }) {}

  ~merged_entry() override {
    helper_.request_stop();
    {
      std::lock_guard lock(mutex_);
    }
    cv_.notify_all();
  }

  // The record is checked and kept (its bytes copied: the ring frees them when this returns), then
  // whatever is now in order goes out.
  delivery deliver(std::size_t device_index, const device& dev, const record_stamp& stamp, const std::byte* payload,
                   std::size_t size) override {
    if (!inner_->accepts(payload, size)) return delivery::mismatch;
    std::unique_lock lock(mutex_);
    queue& q = queues_[device_index];
    q.dev = &dev;
    ++q.arrivals;  // (no clock read per record: the helper tells quiet devices by their arrivals)
    q.quiet_looks = 0;
    q.records.emplace_back(stamp, payload, size);
    deliver_ready(lock);
    // The helper sleeps until something is held; while records are held it looks by itself, so a
    // record costs no wake-up.
    if (!helper_looking_ && holding()) {
      helper_looking_ = true;
      cv_.notify_one();
    }
    return delivery::delivered;
  }

  void finish(std::size_t device_index, const device& dev) override {
    std::unique_lock lock(mutex_);
    queue& q = queues_[device_index];
    q.dev = &dev;
    q.ended = true;
    deliver_ready(lock);
  }

  bool accepts(const std::byte* payload, std::size_t size) const override { return inner_->accepts(payload, size); }

private:
  struct held {  // a record's bytes, kept in place when small (most records): no allocation
    static constexpr std::size_t inline_bytes = 48;
    held(const record_stamp& s, const std::byte* p, std::size_t n) : stamp(s), size(n) {
      if (n > inline_bytes) heap = std::make_unique<std::byte[]>(n);
      if (n != 0) std::memcpy(data(), p, n);
    }
    std::byte* data() { return heap ? heap.get() : small; }
    record_stamp stamp;
    std::size_t size;
    std::byte small[inline_bytes];
    std::unique_ptr<std::byte[]> heap;
  };
  struct queue {
    std::deque<held> records;
    const device* dev = nullptr;
    std::uint64_t arrivals = 0;          // records handed in so far
    std::uint64_t arrivals_looked = 0;   // ... when the helper last looked
    unsigned quiet_looks = 0;            // the helper's looks in a row that saw nothing arrive
    bool ended = false;
    bool finished = false;  // the consumer was told this device ended
  };

  // Under the lock: delivers every record that is in order now. Returns when the next one must wait
  // for a device that is neither ahead, ended nor quiet (or nothing is held).
  void deliver_ready(std::unique_lock<std::mutex>& lock) {
    (void)lock;
    for (;;) {
      std::size_t first = queues_.size();
      for (std::size_t d = 0; d < queues_.size(); ++d) {
        const auto& r = queues_[d].records;
        if (r.empty()) continue;
        if (first == queues_.size() || std::tuple(r.front().stamp.time_ns, d, r.front().stamp.sequence) <
                                           std::tuple(queues_[first].records.front().stamp.time_ns, first,
                                                      queues_[first].records.front().stamp.sequence))
          first = d;
      }
      bool may_go = first != queues_.size();
      for (std::size_t d = 0; may_go && d < queues_.size(); ++d) {
        const queue& q = queues_[d];
        may_go = d == first || !q.records.empty() || q.ended || q.quiet_looks >= 2;
      }
      if (!may_go) break;
      queue& q = queues_[first];
      held& h = q.records.front();
      try {
        inner_->deliver(first, *q.dev, h.stamp, h.data(), h.size);
      } catch (...) {
        on_failure_(first, std::current_exception());
      }
      q.records.pop_front();
    }
    for (std::size_t d = 0; d < queues_.size(); ++d) {  // a device that ended, with nothing left held
      queue& q = queues_[d];
      if (!q.ended || q.finished || !q.records.empty()) continue;
      q.finished = true;
      try {
        inner_->finish(d, *q.dev);
      } catch (...) {
        on_failure_(d, std::current_exception());
      }
    }
  }

  // The helper: while records are held, looks again every half lag, so a record waiting only on a
  // device that went quiet goes out between one and one and a half `merge_lag` after that device's
  // last record.
  bool holding() const {
    return std::any_of(queues_.begin(), queues_.end(), [](const queue& q) { return !q.records.empty(); });
  }

  void deliver_when_quiet(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      if (!holding()) {
        helper_looking_ = false;
        cv_.wait(lock, [&] { return stop.stop_requested() || helper_looking_; });
        continue;
      }
      cv_.wait_for(lock, std::max(lag_ / 2, std::chrono::milliseconds(1)), [&] { return stop.stop_requested(); });
      if (stop.stop_requested()) break;
      for (queue& q : queues_) {  // quiet: nothing arrived in two looks half a lag apart (a lag at least)
        q.quiet_looks = q.arrivals == q.arrivals_looked ? q.quiet_looks + 1 : 0;
        q.arrivals_looked = q.arrivals;
      }
      deliver_ready(lock);
    }
  }

  std::shared_ptr<consumer_entry> inner_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<queue> queues_;
  const std::chrono::milliseconds lag_;
  failure_sink on_failure_;
  bool helper_looking_ = false;  // under mutex_: the helper is looking every half lag (records are held)
  std::jthread helper_;  // last: started once everything it reads exists, joined first
};

}  // namespace detail
DEVTAP_END_NAMESPACE
