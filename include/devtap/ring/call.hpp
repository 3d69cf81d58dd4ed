#pragma once
/** Calls: device code asks the host and waits for the answer. The request is a ring record like a
 *  tap (produce.hpp), so its handler sees it after every record its caller made before it; the
 *  answer comes back through a reply slot the receiver's ring owns (layout.hpp), never through the
 *  caller's stack: a caller that gives up leaves nothing behind that the host could write into.
 *
 *   caller:  try_take_reply_slot (a free bit of reply_slots_taken, CAS; host callers in turn: host_take_reply_slot)
 *            -> record {[tap_stamp,] call_request{slot, sequence}, request} -> commit
 *               (the stamp with timestamps, as a tap's: the id then carries stamped_id_flag)
 *            -> await the slot's `answered` == sequence (host_await_answer / device_await_answer),
 *               or the reader gone (answers_ended): then there will be no answer
 *            -> read status, length, reply -> give_back_reply_slot
 *   reader:  the record reaches the handler in ring order -> answer_call: reply, status, length,
 *            then `answered` = sequence (release), then the bell if the caller sleeps
 *
 * The host never does a read-modify-write on a word a GPU changes (PCIe has no host-memory atomics
 * here): the taken bits are the callers' alone (device memory for CUDA), `answered` the host's. */
#include <devtap/errors.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/ring/wake.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

#if defined(__linux__)
#include <sched.h>  // sched_getcpu, a GNU extension
#endif

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** The first bytes of a call record's payload; the encoded request follows. */
struct call_request {
  std::uint32_t slot;      // the reply slot its caller holds
  std::uint32_t sequence;  // what the slot's `answered` becomes when it is answered
};
static_assert(sizeof(call_request) == 8);

DEVTAP_HOST_DEVICE inline unsigned lowest_clear_bit(std::uint32_t v) {
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__ffs(static_cast<int>(~v)) - 1);
#else
  return static_cast<unsigned>(std::countr_one(v));
#endif
}

/** Takes a free reply slot for a call; false when every slot is taken (the caller waits and counts it). */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool try_take_reply_slot(const ring_view& ring, std::uint32_t& slot) {
  for (std::uint32_t w = 0; w < reply_slot_count / 32; ++w) {
    typename Atomics::template producer_ref<std::uint32_t> taken(ring.producer->reply_slots_taken[w]);
    std::uint32_t bits = taken.load(Atomics::relaxed);
    while (bits != ~std::uint32_t{0}) {
      const unsigned bit = lowest_clear_bit(bits);
      // Acquire: the slot's last answer was read by its last holder before it gave the slot back.
      if (taken.compare_exchange_weak(bits, bits | (std::uint32_t{1} << bit), Atomics::acquire, Atomics::relaxed)) {
        slot = w * 32 + bit;
        return true;
      }
    }
  }
  return false;
}

/** How many reply slots no caller holds now. Host producers only: for CUDA the bits are device memory. */
inline std::int32_t free_reply_slots(const ring_view& ring) noexcept {
  std::int32_t taken = 0;
  for (std::uint32_t w = 0; w < reply_slot_count / 32; ++w)
    taken += std::popcount(std::atomic_ref<std::uint32_t>(ring.producer->reply_slots_taken[w]).load(std::memory_order_relaxed));
  return static_cast<std::int32_t>(reply_slot_count) - taken;
}

/** A host caller's reply slot, in turn; false if `closed()` became true while it waited. While
 *  callers wait for a slot, a newcomer takes a ticket behind them (a caller that just gave its slot
 *  back would otherwise take it again at once: one call waited 1.6 s behind 64 callers calling back
 *  to back), and only the oldest `window` tickets try, or one with fewer tickets ahead of it than
 *  slots free: waiters that are not running then hold up no slot (before, eight of them held the
 *  window while every slot was free), and none waits behind more than the callers ahead of it.
 *  Kernels take slots by try_take_reply_slot alone (cuda/call.cuh). `waited` is called once if this
 *  call had to wait. */
template <class Closed, class Waited>
bool host_take_reply_slot(const ring_view& ring, std::uint32_t& slot, Closed closed, Waited waited) {
  constexpr std::int32_t window = 8;
  std::atomic_ref<std::uint32_t> waiters(ring.producer->slot_waiters);
  if (waiters.load(std::memory_order_seq_cst) == 0 && try_take_reply_slot<host_atomics>(ring, slot)) return true;
  waited();
  waiters.fetch_add(1, std::memory_order_seq_cst);  // before the ticket: newcomers queue from now on
  std::atomic_ref<std::uint32_t> served(ring.producer->slot_tickets_served);
  const std::uint32_t ticket = std::atomic_ref<std::uint32_t>(ring.producer->slot_tickets_issued).fetch_add(1);
  bool taken = false;
  for (unsigned attempt = 0; !taken && !closed(); ++attempt) {
    // Signed: tickets after this one may be served first (within the window), leaving it behind `served`.
    if (const auto ahead = static_cast<std::int32_t>(ticket - served.load(std::memory_order_relaxed));
        ahead >= window && ahead >= free_reply_slots(ring)) {
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // not its turn yet
      attempt = 0;
    } else if (!(taken = try_take_reply_slot<host_atomics>(ring, slot))) {
      if (attempt < 64) cpu_relax();
      else if (attempt < 128) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
  if (taken) served.fetch_add(1, std::memory_order_relaxed);
  waiters.fetch_sub(1, std::memory_order_seq_cst);  // (a ring that closed: every waiter leaves, none is left behind)
  return taken;
}

/** Gives a slot back once its answer was read (partner: try_take_reply_slot's acquire). */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void give_back_reply_slot(const ring_view& ring, std::uint32_t slot) {
  typename Atomics::template producer_ref<std::uint32_t>(ring.producer->reply_slots_taken[slot / 32])
      .fetch_and(~(std::uint32_t{1} << (slot % 32)), Atomics::release);
}

/** Whether a caller holds a reply slot (a call is on its way or awaits its answer). Host producers
 *  only: for CUDA the bits are device memory. */
inline bool calls_in_flight(const ring_view& ring) noexcept {
  return free_reply_slots(ring) != static_cast<std::int32_t>(reply_slot_count);
}

/** The sequence the next call through `slot` (held by the caller) carries: one past its last answer. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE std::uint32_t next_call_sequence(const ring_view& ring, std::uint32_t slot) {
  return typename Atomics::template shared_ref<std::uint32_t>(ring.consumer->replies[slot].header.answered)
             .load(Atomics::acquire) + 1;
}

/** Whether the answer to call `sequence` is in `slot`. Acquire: partner of answer_call's store. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool call_answered(const ring_view& ring, std::uint32_t slot, std::uint32_t sequence) {
  return typename Atomics::template shared_ref<std::uint32_t>(ring.consumer->replies[slot].header.answered)
             .load(Atomics::acquire) == sequence;
}

/** Whether the reader has stopped for good: a call not answered yet never will be. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool answers_ended(const ring_view& ring) {
  return typename Atomics::template shared_ref<std::uint32_t>(ring.consumer->closed).load(Atomics::acquire) >=
         ring_reader_gone;
}

/** This thread's CPU + 1, or 0 where the system cannot say. */
inline std::uint32_t this_cpu_plus_one() noexcept {
#if defined(__linux__)
  const int cpu = sched_getcpu();
  return cpu < 0 ? 0 : static_cast<std::uint32_t>(cpu) + 1;
#else
  return 0;  // unknown: answer_call then never yields to its caller
#endif
}

/** A host caller notes its CPU in its slot before it sends the call (published by the commit). */
inline void note_caller_cpu(const ring_view& ring, std::uint32_t slot) noexcept {
  std::atomic_ref<std::uint32_t>(ring.consumer->replies[slot].header.caller_cpu)
      .store(this_cpu_plus_one(), std::memory_order_relaxed);
}

/** The reader's half: writes the answer to `request` and wakes its caller. `bytes` is cut to
 *  max_reply_bytes (a long failure message; replies are checked at serve() to fit). A reader just
 *  woken (reader_just_woke) whose caller spins on this same CPU lets it run at once: else the
 *  caller waits until the reader's idle spin ends (about 20 µs, docs/call.md). */
inline void answer_call(const ring_view& ring, call_request request, call_errc status, const void* bytes,
                        std::size_t length) noexcept {
  reply_slot& s = ring.consumer->replies[request.slot];
  // Read before the answer: once answered, the slot may pass to another caller, who writes it.
  const std::uint32_t caller_cpu = std::atomic_ref<std::uint32_t>(s.header.caller_cpu).load(std::memory_order_relaxed);
  const std::size_t n = length < max_reply_bytes ? length : max_reply_bytes;
  if (n != 0) std::memcpy(s.reply, bytes, n);
  s.header.status = static_cast<std::uint32_t>(status);
  s.header.length = static_cast<std::uint32_t>(n);
  // seq_cst, then the look at `caller_sleeps`: pairs with host_await_answer's flag-then-check. The
  // release half publishes the reply to the caller's acquire load (call_answered).
  std::atomic_ref<std::uint32_t>(s.header.answered).store(request.sequence, std::memory_order_seq_cst);
  if (std::atomic_ref<std::uint32_t>(s.header.caller_sleeps).load(std::memory_order_seq_cst) != 0) {
    std::atomic_ref<std::uint32_t> bell(s.header.bell);
    bell.fetch_add(1, std::memory_order_seq_cst);
    bell.notify_all();
  } else if (reader_just_woke && caller_cpu != 0 && caller_cpu == this_cpu_plus_one()) {
    reader_just_woke = false;  // once: a busy reader that yields to its callers delays all of them
    std::this_thread::yield();
  }
}

/** Wakes every host caller waiting for an answer, after `closed` reached ring_reader_gone
 *  (close_ring): each sees answers_ended and gives up. */
inline void wake_callers(const ring_view& ring) noexcept {
  for (reply_slot& s : ring.consumer->replies) {
    std::atomic_ref<std::uint32_t> bell(s.header.bell);
    bell.fetch_add(1, std::memory_order_seq_cst);
    bell.notify_all();
  }
}

/** How a host caller waits for the answer to `sequence` in `slot`: spins (an answer from a busy
 *  reader comes within microseconds), yields, then sleeps on the slot's bell. False when the reader
 *  went away instead (answers_ended). */
inline bool host_await_answer(const ring_view& ring, std::uint32_t slot, std::uint32_t sequence, bool woke_reader) {
  reply_slot_header& h = ring.consumer->replies[slot].header;
  for (unsigned attempt = 0;; ++attempt) {
    if (call_answered<host_atomics>(ring, slot, sequence)) return true;
    if (answers_ended<host_atomics>(ring)) return call_answered<host_atomics>(ring, slot, sequence);
    if (attempt < 2048) {
      cpu_relax();
      // This call woke the reader from its sleep: it is likely placed on this CPU, where spinning
      // would keep it from answering. Let it run now and then.
      if (woke_reader && attempt % 8 == 7) std::this_thread::yield();
    } else if (attempt < 2048 + 64) {
      std::this_thread::yield();
    } else {
      std::atomic_ref<std::uint32_t> sleeps(h.caller_sleeps);
      std::atomic_ref<std::uint32_t> bell(h.bell);
      sleeps.store(1, std::memory_order_seq_cst);  // pairs with answer_call's store-then-look
      const std::uint32_t seen = bell.load(std::memory_order_seq_cst);
      // seq_cst loads: either they see the answer (or the end), or the bell moved after `seen`.
      if (std::atomic_ref<std::uint32_t>(h.answered).load(std::memory_order_seq_cst) != sequence &&
          std::atomic_ref<std::uint32_t>(ring.consumer->closed).load(std::memory_order_seq_cst) < ring_reader_gone)
        bell.wait(seen, std::memory_order_seq_cst);
      sleeps.store(0, std::memory_order_relaxed);
    }
  }
}

/** How a CUDA caller waits: `__nanosleep` doubling from 64 ns to 4 µs between looks at its slot
 *  (system-scope acquire loads of pinned host memory); `closed` every 16th look at the cap. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool device_await_answer(const ring_view& ring, std::uint32_t slot, std::uint32_t sequence) {
  for (unsigned attempt = 0;; ++attempt) {
    if (call_answered<Atomics>(ring, slot, sequence)) return true;
    const unsigned sleep_ns = attempt < 6 ? 64u << attempt : 4096u;
    if (sleep_ns == 4096u && attempt % 16 == 0 && answers_ended<Atomics>(ring))
      return call_answered<Atomics>(ring, slot, sequence);
    producer_backoff(sleep_ns);
  }
}

/** Reads the answer the caller awaited: its status, and the reply (or message) bytes. */
struct call_answer {
  call_errc status;
  const std::byte* bytes;
  std::uint32_t length;
};
DEVTAP_HOST_DEVICE inline call_answer read_answer(const ring_view& ring, std::uint32_t slot) {
  const reply_slot& s = ring.consumer->replies[slot];
  return {static_cast<call_errc>(s.header.status), s.reply, s.header.length};
}

}  // namespace detail
DEVTAP_END_NAMESPACE
