#pragma once
/** A merged consumer (`receiver::attach(fn, devtap::merged)`): one consumer instance fed by every
 *  device in timestamp order (internal). Each device's reader hands its records in; a record goes
 *  out once every other device has shown a later one, ended, or been quiet for `merge_lag`; ties
 *  go by device, then sequence. A helper thread delivers what waits only on a quiet device. */
#include <devtap/backend/device.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/receiver/held_records.hpp>
#include <devtap/ring/wake.hpp>
#include <devtap/tap/tap_info.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <stop_token>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

class merged_entry final : public consumer_entry {
public:
  /** Counts, for the device whose records they were, what became of them once they left the
   *  entry: delivered (`records` records, `bytes` of payload, added up in batches: see
   *  count_delivered), thrown on (`error`; `at_end`: thrown at the stream's
   *  end, with no record lost), refused (the consumer had returned or failed before), or lost
   *  (close() had given up). Called with the entry's lock held. */
  struct outcome_sink {
    std::function<void(std::size_t device_index, std::uint64_t records, std::uint64_t bytes)> delivered;
    // at_ns: the time of the record the consumer threw on (0: at its end)
    std::function<void(std::size_t device_index, std::exception_ptr error, bool at_end, std::uint64_t at_ns)> failed;
    std::function<void(std::size_t device_index, delivery result)> refused;
    std::function<void(std::size_t device_index, std::uint64_t records)> lost;
  };

  /** `inner` is the consumer itself, made for one instance shared by `devices` (by index). */
  merged_entry(std::shared_ptr<consumer_entry> inner, const std::vector<const device*>& devices,
               std::chrono::milliseconds lag, merge_limits limits, outcome_sink sink, std::uint32_t receiver_id)
      : consumer_entry(inner->fingerprint, inner->name),
        core_(std::make_shared<core>(std::move(inner), devices, lag, std::move(limits), std::move(sink))) {
    stages_records = true;
    // The helper owns the core too: if user code it runs drops the entry's last owner, the entry is
    // destroyed on the helper (which it then lets go) while the core lives on until the helper ends.
    helper_ = std::jthread([c = core_, receiver_id](std::stop_token stop) {
      receiver_read_here = receiver_id;  // it runs the consumer as the readers do (ring/wake.hpp)
      c->deliver_when_quiet(stop);
    });
  }

  ~merged_entry() override {
    helper_.request_stop();
    // Destroyed by user code the helper runs, or while the helper is still inside a call close()
    // gave up waiting for: the sink's counters go with the receiver, so the helper counts nothing
    // more and leaves once that call returns. Orphaned first, then in_call (seq_cst, as in
    // call_consumer): the helper sees `orphaned` after its call, or was in none and is joined.
    core_->orphaned.store(true, std::memory_order_seq_cst);
    if (helper_.get_id() == std::this_thread::get_id() || core_->in_call.load(std::memory_order_seq_cst)) {
      helper_.detach();
      return;
    }
    core_->wake_helper();
  }  // (~jthread joins the helper)

  // The record is checked and kept (its bytes copied: the ring frees them when this returns). It is
  // set aside on its device's own list, which only that device's reader touches, and handed in with
  // the others under the lock when the reader passes them on (posted at once when `stage_limit`
  // wait): one lock per record, taken by every reader and the helper, was most of the merge's cost
  // (docs/performance.md). The sink counts each record's outcome when it has one.
  delivery deliver(std::size_t device_index, const device&, const record_stamp& stamp, const std::byte* payload,
                   std::size_t size) override {
    if (!core_->inner->accepts(payload, size)) return delivery::mismatch;
    auto& staged = core_->staged[device_index];
    // A record its device did not stamp (a CUDA kernel's) is placed at its arrival: time 0 would
    // put it before everything and hold every other device back.
    staged.records.emplace_back(stamp.stamped ? stamp : record_stamp{stamp_now_ns(), stamp.sequence, false}, payload,
                                size);
    staged.bytes += staged.records.back().footprint();
    if (staged.records.size() == stage_limit || staged.bytes >= core_->hold_limit / 2) try {
        post_staged(device_index);
      } catch (const std::bad_alloc&) {  // they stay set aside, for the reader's next pass (this one is kept)
      }
    return delivery::held;
  }
  void post_staged(std::size_t device_index) override {
    if (!core_->staged[device_index].records.empty()) core_->posts.post(device_index, core_->staged[device_index]);
  }
  void pass_on_staged(std::size_t device_index, bool lost) override {
    merge_staging& staged = core_->staged[device_index];
    if (!lost) post_staged(device_index);
    if (staged.posted || !staged.records.empty()) core_->hand_in(device_index, lost);
  }

  void wait_for_room(std::size_t device_index, std::chrono::steady_clock::time_point& until) override {
    if (core_->staged[device_index].over_limit) core_->wait_for_room(device_index, until);
  }

  void finish(std::size_t device_index, const device&) override {
    pass_on_staged(device_index, false);
    core_->end_of(device_index);
  }

  bool accepts(const std::byte* payload, std::size_t size) const override { return core_->inner->accepts(payload, size); }
  void describe(const std::byte* payload, std::size_t size, std::string& out) const override {
    core_->inner->describe(payload, size, out);
  }

  void close_held() override { core_->deliver_all_held(); }
  std::weak_ptr<const std::atomic<bool>> call_running_flag() const noexcept override {
    return std::shared_ptr<const std::atomic<bool>>(core_, &core_->in_call);  // (the helper owns the core too)
  }
  // Held records are counted lost by the next holder of the lock (deliver_ready), never delivered.
  void abandon_held() override { core_->closed.store(true, std::memory_order_seq_cst), core_->room.wake_all(); }  // (partner: may_call)

private:
  static constexpr std::size_t stage_limit = 64;

  struct core {
    core(std::shared_ptr<consumer_entry> inner_, const std::vector<const device*>& devices,
         std::chrono::milliseconds lag_, merge_limits limits, outcome_sink sink_)
        : inner(std::move(inner_)), room(devices.size(), std::move(limits.holding)), queues(devices.size()), posts(devices.size()),
          staged(devices.size()),
          sink(std::move(sink_)), hold_limit(limits.hold_limit),
          // Half a lag between looks, rounded up, at least 1 ms, at most an hour.
          look_every(std::clamp<std::chrono::milliseconds>(lag_ / 2 + lag_ % 2, std::chrono::milliseconds(1),
                                                           std::chrono::hours(1))),
          // Looks since the later of a record's and a silent device's last arrival that make the device
          // quiet for it: a lag's worth after the first (which may come at once): one to one and a half
          // lags. No clock: the looks tell time well enough, and no reader reads one. A lag <= 0: 2 ms.
          quiet_after(lag_.count() <= 0 ? 3
                                        : 1 + static_cast<std::uint64_t>(lag_ / look_every + (lag_ % look_every != lag_.zero()))) {
      // Known from the start: close() tells every device's end to the consumer, also one whose
      // reader it gave up on before that reader handed anything in.
      for (std::size_t d = 0; d < devices.size(); ++d) queues[d].dev = devices[d];
    }

    std::shared_ptr<consumer_entry> inner;
    std::mutex mutex;
    std::condition_variable cv;
    merge_room room;  // where readers wait for room in their queues (wait_for_room)
    std::vector<merge_queue> queues;
    merge_posts posts;                  // records posted by the readers, not yet in `queues`
    std::vector<merge_staging> staged;  // by device; not under the lock (each is one reader's)
    outcome_sink sink;
    const std::size_t hold_limit;
    const std::chrono::milliseconds look_every;
    const std::uint64_t quiet_after;
    const std::chrono::microseconds room_wait =  // a reader's longest wait for room: about a quarter lag, 0.5 to 50 ms
        std::clamp<std::chrono::microseconds>(look_every / 2, std::chrono::microseconds(500), std::chrono::milliseconds(50));
    std::uint64_t looks = 0;  // the helper's looks while records were held (under the lock)
    bool helper_looking = false;  // the helper looks every half lag (records are held)
    bool final_asked = false;     // close(): the helper delivers what is held, then sets final_done
    std::atomic<bool> final_done{false};
    // close() is done: the consumer is not called again. Set under the lock, or without it where
    // close() gave up waiting for a call stuck in the consumer; read under the lock before each call.
    std::atomic<bool> closed{false};
    std::atomic<bool> orphaned{false};                 // the entry was destroyed: the helper counts nothing more
    std::atomic<std::uint64_t> calls_returned{0};      // close() waits while this moves (written under the lock)
    std::atomic<bool> in_call{false};                  // a call to the consumer runs (written under the lock)

    // Called by the device's reader: what it posted joins the queues (every device's posts), and what
    // is in order goes out (`lost`: its stream was given up on; what it set aside or posted is
    // counted, never delivered).
    void hand_in(std::size_t device_index, bool lost) {
      merge_staging& from = staged[device_index];
      std::unique_lock lock(mutex);
      if (lost || closed.load(std::memory_order_acquire)) {  // (closed: a reader blocked here till close() was done)
        if (const std::size_t n = from.records.size() + posts.drop(device_index); n != 0) sink.lost(device_index, n);
        from.records.clear(), from.bytes = 0, from.posted = false;
        return;
      }
      posts.take_into(queues, looks);  // (a bad_alloc leaves them posted, and `posted` says so)
      from.posted = false;
      merge_queue& q = queues[device_index];
      deliver_ready();
      // The helper sleeps until something is held; while records are held it looks by itself, so a
      // record costs no wake-up.
      if (!helper_looking && holding()) {
        helper_looking = true;
        cv.notify_one();
      }
      from.over_limit = q.reader_waits = q.bytes > hold_limit;
      if (from.over_limit) room.expect(device_index);
    }

    // Back-pressure (the reader, with nothing set aside; device_reader::wait_for_merges): past its
    // limit, the device's reader waits till the merge passed half of it on, so its ring fills and
    // producers wait (or drop or fail) as behind any slow consumer; without it, a merge slower than
    // the taps held a whole run. At most room_wait, less than a lag, and never while another merge
    // holds records (device_reader::wait_for_merges): that merge never takes the device for quiet.
    void wait_for_room(std::size_t device_index, std::chrono::steady_clock::time_point& until) {
      const auto now = std::chrono::steady_clock::now();
      until = until == std::chrono::steady_clock::time_point{} ? now + room_wait : std::min(until, now + room_wait);
      room.wait(device_index, until, [&] { return closed.load(std::memory_order_acquire) || given_up_here(); });  // (given up: seen at `until`)
      staged[device_index].over_limit = false;  // (the next hand_in says again)
    }

    void end_of(std::size_t device_index) {
      std::unique_lock lock(mutex);
      merge_queue& q = queues[device_index];
      q.ended = true;
      deliver_ready();
    }

    // close() is done with the devices (some may have been given up on): what is held goes out now,
    // in order, on the helper (a call that blocks there cannot hold close() up), and nothing after
    // close() returns.
    void deliver_all_held() {
      // A reader close() gave up on may be stuck inside the consumer, holding the lock: wait while
      // calls keep returning (the helper may be busy delivering), give up once none has for 200 ms,
      // never hang. Given up, what is held is counted lost by the next holder of the lock.
      std::unique_lock lock(mutex, std::defer_lock);
      if (wait_while_moving(calls_returned, [&] { return lock.try_lock(); })) {
        for (merge_queue& q : queues) q.ended = true;
        final_asked = helper_looking = true;
        lock.unlock();
        cv.notify_all();
        // The same rule for the helper's calls.
        wait_while_moving(calls_returned, [&] { return final_done.load(std::memory_order_acquire); });
      }
      closed.store(true, std::memory_order_seq_cst);  // partner: may_call (then close() looks at in_call)
      room.wake_all();
    }

    // Whether a call into the consumer may start: not once close() gave up on the consumer. seq_cst
    // on both sides (here in_call then closed; close_held's closed then close()'s look at in_call):
    // close() sees this call coming (and keeps the devices it may use), or this call sees it closed.
    bool may_call() {
      in_call.store(true, std::memory_order_seq_cst);
      if (!closed.load(std::memory_order_seq_cst)) return true;
      in_call.store(false, std::memory_order_seq_cst);
      return false;
    }

    // Under the lock: one call into the consumer (`error`: what it threw), marked for ~merged_entry
    // and counted for close()'s wait. False when the entry went meanwhile: count nothing more.
    template <class Call>
    bool call_consumer(Call call, std::exception_ptr& error) {
      in_call.store(true, std::memory_order_relaxed);
      try {
        call();
      } catch (...) {
        error = std::current_exception();
      }
      in_call.store(false, std::memory_order_seq_cst);  // then orphaned: see ~merged_entry
      calls_returned.store(calls_returned.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return !orphaned.load(std::memory_order_seq_cst);
    }

    void wake_helper() {
      { std::lock_guard lock(mutex); }
      cv.notify_all();
    }

    bool holding() const {
      return std::any_of(queues.begin(), queues.end(), [](const merge_queue& q) { return !q.records.empty(); });
    }

    // Under the lock. Delivered records are added to their device's stats in batches: whichever
    // reader delivers a record writes to the counters of the device it came from, and one add per
    // record moved their line between the readers' CPUs every time (a quarter of the merged
    // throughput, docs/performance.md). A batch goes in at `count_batch` records, at each look of
    // the helper (half a lag), when nothing is held any more, before a device's end is delivered,
    // and at close: exact whenever the merge is idle, ended or closed.
    static constexpr std::uint64_t count_batch = 64;
    void count_delivered(merge_queue& q, std::size_t device_index) {
      if (q.uncounted_records == 0) return;
      sink.delivered(device_index, q.uncounted_records, q.uncounted_bytes);
      q.uncounted_records = q.uncounted_bytes = 0;
    }
    void count_all_delivered() {
      for (std::size_t d = 0; d < queues.size(); ++d) count_delivered(queues[d], d);
    }

    // Under the lock: delivers every record that is in order now; stops at one that must wait for a
    // device that is neither ahead, ended nor quiet for it.
    void deliver_ready() {
      // Records of every device: `closed` says when to stop, not the calling reader's stream.
      const thread_mark any_stream(stream_given_up_here, nullptr);
      for (;;) {
        if (closed.load(std::memory_order_acquire)) {  // close() gave up on a call stuck in the consumer
          count_all_delivered();
          for (std::size_t d = 0; d < queues.size(); ++d) {
            if (const std::size_t n = queues[d].records.size() + posts.drop(d); n != 0) sink.lost(d, n);
            queues[d].records.clear();
            queues[d].bytes = 0;
          }
          room.hold(false), room.wake_all();
          return;
        }
        try {  // each look at the queues sees every record a reader has posted (merge_posts)
          posts.take_into(queues, looks);
        } catch (...) {  // out of memory: they stay posted, and nothing goes out before them (no end either)
          return;
        }
        std::size_t first = queues.size();
        for (std::size_t d = 0; d < queues.size(); ++d) {
          const auto& r = queues[d].records;
          if (r.empty()) continue;
          if (first == queues.size() || std::tuple(r.front().stamp.time_ns, d, r.front().stamp.sequence) <
                                            std::tuple(queues[first].records.front().stamp.time_ns, first,
                                                       queues[first].records.front().stamp.sequence))
            first = d;
        }
        if (first == queues.size()) break;
        merge_queue& q = queues[first];
        held_record& h = q.records.front();
        // Every other device has shown a later record (what it holds comes after h), ended, or sent
        // nothing for a lag since h arrived: quiet for h, whatever it was for earlier records (a
        // device silent before, whose next record is still in its busy reader, is waited for again).
        bool may_go = true;
        for (std::size_t d = 0; may_go && d < queues.size(); ++d) {
          const merge_queue& other = queues[d];
          if (d == first || !other.records.empty() || other.ended) continue;
          may_go = looks - std::max(h.arrived, other.last_arrival) >= quiet_after;  // (arrivals are never ahead of looks)
        }
        if (!may_go) break;
        delivery result = delivery::delivered;
        std::exception_ptr error;
        if (!may_call()) {  // closed meanwhile: the loop's top counts what is held, unless the entry
          if (orphaned.load(std::memory_order_seq_cst)) return;  // went (its destructor saw in_call: see ~merged_entry)
          continue;
        }
        if (!call_consumer([&] { result = inner->deliver(first, *q.dev, h.stamp, h.data(), h.size); }, error))
          return;  // the sink's receiver is gone
        if (error) {
          sink.failed(first, error, false, h.stamp.time_ns);
        } else if (result == delivery::delivered) {
          ++q.uncounted_records;
          q.uncounted_bytes += h.size;
          if (q.uncounted_records == count_batch) count_delivered(q, first);
        } else {
          sink.refused(first, result);
        }
        q.bytes -= h.footprint();
        q.records.pop_front();
        if (q.reader_waits && q.bytes <= hold_limit / 2) q.reader_waits = false, room.make(first);
      }
      const bool holds = holding();
      room.hold(holds);
      if (!holds) count_all_delivered();  // idle: the stats are exact
      for (std::size_t d = 0; d < queues.size(); ++d) {  // a device that ended, with nothing left held
        merge_queue& q = queues[d];
        if (!q.ended || q.finished || !q.records.empty()) continue;
        count_delivered(q, d);  // other devices may still hold records: this one's stats are exact at its end
        q.finished = true;
        std::exception_ptr error;
        if (!may_call()) return;  // close() gave up on the consumer: no end after it returned
        if (!call_consumer([&] { inner->finish(d, *q.dev); }, error)) return;  // the sink's receiver is gone
        if (error) sink.failed(d, error, true, 0);
      }
    }

    // The helper: while records are held, looks every half lag, so a record waiting only on a device
    // that sent nothing goes out one to one and a half lags after the later of its own arrival and
    // that device's last.
    void deliver_when_quiet(std::stop_token stop) {
      std::unique_lock lock(mutex);
      while (!stop.stop_requested()) {
        if (final_asked) {  // close(): every device ended, or was given up on
          final_asked = false;
          deliver_ready();
          final_done.store(true, std::memory_order_release);  // pairs with deliver_all_held's acquire
          if (orphaned.load(std::memory_order_acquire)) return;
          continue;
        }
        if (!holding()) {
          helper_looking = false;
          for (merge_queue& q : queues) q.records.release();  // a burst's blocks go back while nothing is held
          cv.wait(lock, [&] { return stop.stop_requested() || helper_looking || final_asked; });
          continue;
        }
        cv.wait_for(lock, look_every, [&] { return stop.stop_requested() || final_asked; });
        if (stop.stop_requested()) break;
        if (final_asked) continue;
        ++looks;
        deliver_ready();
        if (orphaned.load(std::memory_order_acquire)) return;
        count_all_delivered();
      }
    }
  };

  std::shared_ptr<core> core_;
  std::jthread helper_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
