#pragma once
// What a merged consumer (merged_entry.hpp) keeps of each device: the records it holds, the queue they
// wait in, and what its reader set aside (internal).
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>
#include <devtap/tap/tap_info.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <iterator>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A record's stamp and bytes, copied out of the ring (which frees them once the reader moves on);
// kept in place when small (most records): no allocation.
struct held_record {
  static constexpr std::size_t inline_bytes = 48;
  held_record() = default;
  held_record(const record_stamp& s, const std::byte* p, std::size_t n) : stamp(s), size(n) {
    if (n > inline_bytes) heap = std::make_unique<std::byte[]>(n);
    if (n != 0) std::memcpy(data(), p, n);
  }
  std::byte* data() { return heap ? heap.get() : small; }
  std::size_t footprint() const noexcept { return sizeof(held_record) + (heap ? size : 0); }  // the memory it takes
  record_stamp stamp{};
  std::size_t size = 0;
  std::uint64_t arrived = 0;  // the merge helper's looks so far when it joined its queue
  std::byte small[inline_bytes];
  std::unique_ptr<std::byte[]> heap;
};

// One device's held records, oldest first, in blocks of 256 that are kept and reused while records
// come and go. (A std::deque allocated a block per five records and freed it again, and the heap
// grew and shrank under the held records: a quarter of the merge's time went to malloc and page
// faults. One array that doubled stalled its reader for hundreds of ms, zeroing and moving millions
// of records, where another merge had to wait for that reader: docs/performance.md.) `release`
// gives the blocks but one back once nothing is held: a burst's memory does not stay for the receiver's life.
class held_queue {
public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  held_record& front() noexcept { return blocks_.front()->records[head_]; }
  const held_record& front() const noexcept { return blocks_.front()->records[head_]; }

  void reserve(std::size_t n) {  // (then n - size() pushes allocate nothing and cannot throw)
    while ((head_ + n + block_records - 1) / block_records > blocks_.size()) add_block();
  }
  void push_back(held_record&& r) {
    const std::size_t at = head_ + size_;
    if (at == blocks_.size() * block_records) add_block();
    blocks_[at / block_records]->records[at % block_records] = std::move(r);
    ++size_;
  }
  void pop_front() noexcept {
    front().heap.reset();  // a large record's bytes go now, not when the slot is reused
    --size_;
    if (++head_ == block_records || size_ == 0) {  // (emptied: start again at the first slot)
      if (head_ == block_records) spare_.push_back(std::move(blocks_.front())), blocks_.pop_front();
      head_ = 0;
    }
  }
  void clear() noexcept {
    while (size_ != 0) pop_front();
  }
  void release() {  // nothing held: every block but one goes back to the heap
    if (size_ != 0) return;
    if (blocks_.size() > 1) blocks_.resize(1);
    spare_.clear(), head_ = 0;
  }

private:
  static constexpr std::size_t block_records = 256;  // 24 KiB a block
  struct block {
    held_record records[block_records];
  };
  void add_block() {
    if (spare_.empty()) {
      blocks_.push_back(std::make_unique<block>());
    } else {
      blocks_.push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
  }
  std::deque<std::unique_ptr<block>> blocks_;  // in use, oldest first
  std::vector<std::unique_ptr<block>> spare_;  // emptied, for the next ones
  std::size_t head_ = 0;                       // the oldest record's slot in blocks_.front()
  std::size_t size_ = 0;
};

// A device's records read but not yet handed in: its reader's alone (or, posted, merge_posts's).
struct merge_staging {
  std::vector<held_record> records;
  std::size_t bytes = 0;
  bool over_limit = false;  // its queue held more than the hold limit at the last hand-in
  bool posted = false;      // records were posted (merge_posts) since the last hand-in
};

// What the merge knows of one device (under its lock).
struct merge_queue {
  // Takes records a reader set aside, arrived at the helper's look `now` (the moves cannot throw once
  // room is reserved: a bad_alloc leaves them where they were).
  void take(merge_staging& from, std::uint64_t now) {
    records.reserve(records.size() + from.records.size());
    last_arrival = now;
    for (held_record& h : from.records) h.arrived = now, records.push_back(std::move(h));
    bytes += from.bytes;
    from.records.clear(), from.bytes = 0;
  }

  held_queue records;
  const device* dev = nullptr;        // whose records they are (set at the start)
  std::uint64_t last_arrival = 0;     // the helper's looks so far when its last records arrived
  std::size_t bytes = 0;              // the memory its records take (held_record::footprint)
  bool reader_waits = false;          // its reader waits for room (wait_for_room)
  bool ended = false;                 // its stream ended (or close() gave up on the rest)
  bool finished = false;              // the consumer was told it ended
  std::uint64_t uncounted_records = 0;  // delivered, not yet in the device's stats (count_delivered)
  std::uint64_t uncounted_bytes = 0;
};

// Where a device's reader waits for room in a merge (back-pressure: merged_entry.hpp): on a lock of
// its own, not the merge's, which a delivery holds through the consumer's calls, so a wait ends on time.
// And what the readers learn from the merges: `holding` counts the receiver's merges that hold records.
// A reader waits for room only while one does (the one it waits for): held back, its device's next
// record for another merge could come after that merge took the device for quiet, and broke its order.
class merge_room {
public:
  merge_room(std::size_t devices, std::shared_ptr<std::atomic<int>> holding) : made_(devices), holding_(std::move(holding)) {}
  ~merge_room() { hold(false); }
  void hold(bool holds) {  // under the merge's lock: whether it holds records now
    if (holds == holds_) return;
    holds_ = holds;
    holding_->fetch_add(holds ? 1 : -1, std::memory_order_relaxed);
  }
  void expect(std::size_t device) {  // its queue passed the limit: its reader will wait
    std::lock_guard lock(mutex_);
    made_[device] = 0;
  }
  void make(std::size_t device) {  // its queue fell to half the limit
    {
      std::lock_guard lock(mutex_);
      made_[device] = 1;
    }
    cv_.notify_all();
  }
  template <class GiveUp>
  void wait(std::size_t device, std::chrono::steady_clock::time_point until, GiveUp give_up) {
    std::unique_lock lock(mutex_);
    cv_.wait_until(lock, until, [&] { return made_[device] != 0 || give_up(); });
    made_[device] = 0;
  }
  void wake_all() {  // for give_up: a reader between its look and its sleep sees it
    { std::lock_guard lock(mutex_); }
    cv_.notify_all();
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<char> made_;  // by device
  std::shared_ptr<std::atomic<int>> holding_;  // the receiver's (receiver_state::merges_holding)
  bool holds_ = false;
};

// How much a merge holds of a device before its reader waits (bytes of held_record::footprint), and
// the receiver's count of merges that hold records (merge_room).
struct merge_limits {
  std::size_t hold_limit;
  std::shared_ptr<std::atomic<int>> holding;
};

// Until `done()`, while `calls_returned` (calls into a merged consumer that returned) keeps moving;
// gives up (false) once it has not for 200 ms: close() is bounded however the consumer behaves.
template <class Done>
bool wait_while_moving(const std::atomic<std::uint64_t>& calls_returned, Done done) {
  std::uint64_t seen = calls_returned.load(std::memory_order_relaxed);
  for (int still = 0; still < 200; ++still) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (const auto now = calls_returned.load(std::memory_order_relaxed); now != seen) seen = now, still = 0;
  }
  return false;
}

// Records the readers posted to a merge, by device, until it takes them in under its lock: the
// first of a reader's two steps (device_reader::pass_on_staged). Under a lock of their own, which no
// call into the consumer holds: a reader never waits behind a call to post, and the merge sees every
// record a reader has posted before it next takes that device for quiet.
class merge_posts {
public:
  explicit merge_posts(std::size_t devices) : by_device_(devices) {}
  void post(std::size_t device_index, merge_staging& from) {  // the device's reader
    {
      std::lock_guard lock(mutex_);
      merge_staging& to = by_device_[device_index];
      if (to.records.empty()) {
        std::swap(to.records, from.records);  // (from keeps the empty one's room for the next records)
      } else {
        to.records.reserve(to.records.size() + from.records.size());
        std::move(from.records.begin(), from.records.end(), std::back_inserter(to.records));
      }
      to.bytes += from.bytes;
      any_.store(true, std::memory_order_release);  // partner: take_into's acquire
    }
    from.records.clear(), from.bytes = 0, from.posted = true;
  }
  // Under the merge's lock: every device's posted records join its queue (a bad_alloc leaves the
  // rest posted and is thrown).
  void take_into(std::vector<merge_queue>& queues, std::uint64_t now) {
    if (!any_.load(std::memory_order_acquire)) return;
    std::lock_guard lock(mutex_);
    for (std::size_t d = 0; d < by_device_.size(); ++d)
      if (!by_device_[d].records.empty()) queues[d].take(by_device_[d], now);
    any_.store(false, std::memory_order_relaxed);
  }
  std::size_t drop(std::size_t device_index) {  // how many of the device's records were posted
    std::lock_guard lock(mutex_);
    const std::size_t n = by_device_[device_index].records.size();
    by_device_[device_index].records.clear(), by_device_[device_index].bytes = 0;
    return n;
  }

private:
  std::mutex mutex_;
  std::vector<merge_staging> by_device_;
  std::atomic<bool> any_{false};  // something is posted (a hint: take_into looks under the lock)
};

}  // namespace detail
DEVTAP_END_NAMESPACE
