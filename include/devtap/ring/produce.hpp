#pragma once
/** Producing records: claim space, write, commit (or abort), and the blocking claim that applies
 *  an overflow_policy. Every producer runs these functions — cpu threads with host_atomics,
 *  CUDA threads with cuda_atomics — so the protocol exists once. Layout: layout.hpp. */
#include <devtap/ring/layout.hpp>
#include <devtap/ring/owner.hpp>
#include <devtap/ring/wake.hpp>

#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

DEVTAP_NO_EXEC_CHECK
template <class Atomics, bool Plain>
DEVTAP_HOST_DEVICE bool try_claim_tail(const ring_view& ring, std::uint64_t bytes, std::uint64_t& pos, bool past_big_claim);

/** A host claim by a thread that does not own the ring: a CAS, after the ownership step
 *  (not_owner_claim). Out of line, so the owner's claim stays small where it is inlined. */
template <class Atomics>
[[gnu::noinline]] bool try_claim_not_owner(const ring_view& ring, std::uint64_t bytes, std::uint64_t& pos,
                                           bool past_big_claim) {
  not_owner_claim(ring);
  return try_claim_tail<Atomics, false>(ring, bytes, pos, past_big_claim);
}

/** Claims `bytes` (a record_bytes value) at the tail; false if the ring lacks space now. A record
 *  that does not fit before the end of the ring is preceded by padding to the end; when the
 *  padding and the record together are more than a ring (a record above half the ring), the padding
 *  is claimed and committed alone first, and the record then waits for room from the ring's start.
 *  While a waiting claim holds its turn (`big_claim`, set by claim below: one above half the ring,
 *  or a host claim about to sleep), the ring is full to every other claim but those
 *  `past_big_claim`: that claim's own, and a tap from the receiver's own threads, which cannot wait. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool try_claim(const ring_view& ring, std::uint64_t bytes, std::uint64_t& pos,
                                  bool past_big_claim = false) {
  if constexpr (Atomics::wakes_reader) {  // host producers: the ring's owner claims without a lock (owner.hpp)
    // Shared for good: a CAS at once (through the owner's look first, 4 producers lost a fifth).
    // Acquire: after the last owner's plain claims (partner: end_claim_ownership's release).
    if (std::atomic_ref<std::uint64_t>(ring.producer->claim_owner).load(std::memory_order_acquire) == claim_shared)
      return try_claim_tail<Atomics, false>(ring, bytes, pos, past_big_claim);
    if (begin_owner_claim(ring)) [[likely]]
      return try_claim_tail<Atomics, true>(ring, bytes, pos, past_big_claim);
    return try_claim_not_owner<Atomics>(ring, bytes, pos, past_big_claim);
  } else {
    return try_claim_tail<Atomics, false>(ring, bytes, pos, past_big_claim);
  }
}

/** try_claim's work. `Plain`: this thread owns the ring's claims and has
 *  opened a window (begin_owner_claim), so no other thread moves the tail meanwhile; every return
 *  closes it (end_owner_claim). */
DEVTAP_NO_EXEC_CHECK
template <class Atomics, bool Plain>
DEVTAP_HOST_DEVICE bool try_claim_tail(const ring_view& ring, std::uint64_t bytes, std::uint64_t& pos, bool past_big_claim) {
  typename Atomics::template producer_ref<std::uint64_t> tail(ring.producer->tail);
  typename Atomics::template producer_ref<std::uint64_t> head_cache(ring.producer->head_cache);
  // Relaxed: only fairness depends on it (partner: claim's take and release of it).
  if (!past_big_claim &&
      typename Atomics::template producer_ref<std::uint64_t>(ring.producer->big_claim).load(Atomics::relaxed) != 0) {
    if constexpr (Plain) end_owner_claim(ring);
    return false;
  }
  std::uint64_t t = tail.load(Atomics::relaxed);
  for (;;) {
    const std::uint64_t pad = claim_padding(ring.capacity, t, bytes);
    const std::uint64_t span = pad + bytes > ring.capacity ? pad : pad + bytes;  // padding alone, or both
    if (t + span - head_cache.load(Atomics::acquire) > ring.capacity) {
      const std::uint64_t h =
          typename Atomics::template shared_ref<std::uint64_t>(ring.consumer->head).load(Atomics::acquire);
      head_cache.store(h, Atomics::release);  // racing stores may leave an older head: only conservative
      if (static_cast<std::int64_t>(h - t) > 0) {  // `t` is stale: the reader is past it, so the ring
        t = tail.load(Atomics::relaxed);           // is not full; the difference would wrap. Retry.
        continue;
      }
      if (t + span - h > ring.capacity) {
        if constexpr (Plain) end_owner_claim(ring);
        return false;
      }
    }
    // acq_rel: a claim after the end-of-stream claim sees `closed` (close.hpp sets it first).
    // seq_cst where the reader may sleep: this CAS and commit()'s look at `reader_sleeping` pair
    // with reader_sleep's flag-then-tail check (wake.hpp), so no commit needs a locked store of its own.
    // The owner's plain store has neither: claimed_tail's heavy fence stands in (owner.hpp), and
    // a claim by another thread ends the ownership before its CAS.
    constexpr auto order = Atomics::wakes_reader ? Atomics::seq_cst : Atomics::acq_rel;
    if constexpr (Plain) {
      // Release: after the window opened (partner: owner_claim_under_way).
      if (!owner_store(ring.producer->tail, t, t + span)) {
        // A signal handler on this thread claimed meanwhile (its window nested in this one): look
        // at the ownership again before the next plain store; no longer the owner, a CAS.
        if (std::atomic_ref<std::uint64_t>(ring.producer->claim_owner).load(std::memory_order_relaxed) !=
            this_thread_claim_token()) {
          end_owner_claim(ring);
          return try_claim_not_owner<Atomics>(ring, bytes, pos, past_big_claim);
        }
        t = tail.load(Atomics::relaxed);
        continue;
      }
      // Light half again: the store before this thread's looks at `closed` and `reader_sleeping`
      // (partner: claimed_tail's heavy fence).
      std::atomic_signal_fence(std::memory_order_seq_cst);
    } else if (!tail.compare_exchange_weak(t, t + span, order, Atomics::relaxed))
      continue;
    if (pad != 0)  // the wrap: the rest of the ring becomes one padding record (partner: inspect, read.hpp)
      typename Atomics::template shared_ref<std::uint64_t>(ring.header_at(t)->stamp)
          .store(ring.stamp(t, stamp_padding), Atomics::release);
    if (span == pad + bytes) {
      pos = t + pad;
      if constexpr (Plain) end_owner_claim(ring);
      return true;
    }
    // The padding alone. A reader that went to sleep before this claim must wake to read it: the
    // record's own claim below may need exactly that space, and wait for it (partner: reader_sleep).
    ring_sleeping_reader<Atomics>(ring);
    t += pad;  // now claim the record at the start of the ring
  }
}

/** Whether a claim of `bytes` would fit by the producers' cached head alone, without reading the
 *  consumer's head. A blocked CUDA producer polls this word (device memory) between its rare reads
 *  of the real head (host memory, a PCIe round trip each): a head another producer refreshed frees
 *  every waiter. Only a hint: try_claim decides. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool fits_cached(const ring_view& ring, std::uint64_t bytes) {
  const std::uint64_t t = typename Atomics::template producer_ref<std::uint64_t>(ring.producer->tail).load(Atomics::relaxed);
  const std::uint64_t h =
      typename Atomics::template producer_ref<std::uint64_t>(ring.producer->head_cache).load(Atomics::relaxed);
  const std::uint64_t pad = claim_padding(ring.capacity, t, bytes);
  return t + (pad + bytes > ring.capacity ? pad : pad + bytes) - h <= ring.capacity;
}

/** Publishes the record claimed at `pos`, whose payload is already written. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void commit(const ring_view& ring, std::uint64_t pos, std::uint32_t consumer_id,
                               std::uint64_t fingerprint, std::uint32_t payload_bytes) {
  record_header* h = ring.header_at(pos);
  h->length = payload_bytes + static_cast<std::uint32_t>(sizeof(record_header));
  h->consumer_id = consumer_id;
  h->fingerprint = fingerprint;
  // Release: the payload and the three words above before the stamp; partner: inspect's acquire load (read.hpp).
  typename Atomics::template shared_ref<std::uint64_t>(h->stamp).store(ring.stamp(pos, stamp_record), Atomics::release);
  ring_sleeping_reader<Atomics>(ring);  // wake.hpp: the reader may have gone to sleep before this claim
}

/** Gives back a claim: the reader skips it. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void abort(const ring_view& ring, std::uint64_t pos, std::uint64_t bytes) {
  record_header* h = ring.header_at(pos);
  h->length = static_cast<std::uint32_t>(bytes);
  // Release: the length before the stamp; partner: inspect's acquire load (read.hpp).
  typename Atomics::template shared_ref<std::uint64_t>(h->stamp).store(ring.stamp(pos, stamp_discard), Atomics::release);
  ring_sleeping_reader<Atomics>(ring);  // as commit: a waiter for space may need the reader to skip it
}

/** Adds records a producer did not write to the ring's drop counters (host memory). */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void count_dropped(const ring_view& ring, std::uint64_t records, std::uint64_t bytes) {
  typename Atomics::template shared_ref<std::uint64_t>(ring.consumer->dropped_records).fetch_add(records, Atomics::relaxed);
  typename Atomics::template shared_ref<std::uint64_t>(ring.consumer->dropped_bytes).fetch_add(bytes, Atomics::relaxed);
}

/** ORs a sticky_* code into the ring's error word; a nonzero `detail_value` is kept if it is the first. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void set_sticky(const ring_view& ring, std::uint32_t code, std::uint32_t detail_value) {
  if (detail_value != 0) {
    std::uint32_t expected = 0;
    typename Atomics::template shared_ref<std::uint32_t>(ring.consumer->sticky_detail)
        .compare_exchange_strong(expected, detail_value, Atomics::relaxed, Atomics::relaxed);
  }
  typename Atomics::template shared_ref<std::uint32_t>(ring.consumer->sticky_error).fetch_or(code, Atomics::release);
}

/** A waiting claim of `bytes` (above half the ring, or about to sleep) takes `big_claim`, if no other holds it. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool take_big_claim(const ring_view& ring, std::uint64_t bytes) {
  std::uint64_t none = 0;
  return typename Atomics::template producer_ref<std::uint64_t>(ring.producer->big_claim)
      .compare_exchange_strong(none, bytes, Atomics::relaxed, Atomics::relaxed);
}

/** Its holder, once its claim is made or has given up, lets the other claims go. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void release_big_claim(const ring_view& ring) {
  typename Atomics::template producer_ref<std::uint64_t>(ring.producer->big_claim).store(0, Atomics::release);
  // Host producers that waited behind it may sleep until the reader publishes space, and a claim
  // that gave up (closed) leaves nothing for the reader to free: wake them (partner: host_wait).
  if constexpr (Atomics::wakes_reader) wake_producers(ring);
}

/** What a claim under an overflow policy came to. */
enum class claim_status : std::uint32_t {
  claimed = 0,  ///< `pos` holds the claimed position
  dropped = 1,  ///< `drop` policy, ring full: not written
  full = 2,     ///< `error` policy, ring full: not written
  closed = 3,   ///< `block` policy, and the ring's `closed` reached `give_up_at` while waiting
};

/** Claims `bytes` under `policy`: `block` waits as `Wait` says (host_wait, device_wait: wake.hpp)
 *  and gives up once `closed` reaches `give_up_at` (taps: ring_ending; the end marker:
 *  ring_reader_gone), so no producer waits for a reader that is gone. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics, class Wait>
DEVTAP_HOST_DEVICE claim_status claim(const ring_view& ring, std::uint64_t bytes, overflow_policy policy, std::uint64_t& pos,
                                      std::uint32_t give_up_at = ring_ending) {
  if (try_claim<Atomics>(ring, bytes, pos)) return claim_status::claimed;
  if (policy == overflow_policy::drop) return claim_status::dropped;
  if (policy == overflow_policy::error) return claim_status::full;
  typename Atomics::template shared_ref<std::uint32_t> closed(ring.consumer->closed);
  // A record above half the ring fits only once the ring has (nearly) drained, and small claims
  // refill it as fast as the reader frees it: on one CPU such a claim waited as long as they went
  // on. So the first of them to wait takes `big_claim`, and other claims wait behind it (try_claim).
  // So does a host claim about to sleep (Wait::takes_turn): one that keeps spinning would win every
  // race for the space the reader frees.
  const bool big = bytes > ring.capacity / 2;
  bool holds_big_claim = false;
  auto try_claim_now = [&](bool only_if_cached_fits) {
    return (!only_if_cached_fits || fits_cached<Atomics>(ring, bytes)) && try_claim<Atomics>(ring, bytes, pos, holds_big_claim);
  };
  auto done = [&](claim_status status) {
    if (holds_big_claim) release_big_claim<Atomics>(ring);
    return status;
  };
  for (unsigned attempt = 1;; ++attempt) {
    if (Wait::closed_due(attempt) && closed.load(Atomics::acquire) >= give_up_at) return done(claim_status::closed);
    if ((big || Wait::takes_turn(attempt)) && !holds_big_claim) holds_big_claim = take_big_claim<Atomics>(ring, bytes);
    if (Wait::wait_then_claim(ring, attempt, give_up_at, try_claim_now)) return done(claim_status::claimed);
  }
}

/** Accounts for `records` records (`bytes` ring bytes) that a claim which came to `status` did not
 *  write, for producers that cannot throw: counted as dropped; `full` also sets sticky_ring_full. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void account_unwritten(const ring_view& ring, claim_status status, std::uint64_t records,
                                          std::uint64_t bytes) {
  if (status == claim_status::claimed) return;
  if (status == claim_status::full) set_sticky<Atomics>(ring, sticky_ring_full, 0);
  count_dropped<Atomics>(ring, records, bytes);
}

}  // namespace detail
DEVTAP_END_NAMESPACE
