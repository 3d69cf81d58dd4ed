#pragma once
// What a merged consumer (merged_entry.hpp) keeps of each device: the records it holds, the queue they
// wait in, and what its reader set aside (internal).
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>
#include <devtap/tap/tap_info.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
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

// One device's held records, oldest first: a ring of slots that doubles when full and keeps its
// slots while records come and go. (A std::deque allocated a block per five records and freed it
// again, and the heap grew and shrank under the held records: a quarter of the merge's time went
// to malloc and page faults, docs/performance.md.) `release` gives the slots back once nothing is
// held, so a burst's memory does not stay for the receiver's life.
class held_queue {
public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  held_record& front() noexcept { return slots_[head_]; }
  const held_record& front() const noexcept { return slots_[head_]; }

  void reserve(std::size_t n) {  // (then n - size() pushes allocate nothing and cannot throw)
    if (n > slots_.size()) grow(std::max<std::size_t>(std::bit_ceil(n), 64));
  }
  void push_back(held_record&& r) {
    if (size_ == slots_.size()) grow(slots_.empty() ? 64 : slots_.size() * 2);
    slots_[(head_ + size_) & (slots_.size() - 1)] = std::move(r);
    ++size_;
  }
  void pop_front() noexcept {
    slots_[head_].heap.reset();  // a large record's bytes go now, not when the slot is reused
    head_ = (head_ + 1) & (slots_.size() - 1);
    --size_;
  }
  void clear() noexcept {
    while (size_ != 0) pop_front();
  }
  // Nothing held: the slots beyond `keep` go back to the heap.
  void release(std::size_t keep = 256) {
    if (size_ == 0 && slots_.size() > keep) slots_ = std::vector<held_record>(), head_ = 0;
  }

private:
  void grow(std::size_t slots) {  // a power of two: the mask
    std::vector<held_record> bigger(slots);
    for (std::size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }
  std::vector<held_record> slots_;
  std::size_t head_ = 0;  // the oldest record's slot
  std::size_t size_ = 0;
};

// What the merge knows of one device (under its lock).
struct merge_queue {
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
class merge_room {
public:
  explicit merge_room(std::size_t devices) : made_(devices) {}
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
};

// A device's records read but not yet handed in: its reader's alone.
struct merge_staging {
  std::vector<held_record> records;
  std::size_t bytes = 0;
  bool over_limit = false;  // its queue held more than the hold limit at the last hand-in
};

}  // namespace detail
DEVTAP_END_NAMESPACE
