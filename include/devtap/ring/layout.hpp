#pragma once
/** The ring's layout: what every word means and where it lives. The whole protocol is this folder:
 *  layout.hpp (here), produce.hpp (claim, commit, abort, the blocking claim), owner.hpp (the
 *  owned claim: one host thread's claims without a locked instruction), read.hpp (peek, release,
 *  publish), wake.hpp (who sleeps, who wakes whom), close.hpp (closing, end of stream), memory.hpp
 *  (allocation). docs/ring.md draws it on one page.
 *
 * Memory: `data` is `capacity` bytes (a power of two). Positions are 64-bit byte counts that never
 * wrap; they are compared by difference, so `tail - head <= capacity` holds across the 2^64 wrap too.
 * Free space is never cleaned: what tells a record of this lap from stale bytes is its stamp.
 *
 *   record at pos & (capacity-1), 8-byte aligned, never straddles the end:
 *   +-------------+------------+-------------+-------------+---------+
 *   | stamp u64   | length u32 | consumer u32| fingerprint | payload | -> padded to 8
 *   +-------------+------------+-------------+--- u64 -----+---------+
 *   stamp = (pos ^ key) | kind: the commit word, written last. `key` is drawn per ring (top bit set,
 *   low 3 bits clear), so zeroed memory, an earlier lap's stamps (another pos) and payload bytes
 *   (which cannot know the key) never match; the reader computes the stamp it expects at its head.
 *   kind record     length = header + payload bytes
 *   kind padding    skip to the end of the ring: the tail end before a wrap (only its stamp is written)
 *   kind discard    skip `length` bytes: an aborted claim
 *
 * Producer: try_claim (CAS on tail, or a plain store by the ring's owner; pad at the wrap) -> write
 * payload -> commit (or abort).
 * Reader: peek the stamp at head -> consumer step -> release (advance its private head; the head is
 * published in batches, one store for many records). Only the atomics differ between cpu and CUDA: the `Atomics`
 * policy says where each word lives (see host_atomics here, cuda_atomics in devtap/cuda). */
#include <devtap/config.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE

/** What a tap does when its device's share of the budget is full. */
enum class overflow_policy : std::uint32_t {
  block,  ///< wait for the receiver to free space: lossless, back-pressure reaches the device
  drop,   ///< never wait: the record is dropped and counted
  error,  ///< throw outfeed_error (cpu); a CUDA tap records a sticky error
};

namespace detail {

struct record_header {
  std::uint64_t stamp;        // the commit word: stamp_at(key, pos, kind), stored last with release
  std::uint32_t length;       // header + payload bytes (record), bytes skipped (discard)
  std::uint32_t consumer_id;  // 0 is the end-of-stream marker
  std::uint64_t fingerprint;  // structural type fingerprint of the payload
};
static_assert(sizeof(record_header) == 24);

/** What a committed stamp says the bytes at its position are. */
enum stamp_kind : std::uint64_t {
  stamp_record = 0,   ///< a record: the header's other words and the payload are valid
  stamp_padding = 1,  ///< the rest of the ring, before a wrap (only the stamp is written: it may be 8 bytes)
  stamp_discard = 2,  ///< an aborted claim of `length` bytes
};
inline constexpr std::uint64_t stamp_kind_mask = 7;  // positions are 8-aligned: the key's low bits are free

/** The stamp a record of `kind` at position `pos` carries in a ring keyed `key` (ring_view::stamp_key). */
DEVTAP_HOST_DEVICE constexpr std::uint64_t stamp_at(std::uint64_t key, std::uint64_t pos, std::uint64_t kind) {
  return (pos ^ key) | kind;
}
/** Makes a ring's stamp key from any 64 bits: top bit set (so a zero word never reads as a stamp while
 *  positions stay below 2^63, centuries of traffic) and low bits clear (the kind goes there). */
DEVTAP_HOST_DEVICE constexpr std::uint64_t stamp_key_from(std::uint64_t bits) {
  return (bits | (std::uint64_t{1} << 63)) & ~stamp_kind_mask;
}

inline constexpr std::uint32_t end_of_stream_id = 0;
// ring_consumer_side::closed, which only grows: taps stop at `ring_ending`; the end marker's own
// claim stops only at `ring_reader_gone` (close.hpp).
inline constexpr std::uint32_t ring_open = 0;
inline constexpr std::uint32_t ring_ending = 1;       // no new taps: the stream is ending
inline constexpr std::uint32_t ring_reader_gone = 2;  // the reader stopped: nobody frees space any more
inline constexpr std::uint32_t sticky_record_too_large = 1;  // a record over max_record_bytes was refused
inline constexpr std::uint32_t sticky_ring_full = 2;         // overflow_policy::error met a full ring
inline constexpr std::uint32_t sticky_stale_point = 4;       // a tap_point of another (or no) receiver
inline constexpr std::uint64_t max_ring_capacity = std::uint64_t{1} << 31;
// The largest record in any ring (1 GiB - 8): a limit of the API, kept where the former length-word flags put it.
inline constexpr std::uint64_t max_record_limit = (std::uint64_t{1} << 30) - 8;

DEVTAP_HOST_DEVICE constexpr std::uint64_t align8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }
/** Bytes a record with `payload` bytes takes in the ring. */
DEVTAP_HOST_DEVICE constexpr std::uint64_t record_bytes(std::uint64_t payload) {
  return align8(sizeof(record_header) + payload);
}
/** Largest record (header included) a ring accepts: the whole ring, up to max_record_limit. A record
 *  above half the ring may have to wait for the ring to drain; other claims wait behind it (claim,
 *  produce.hpp). */
DEVTAP_HOST_DEVICE constexpr std::uint64_t max_record_bytes(std::uint64_t capacity) {
  return capacity < max_record_limit ? capacity : max_record_limit;
}

// Calls (ring/call.hpp): each device has reply_slot_count slots for answers, in the consumer side.
inline constexpr std::uint32_t reply_slot_count = 64;
inline constexpr std::uint32_t reply_slot_bytes = 256;

struct reply_slot_header {
  std::uint32_t answered = 0;       // the commit word of an answer: the sequence of the call it answers
  std::uint32_t status = 0;         // call_errc of that answer
  std::uint32_t length = 0;         // bytes of the reply (or of the failure's message) in `reply`
  std::uint32_t caller_sleeps = 0;  // a host caller waits on `bell`: the answer must ring it
  std::uint32_t bell = 0;           // bumped and notified by such an answer, and when the reader goes
  std::uint32_t caller_cpu = 0;     // a host caller's CPU + 1 (0: unknown, a kernel's): see answer_call
  std::uint32_t unused[2] = {};
};
/** The largest reply a call can carry (a failure's message is cut to it). */
inline constexpr std::uint32_t max_reply_bytes = reply_slot_bytes - sizeof(reply_slot_header);

struct alignas(64) reply_slot {  // host memory (pinned and mapped for CUDA): the host writes, the caller reads
  reply_slot_header header;
  std::byte reply[max_reply_bytes] = {};
};
static_assert(sizeof(reply_slot) == reply_slot_bytes);

struct ring_producer_side {                // cpu: host memory; CUDA: device memory
  alignas(64) std::uint64_t tail = 0;      // bytes claimed, contended by producers only
  std::uint64_t taps = 0;                  // taps and calls made, dropped ones too (timestamps on): on the tail's line
  std::uint64_t owner_windows_open = 0;    // the owner's claims and counts under way: a depth, since its
                                           // signal handlers' nest in them (owner.hpp)
  alignas(64) std::uint64_t head_cache = 0;  // last head a producer saw: read it before the real head
  std::uint64_t big_claim = 0;  // a blocked claim above half the ring waits: the others wait behind it (produce.hpp)
  alignas(64) std::uint32_t reply_slots_taken[reply_slot_count / 32] = {};  // a bit per slot a caller holds
  // Host callers only (ring/call.hpp, host_take_reply_slot): the turns of those waiting for a slot.
  std::uint32_t slot_waiters = 0;       // callers waiting for a slot: a newcomer queues behind them
  std::uint32_t slot_tickets_issued = 0;  // the next waiter's ticket
  std::uint32_t slot_tickets_served = 0;  // waiters that got a slot: tickets up to it + the window may try
  // Host claims (owner.hpp): claim_unowned, the owning thread's token (its claims are plain stores),
  // claim_switching or claim_shared. Read by every host claim, written once or twice: a line of its
  // own, away from the tail that shared claims fight over.
  alignas(64) std::uint64_t claim_owner = 0;
  std::uint64_t claim_switching_from = 0;  // while claim_switching: the token of the owner whose ownership ends
};

struct ring_consumer_side {                   // host memory (pinned and mapped for CUDA)
  alignas(64) std::uint64_t head = 0;         // bytes released; written by the reader only
  alignas(64) std::uint32_t reader_sleeping = 0;  // producers ring the doorbell only while set
  std::uint32_t doorbell = 0;
  alignas(64) std::uint32_t producers_waiting = 0;  // producers blocked for space
  std::uint32_t doorbell_space = 0;           // bumped when space is published while producers wait
  std::uint32_t closed = ring_open;           // ring_open, ring_ending or ring_reader_gone
  std::uint32_t sticky_error = 0;             // a producer that cannot throw (CUDA) ORs a sticky_* code in
  std::uint32_t sticky_detail = 0;            // e.g. the size of the refused record
  std::uint64_t dropped_records = 0;          // `drop` policy: what producers did not write
  std::uint64_t dropped_bytes = 0;
  std::uint64_t reply_slot_waits = 0;         // calls that found every reply slot taken and waited
  reply_slot replies[reply_slot_count] = {};  // answers to calls, one slot per call in flight
  // Host threads that may wait inside this ring (a call, a tap blocked for space): a retired ring
  // is freed only once none is left (device::retire_ring; the pin is detail::ring_pin).
  alignas(64) std::uint32_t host_waiters = 0;
};

struct ring_view {
  ring_producer_side* producer = nullptr;
  ring_consumer_side* consumer = nullptr;
  std::byte* data = nullptr;
  std::uint64_t capacity = 0;  // power of two
  std::uint64_t stamp_key = 0;  // stamp_key_from(random bits), drawn when the ring is allocated

  DEVTAP_HOST_DEVICE record_header* header_at(std::uint64_t pos) const {
    return reinterpret_cast<record_header*>(data + (pos & (capacity - 1)));
  }
  DEVTAP_HOST_DEVICE std::uint64_t stamp(std::uint64_t pos, std::uint64_t kind) const {
    return stamp_at(stamp_key, pos, kind);
  }
  DEVTAP_HOST_DEVICE std::byte* payload_at(std::uint64_t pos) const {
    return data + (pos & (capacity - 1)) + sizeof(record_header);
  }
};

/** Atomics of host threads on host memory. */
struct host_atomics {
  template <class T> using producer_ref = std::atomic_ref<T>;
  template <class T> using shared_ref = std::atomic_ref<T>;
  static constexpr auto relaxed = std::memory_order_relaxed;
  static constexpr auto acquire = std::memory_order_acquire;
  static constexpr auto release = std::memory_order_release;
  static constexpr auto acq_rel = std::memory_order_acq_rel;
  static constexpr auto seq_cst = std::memory_order_seq_cst;
  static constexpr bool wakes_reader = true;  // the host reader may sleep on the doorbell
};

/** Padding a claim of `bytes` at tail `t` needs first: the rest of the ring when it does not fit before the end. */
DEVTAP_HOST_DEVICE constexpr std::uint64_t claim_padding(std::uint64_t capacity, std::uint64_t t, std::uint64_t bytes) {
  const std::uint64_t offset = t & (capacity - 1);
  return offset + bytes > capacity ? capacity - offset : 0;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
