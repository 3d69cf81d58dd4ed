#pragma once
/** Who sleeps and who wakes whom. Two doorbells, each with its partner named:
 *
 *  - the reader sleeps on `doorbell` (reader_sleep) after setting `reader_sleeping` and looking at
 *    the tail once more; a commit (produce.hpp) that finds the flag set clears it and rings
 *    (ring_sleeping_reader). The claim's seq_cst CAS and the reader's seq_cst flag store form a
 *    Dekker pair: either the reader sees the claim, or the commit sees the flag. An owner's plain
 *    claim (owner.hpp) has no fence: the reader's look at the tail fences for it (claimed_tail).
 *  - a blocked host producer sleeps on `doorbell_space` (host_wait) after counting itself in
 *    `producers_waiting` and trying once more; the reader's publish (read.hpp) that sees a waiter
 *    bumps the epoch (wake_producers). Same Dekker pair, on the head instead of the tail.
 *
 * CUDA producers cannot be woken by the host, nor wake it: they poll with `__nanosleep` backoff
 * (device_wait), and the reader polls their ring (ring_allocation::producers_wake_reader). */
#include <devtap/ring/layout.hpp>
#include <devtap/ring/owner.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A spin-wait hint: lets the sibling hyperthread run and saves power while polling. */
DEVTAP_HOST_DEVICE inline void cpu_relax() noexcept {
#if !defined(__CUDA_ARCH__) && (defined(__x86_64__) || defined(__i386__))
  __builtin_ia32_pause();
#elif !defined(__CUDA_ARCH__) && defined(__aarch64__)
  asm volatile("yield");
#endif
}

/** The ring this thread reads (set by a receiver's reader thread for its ring), or null. A tap or a
 *  call from there into that same ring must not wait for space or for an answer: only this thread
 *  would provide them. */
inline thread_local const ring_consumer_side* ring_read_here = nullptr;
/** The receiver (its id) whose reader this thread is, or 0: a call from one of its consumers or
 *  handlers into any of its devices could wait in a cycle of readers (A's handler waits for B,
 *  B's for A), so it is refused. */
inline thread_local std::uint32_t receiver_read_here = 0;
/** Set on a reader thread whenever it returns from its sleep (mostly a commit's doorbell; also a
 *  stop, a close or a spurious wake), until it next runs out of records: the scheduler may have
 *  placed it on the CPU of the producer that woke it (a caller that then spins for its answer:
 *  answer_call lets it run). A wake by anything else costs at most one needless yield. */
inline thread_local bool reader_just_woke = false;

/** Wakes the reader unconditionally (stop, close, a CUDA device done): partner of reader_sleep. */
inline void wake_reader(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint32_t> bell(ring.consumer->doorbell);
  bell.fetch_add(1, std::memory_order_seq_cst);
  bell.notify_all();
}

/** The commit's half of the reader's sleep: rings only when the reader said it sleeps, and clears
 *  the flag, so one commit rings, not every commit until the reader runs (a futex storm). */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void ring_sleeping_reader(const ring_view& ring) noexcept {
  if constexpr (Atomics::wakes_reader) {
    typename Atomics::template shared_ref<std::uint32_t> sleeping(ring.consumer->reader_sleeping);
    // Light half for an owner's claim: the stores before stay before the look (partner: claimed_tail).
    std::atomic_signal_fence(std::memory_order_seq_cst);
    if (sleeping.load(Atomics::seq_cst) != 0 && sleeping.exchange(0, Atomics::seq_cst) != 0) {
      typename Atomics::template shared_ref<std::uint32_t> bell(ring.consumer->doorbell);
      bell.fetch_add(1, Atomics::seq_cst);
      bell.notify_one();
    }
  }
}

/** The reader's sleep until a commit rings (or wake_reader). `reader_position` is what it has read;
 *  `stay_awake` is checked after the flag is set (a stop request, a device done). Returns whether a
 *  record was claimed but not yet committed (worth a yield, not a sleep). */
template <class StayAwake>
bool reader_sleep(const ring_view& ring, std::uint64_t reader_position, StayAwake stay_awake) {
  std::atomic_ref<std::uint32_t> bell(ring.consumer->doorbell);
  std::atomic_ref<std::uint32_t> sleeping(ring.consumer->reader_sleeping);
  const std::uint32_t seen = bell.load(std::memory_order_seq_cst);
  sleeping.store(1, std::memory_order_seq_cst);  // pairs with try_claim's seq_cst CAS (produce.hpp)
  const bool claimed = claimed_tail(ring) != reader_position;  // (or the owner's plain store: owner.hpp)
  if (!claimed && !stay_awake()) {
    bell.wait(seen, std::memory_order_seq_cst);
    reader_just_woke = true;
  }
  sleeping.store(0, std::memory_order_relaxed);
  return claimed;
}

/** Wakes every producer blocked for space: partner of host_wait's sleep. After a publish, or when
 *  the reader goes away. */
inline void wake_producers(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint32_t> epoch(ring.consumer->doorbell_space);
  epoch.fetch_add(1, std::memory_order_seq_cst);
  epoch.notify_all();
}

/** How a blocked host producer waits (claim<host_atomics, host_wait>, produce.hpp): spin, then
 *  yield, then sleep on `doorbell_space` until the reader publishes space (wake_producers). */
struct host_wait {
  static bool closed_due(unsigned) noexcept { return true; }  // `closed` is host memory: cheap to read
  /** A claim about to sleep takes its turn (`big_claim`): one that keeps spinning would win every race for space. */
  DEVTAP_HOST_DEVICE static bool takes_turn(unsigned attempt) noexcept { return attempt > 128; }

  /** Waits a little before attempt `attempt` (1, 2, ...), then tries again; true when claimed. */
  template <class TryClaim>
  static bool wait_then_claim(const ring_view& ring, unsigned attempt, std::uint32_t give_up_at, TryClaim try_claim_now) {
    if (attempt <= 64) {
      cpu_relax();
      return try_claim_now(false);
    }
    if (attempt <= 128) {
      std::this_thread::yield();
      return try_claim_now(false);
    }
    std::atomic_ref<std::uint32_t> waiting(ring.consumer->producers_waiting);
    std::atomic_ref<std::uint32_t> epoch(ring.consumer->doorbell_space);
    waiting.fetch_add(1, std::memory_order_seq_cst);  // pairs with ring_reader::publish's look at it
    const std::uint32_t seen = epoch.load(std::memory_order_seq_cst);
    const bool claimed = try_claim_now(false);
    if (!claimed && std::atomic_ref<std::uint32_t>(ring.consumer->closed).load(std::memory_order_seq_cst) < give_up_at)
      epoch.wait(seen, std::memory_order_seq_cst);
    waiting.fetch_sub(1, std::memory_order_seq_cst);
    return claimed;
  }
};

/** Backoff of a blocked CUDA producer: `__nanosleep` on the GPU; a short sleep on the host (tests). */
DEVTAP_HOST_DEVICE inline void producer_backoff(unsigned ns) {
#if defined(__CUDA_ARCH__)
#  if __CUDA_ARCH__ >= 700
  __nanosleep(ns);
#  endif
#else
  std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
#endif
}

/** How a blocked CUDA producer waits (claim<cuda_atomics, device_wait>; docs/cuda.md,
 *  "Back-pressure"): sleeps doubling up to a cap; between its rare reads of the host's head (a PCIe
 *  round trip each) it polls the cached head in device memory, which another waiter may refresh. */
struct device_wait {
  static constexpr unsigned first_sleep_ns = 64;     ///< doubled per attempt ...
  static constexpr unsigned max_sleep_ns = 4096;     ///< ... up to this
  static constexpr unsigned head_read_every = 4;     ///< at the cap: read the host's head every 4th attempt
  static constexpr unsigned closed_read_every = 16;  ///< and `closed` every 16th

  DEVTAP_HOST_DEVICE static bool closed_due(unsigned attempt) noexcept { return attempt % closed_read_every == 0; }
  DEVTAP_HOST_DEVICE static bool takes_turn(unsigned) noexcept { return false; }  // only a big claim: many threads wait

  /** Sleeps before attempt `attempt` (1, 2, ...), then tries again when a claim may succeed. */
  DEVTAP_NO_EXEC_CHECK
  template <class TryClaim>
  DEVTAP_HOST_DEVICE static bool wait_then_claim(const ring_view&, unsigned attempt, std::uint32_t, TryClaim try_claim_now) {
    const unsigned doublings = attempt - 1;
    const unsigned sleep_ns = doublings < 6 ? first_sleep_ns << doublings : max_sleep_ns;
    producer_backoff(sleep_ns);
    const bool at_cap = sleep_ns >= max_sleep_ns;
    // try_claim reads the host's head when the cached one shows no room: only when due.
    return try_claim_now(at_cap && attempt % head_read_every != 0);
  }
};

}  // namespace detail
DEVTAP_END_NAMESPACE
