#pragma once
/** The owned claim: host producers only. A ring's first host producer thread owns its claims and
 *  moves the tail with a plain store instead of a locked CAS, whose full barrier made each claim
 *  wait for the previous record's stores to reach the reader's CPU (docs/ring.md, "The owned
 *  claim"). The first claim by any other thread ends the ownership for the ring's life: from then
 *  on every claim is a CAS, as before.
 *
 *  The plain store has no fence of its own, so the three Dekker pairs that relied on the CAS's
 *  (a claim against the reader's sleep, against close()'s count of what was claimed, and against
 *  another producer's claim) get their fence from the other side: a membarrier (heavy_fence),
 *  which orders the owner's stores as if it had fenced. Where the kernel has none, no thread ever
 *  owns a ring. */
#include <devtap/ring/layout.hpp>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <thread>

#if defined(__linux__)
#  include <linux/membarrier.h>
#  include <pthread.h>
#  include <sys/syscall.h>
#  include <unistd.h>
#endif

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// ring_producer_side::claim_owner: one of these, or the owning thread's claim token.
inline constexpr std::uint64_t claim_unowned = 0;    // no host claim yet
inline constexpr std::uint64_t claim_switching = 1;  // a second thread is ending the ownership
inline constexpr std::uint64_t claim_shared = 2;     // every claim is a CAS (for good)

/** This thread's claim token: the address of a thread-local, so never 0, 1 or 2, and unique among
 *  live threads (a token reused after its thread ended names no claim in progress). */
inline std::uint64_t this_thread_claim_token() noexcept {
  static thread_local const char token = 0;
  return reinterpret_cast<std::uintptr_t>(&token);
}

/** Set in a child of fork(): an owner's claim the parent left under way never ends there (its
 *  thread is gone), so a claim in the child does not wait for it (end_claim_ownership). */
inline std::atomic<bool> claims_forked{false};

/** Whether this process can fence other threads' CPUs (membarrier, private expedited; Linux 4.14,
 *  and not refused by a seccomp filter). Registered on the first call, which every host ring's
 *  allocation makes (memory.hpp): a claim, which may run in a signal handler, never initialises it. */
inline bool heavy_fence_available() noexcept {
#if defined(__linux__) && defined(__NR_membarrier)
  static const bool available = [] {
    const long commands = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    const bool registered = commands > 0 && (commands & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                            ::syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    if (registered) ::pthread_atfork(nullptr, nullptr, [] { claims_forked.store(true, std::memory_order_relaxed); });
    return registered;
  }();
  return available;
#else
  return false;
#endif
}

/** The errno of the first membarrier refused after registration (a seccomp filter installed later),
 *  or 0. Once set, no ring becomes owned, and each heavy fence on a ring owned before settles
 *  instead (heavy_fence); reported once, by a reader (report_heavy_fence_lost). ENOMEM does not set
 *  it: the kernel's cpumask allocation failed this once, and that fence alone settles. */
inline std::atomic<int> heavy_fence_lost{0};

/** heavy_fence_lost's errno the first time it is asked for after it was set, else 0: a reader's
 *  thread logs it (a claim, perhaps in a signal handler, cannot). */
inline int heavy_fence_lost_unreported() noexcept {
  static std::atomic<bool> reported{false};
  const int lost = heavy_fence_lost.load(std::memory_order_relaxed);
  return lost != 0 && !reported.exchange(true, std::memory_order_relaxed) ? lost : 0;
}

/** Whether a ring's first host claim may take its ownership now. */
inline bool rings_can_be_owned() noexcept {
  return heavy_fence_available() && heavy_fence_lost.load(std::memory_order_relaxed) == 0;
}

/** How long a settled fence waits: far longer than a store that another CPU has executed takes to
 *  leave its store buffer (nanoseconds to microseconds; a thread switched out has drained its own). */
inline constexpr long settle_fence_ns = 1'000'000;

/** A full fence on every CPU running a thread of this process: the heavy half of an asymmetric
 *  Dekker pair whose light half is a compiler fence (begin_owner_claim, ring_sleeping_reader). Only
 *  called where a ring is owned, which needs heavy_fence_available(). Should the kernel refuse it
 *  later, it settles: this CPU fences and waits settle_fence_ns, by which time any store the owner
 *  made before its look is visible, so the pair still holds, not by the kernel's word but in
 *  practice. Async-signal-safe (a claim in a handler may end an ownership). */
inline void heavy_fence() noexcept {
#if defined(__linux__) && defined(__NR_membarrier)
  const int saved_errno = errno;  // a signal handler's caller keeps its errno
  if (::syscall(__NR_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) [[unlikely]] {
    if (const int refused = errno != 0 ? errno : EPERM; refused != ENOMEM) {  // ENOMEM: transient
      int expected = 0;
      heavy_fence_lost.compare_exchange_strong(expected, refused, std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_seq_cst);
    timespec wait{0, settle_fence_ns};
    while (::nanosleep(&wait, &wait) != 0 && errno == EINTR) {
    }
  }
  errno = saved_errno;
#endif
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

/** Whether the owner has a window open: a plain claim or count under way (begin_owner_claim). */
inline bool owner_claim_under_way(const ring_view& ring) noexcept {
  return std::atomic_ref<std::uint64_t>(ring.producer->owner_windows_open).load(std::memory_order_acquire) != 0;
}

/** Ends the ring's ownership (a claim by a thread that does not own it): waits for the owner's
 *  windows under way, so every claim from here on is a CAS on the tail they left. Once per ring.
 *  Returns at once on the owner's own thread while another thread switches: that is a signal
 *  handler interrupting the owner, whose window the switcher waits for (its claim is a CAS, and
 *  only this CPU moves the words meanwhile). */
inline void end_claim_ownership(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint64_t> owner(ring.producer->claim_owner);
  std::atomic_ref<std::uint64_t> switching_from(ring.producer->claim_switching_from);
  for (unsigned spins = 0;; ++spins) {
    std::uint64_t seen = owner.load(std::memory_order_acquire);
    if (seen == claim_shared) return;
    if (seen == claim_switching && switching_from.load(std::memory_order_relaxed) == this_thread_claim_token()) return;
    if (seen != claim_switching) {
      switching_from.store(seen, std::memory_order_relaxed);  // (the same token from every thread that tries)
      // Release: switching_from before claim_switching (partner: the acquire load above).
      if (owner.compare_exchange_strong(seen, claim_switching, std::memory_order_acq_rel)) {
        // The owner either sees `claim_switching` at its next look, or the window it opened is
        // visible now (partner: begin_owner_claim's light fence).
        heavy_fence();
        while (owner_claim_under_way(ring) && !claims_forked.load(std::memory_order_relaxed)) std::this_thread::yield();
        owner.store(claim_shared, std::memory_order_release);  // partner: the acquire load above, and claimed_tail's
        return;
      }
      continue;
    }
    if (spins > 64) std::this_thread::yield();  // another thread switches, and may be descheduled
  }
}

/** Opens (+1) or closes (-1) one of the owner's windows: one instruction, so atomic against this
 *  thread's signal handlers, which open their own inside it; not locked (only the owner's thread
 *  writes the depth). Release as every x86 store: after what the window stored (partner:
 *  owner_claim_under_way). */
inline void owner_window_add(const ring_view& ring, std::int64_t delta) noexcept {
  std::uint64_t& open = ring.producer->owner_windows_open;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("addq %[delta], %[open]" : [open] "+m"(open) : [delta] "er"(delta) : "memory", "cc");
#else
  std::atomic_ref<std::uint64_t>(open).fetch_add(static_cast<std::uint64_t>(delta), std::memory_order_release);
#endif
}

/** The owner's store of a word only it moves while it owns the ring (the tail, the stamp count):
 *  `desired` if the word still holds `expected`, in one instruction, so a signal handler that
 *  interrupts the owner and moves the word too (its thread owns the ring) is never overwritten, and
 *  without a locked instruction: on x86-64 a cmpxchg without the lock prefix (atomic against this
 *  CPU's interrupts, not other CPUs': the ownership keeps those out), elsewhere a relaxed CAS (no
 *  fence either). Release as every x86 store: after the window opened. */
inline bool owner_store(std::uint64_t& word, std::uint64_t expected, std::uint64_t desired) noexcept {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  bool stored;
  asm volatile("cmpxchgq %[desired], %[word]"
               : "=@ccz"(stored), [word] "+m"(word), "+a"(expected)
               : [desired] "r"(desired)
               : "memory");
  return stored;
#else
  return std::atomic_ref<std::uint64_t>(word).compare_exchange_strong(expected, desired, std::memory_order_release,
                                                                     std::memory_order_relaxed);
#endif
}

/** Whether this thread owns the ring's claims; if so, a window is now open (a plain claim or count
 *  under way), which another thread's first claim waits for, until end_owner_claim. Short, for the
 *  hot path: anything else is not_owner_claim's. */
inline bool begin_owner_claim(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint64_t> owner(ring.producer->claim_owner);
  const std::uint64_t me = this_thread_claim_token();
  if (owner.load(std::memory_order_relaxed) != me) return false;
  owner_window_add(ring, 1);
  // Light half: the window before the look (partner: end_claim_ownership's heavy_fence).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (owner.load(std::memory_order_relaxed) == me) return true;
  owner_window_add(ring, -1);  // another thread ends the ownership: this claim is a CAS
  return false;
}

/** Closes the window begin_owner_claim opened, after the plain stores it covered. */
inline void end_owner_claim(const ring_view& ring) noexcept {
  std::atomic_signal_fence(std::memory_order_seq_cst);  // the stores before, then the close
  owner_window_add(ring, -1);
}

/** A host claim by a thread that does not own the ring (or not yet): the first one takes the
 *  ownership (where heavy_fence works), any other ends another thread's, once. This claim itself
 *  is a CAS either way. */
inline void not_owner_claim(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint64_t> owner(ring.producer->claim_owner);
  std::uint64_t seen = owner.load(std::memory_order_relaxed);
  // Locked: a reader or closer that saw `claim_unowned` (claimed_tail) is ordered before it.
  if (seen == claim_unowned &&
      owner.compare_exchange_strong(seen, rings_can_be_owned() ? this_thread_claim_token() : claim_shared,
                                    std::memory_order_seq_cst))
    return;
  if (seen != claim_shared && seen != this_thread_claim_token()) end_claim_ownership(ring);
}

/** The device's next stamp number (tap_stamp::sequence), for a host producer. The ring's owner
 *  takes it without a locked instruction, inside a window as its claims are, which another
 *  thread's first claim or stamp waits for (end_claim_ownership); a locked fetch_add per record cost
 *  stamped taps as much as the claim's CAS did (docs/performance.md). Any other thread ends the
 *  ownership first, then adds. */
inline std::uint64_t take_host_sequence(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint64_t> taps(ring.producer->taps);
  for (;;) {
    // Acquire: after the last owner's plain count (partner: end_claim_ownership's release).
    if (std::atomic_ref<std::uint64_t>(ring.producer->claim_owner).load(std::memory_order_acquire) == claim_shared)
      return taps.fetch_add(1, std::memory_order_relaxed);
    if (begin_owner_claim(ring)) {
      const std::uint64_t sequence = taps.load(std::memory_order_relaxed);
      const bool took = owner_store(ring.producer->taps, sequence, sequence + 1);  // else a handler's stamp came first
      end_owner_claim(ring);
      if (took) return sequence;
    } else {
      not_owner_claim(ring);  // takes an unowned ring, or ends another thread's ownership
      // Not the owner now (shared, or switching from this thread's interrupted window): locked.
      if (std::atomic_ref<std::uint64_t>(ring.producer->claim_owner).load(std::memory_order_acquire) != this_thread_claim_token())
        return taps.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

/** The tail, for a look that must see every claim made before a flag this thread has just set
 *  (seq_cst) was visible: the reader's sleep (`reader_sleeping`), close()'s count of what was
 *  claimed (`closed`). An owner's plain claim has no fence, so this look fences for it. */
inline std::uint64_t claimed_tail(const ring_view& ring) noexcept {
  const std::uint64_t owner = std::atomic_ref<std::uint64_t>(ring.producer->claim_owner).load(std::memory_order_seq_cst);
  if (owner != claim_unowned && owner != claim_shared) heavy_fence();  // partner: the owner's plain store, then its look
  return std::atomic_ref<std::uint64_t>(ring.producer->tail).load(std::memory_order_seq_cst);
}

}  // namespace detail
DEVTAP_END_NAMESPACE
