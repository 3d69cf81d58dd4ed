#pragma once
/** Ending a stream. `closed` (layout.hpp) only grows: ring_open → ring_ending (no new taps; the
 *  end-of-stream record follows) → ring_reader_gone (nobody frees space any more). Producers look
 *  at it only when they would otherwise wait or have just claimed; every close wakes them. */
#include <devtap/ring/layout.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/ring/wake.hpp>

#include <atomic>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** Raises the ring's `closed` state to at least `state` and wakes blocked producers (they re-read it).
 *  Never lowers it: a late end marker must not revive a ring whose reader has gone. */
inline void close_ring(const ring_view& ring, std::uint32_t state) noexcept {
  std::atomic_ref<std::uint32_t> closed(ring.consumer->closed);
  std::uint32_t seen = closed.load(std::memory_order_seq_cst);
  while (seen < state && !closed.compare_exchange_weak(seen, state, std::memory_order_seq_cst)) {
  }
  wake_producers(ring);
}

/** Writes the end-of-stream record (consumer id end_of_stream_id) of a host-produced ring, after
 *  marking it ring_ending: a claim made after this one sees the mark (try_claim's acq_rel CAS) and
 *  aborts. Waits for space unless the reader has gone (`policy` block) or not at all (drop); false
 *  if it could not write it. */
inline bool write_end_marker(const ring_view& ring, overflow_policy policy = overflow_policy::block) {
  close_ring(ring, ring_ending);
  std::uint64_t pos;
  if (claim<host_atomics, host_wait>(ring, record_bytes(0), policy, pos, ring_reader_gone) != claim_status::claimed)
    return false;
  commit<host_atomics>(ring, pos, end_of_stream_id, 0, 0);
  return true;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
