#pragma once
/** Where a ring's words live. A device allocates its ring through `device::allocate_ring`. */
#include <devtap/log.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/ring/owner.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>

#if defined(__unix__)
#  include <sys/mman.h>
#endif

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A fresh stamp key for a ring (layout.hpp): different for every ring of the process and every run,
 *  so neither a payload nor an earlier ring's bytes in reused memory can carry the stamps it expects.
 *  Not a secret against code that reads the ring's view; unpredictable to data. */
inline std::uint64_t new_stamp_key(const void* salt) noexcept {
  static std::atomic<std::uint64_t> rings{0};
  std::uint64_t x = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                    reinterpret_cast<std::uintptr_t>(salt) ^ (rings.fetch_add(1, std::memory_order_relaxed) << 48);
  for (int round = 0; round < 2; ++round) {  // splitmix64's finalizer, twice: every input bit reaches every output bit
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    x ^= x >> 31;
  }
  return stamp_key_from(x);
}

/** A ring and the views of it: the host reader's, and the producers' (device pointers for CUDA). */
struct ring_allocation {
  virtual ~ring_allocation() = default;
  ring_view host;
  ring_view producer;
  bool producers_wake_reader = true;  // false: the reader polls (CUDA producers cannot notify)
  bool host_can_produce = true;       // false: host threads cannot claim (the tail lives on the GPU)
  // What the producers' errors call the device (outfeed::device_name): kept with the ring, so a tap
  // that reaches a closed ring after its device and client went still names it.
  std::string device_name;
  // The device's clock against the host's steady clock, for its stamps (timestamps on): a stamp's
  // host time is its device time minus `clock_offset_ns`, within +- `clock_error_ns`. Host rings
  // stamp with the host's clock (0, 0); calibrate_clock measures a GPU's at open.
  std::int64_t clock_offset_ns = 0;
  std::uint64_t clock_error_ns = 0;
  virtual void calibrate_clock() {}

  /** Gives the ring's memory back while the allocation stays valid (a closed ring, kept for late
   *  producers). */
  virtual void release_memory() noexcept {}

  /** Bytes claimed so far (the tail): what `receiver::flush` waits for. Never launches device work.
   *  Empty when the position could not be read by `deadline` (a GPU whose copy engine does not answer). */
  virtual std::optional<std::uint64_t> claimed_position(std::chrono::steady_clock::time_point deadline) const {
    (void)deadline;  // host memory: read at once
    // seq_cst, and fenced for an owner's plain claim: an abandoned reader counts up to here (partner:
    // host_tap's ring_closed after its claim).
    return claimed_tail(host);
  }
};

/** Logs, once, that the kernel refused a membarrier after registration (owner.hpp,
 *  heavy_fence_lost). Called by readers: a claim, perhaps in a signal handler, cannot log. */
inline void report_heavy_fence_lost() {
  if (const int lost = heavy_fence_lost_unreported(); lost != 0) [[unlikely]]
    log(log_level::warn, "membarrier refused after registration ({}): rings already owned by one thread now wait {} ms at "
        "each reader sleep and ownership switch, and no ring is owned from now on", std::strerror(lost), settle_fence_ns / 1'000'000);
}

/** A ring entirely in ordinary host memory: the cpu backend's, and the tests'. The data is
 *  reserved, not touched (an anonymous private mapping), so opening costs nothing per byte and memory
 *  is committed only as records are written. */
struct host_ring_allocation final : ring_allocation {
  explicit host_ring_allocation(std::uint64_t capacity) : capacity_(capacity) {
    (void)heavy_fence_available();  // registered here, never first in a claim (owner.hpp)
    producer_side_ = std::make_unique<ring_producer_side>();
    consumer_side_ = std::make_unique<ring_consumer_side>();
#if defined(__unix__)
    void* p = ::mmap(nullptr, capacity, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<std::byte*>(p);
#else
    data_ = static_cast<std::byte*>(::operator new(capacity, std::align_val_t{64}));
#endif
    host = ring_view{producer_side_.get(), consumer_side_.get(), data_, capacity, new_stamp_key(data_)};
    producer = host;
  }
  ~host_ring_allocation() override {
#if defined(__unix__)
    ::munmap(data_, capacity_);
#else
    ::operator delete(data_, std::align_val_t{64});
#endif
  }

  /** Gives the data's pages back to the system. Only once nobody reads the
   *  ring; a late producer that still writes there only faults a page back in. */
  void release_memory() noexcept override {
#if defined(__unix__)
    ::madvise(data_, capacity_, MADV_DONTNEED);
#endif
  }

private:
  std::uint64_t capacity_;
  std::unique_ptr<ring_producer_side> producer_side_;
  std::unique_ptr<ring_consumer_side> consumer_side_;
  std::byte* data_ = nullptr;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
