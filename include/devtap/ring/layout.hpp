#pragma once
/** The ring protocol shared by every producer (cpu threads, CUDA threads) and the host reader.
 *
 * Memory: `data` is `capacity` bytes (a power of two), all zero except the records in
 * [head, tail). Positions are 64-bit byte counts that never wrap; they are compared by
 * difference, so `tail - head <= capacity` holds across the 2^64 wrap too.
 *
 *   record at pos & (capacity-1), 8-byte aligned, never straddles the end:
 *   +------------+-------------+-------------+---------+
 *   | length u32 | consumer u32| fingerprint | payload | -> padded to 8
 *   +------------+-------------+--- u64 -----+---------+
 *   length = header + payload bytes, so a committed record is never 0 (even an empty one):
 *   length == 0      claimed, not yet committed (BUSY): the reader stops here
 *   PAD flag         skip (length & mask) bytes: the tail end of the ring before a wrap
 *   DISCARD flag     skip (length & mask) bytes: an aborted claim
 *
 * Producer: try_claim (CAS on tail, pad at the wrap) -> write payload -> commit (or abort).
 * Reader: peek committed header -> consumer step -> release (zero the bytes, advance head;
 * head is published in batches). Only the atomics differ between cpu and CUDA: the `Atomics`
 * policy says where each word lives (see host_atomics here, cuda_atomics in devtap/cuda). */
#include <devtap/config.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

struct record_header {
  std::uint32_t length;       // the commit word: header + payload bytes | flags; 0 = BUSY
  std::uint32_t consumer_id;  // 0 is the end-of-stream marker
  std::uint64_t fingerprint;  // structural type fingerprint of the payload
};
static_assert(sizeof(record_header) == 16);

inline constexpr std::uint32_t pad_flag = 1u << 31;
inline constexpr std::uint32_t discard_flag = 1u << 30;
inline constexpr std::uint32_t length_mask = discard_flag - 1;
inline constexpr std::uint32_t end_of_stream_id = 0;
inline constexpr std::uint32_t sticky_record_too_large = 1;  // a record over max_record_bytes was refused
inline constexpr std::uint32_t sticky_ring_full = 2;         // overflow_policy::error met a full ring
inline constexpr std::uint64_t max_ring_capacity = std::uint64_t{1} << 31;  // keeps lengths in 30 bits

DEVTAP_HOST_DEVICE constexpr std::uint64_t align8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }
/** Bytes a record with `payload` bytes takes in the ring. */
DEVTAP_HOST_DEVICE constexpr std::uint64_t record_bytes(std::uint64_t payload) {
  return align8(sizeof(record_header) + payload);
}
/** Largest record a ring accepts: half of it, so a record plus the padding before it always fits. */
DEVTAP_HOST_DEVICE constexpr std::uint64_t max_record_bytes(std::uint64_t capacity) { return capacity / 2; }

struct ring_producer_side {                // cpu: host memory; CUDA: device memory
  alignas(64) std::uint64_t tail = 0;      // bytes claimed, contended by producers only
  alignas(64) std::uint64_t head_cache = 0;  // last head a producer saw: read it before the real head
};

struct ring_consumer_side {                   // host memory (pinned and mapped for CUDA)
  alignas(64) std::uint64_t head = 0;         // bytes released; written by the reader only
  alignas(64) std::uint32_t reader_sleeping = 0;  // producers ring the doorbell only while set
  std::uint32_t doorbell = 0;
  alignas(64) std::uint32_t producers_waiting = 0;  // producers blocked for space
  std::uint32_t doorbell_space = 0;           // bumped when space is published while producers wait
  std::uint32_t closed = 0;                   // no new records: the stream is ending or the reader gone
  std::uint32_t sticky_error = 0;             // a producer that cannot throw (CUDA) ORs a sticky_* code in
  std::uint32_t sticky_detail = 0;            // e.g. the size of the refused record
  std::uint64_t dropped_records = 0;          // `drop` policy: what producers did not write
  std::uint64_t dropped_bytes = 0;
};

struct ring_view {
  ring_producer_side* producer = nullptr;
  ring_consumer_side* consumer = nullptr;
  std::byte* data = nullptr;
  std::uint64_t capacity = 0;  // power of two

  DEVTAP_HOST_DEVICE record_header* header_at(std::uint64_t pos) const {
    return reinterpret_cast<record_header*>(data + (pos & (capacity - 1)));
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

/** Claims `bytes` (a record_bytes value) at the tail; false if the ring lacks space now. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE bool try_claim(const ring_view& ring, std::uint64_t bytes, std::uint64_t& pos) {
  typename Atomics::template producer_ref<std::uint64_t> tail(ring.producer->tail);
  typename Atomics::template producer_ref<std::uint64_t> head_cache(ring.producer->head_cache);
  std::uint64_t t = tail.load(Atomics::relaxed);
  std::uint64_t pad;
  for (;;) {
    pad = claim_padding(ring.capacity, t, bytes);
    if (t + pad + bytes - head_cache.load(Atomics::acquire) > ring.capacity) {
      const std::uint64_t h =
          typename Atomics::template shared_ref<std::uint64_t>(ring.consumer->head).load(Atomics::acquire);
      head_cache.store(h, Atomics::release);  // racing stores may leave an older head: only conservative
      if (t + pad + bytes - h > ring.capacity) return false;
    }
    // acq_rel: a claim after the end-of-stream claim sees `closed` (the closer sets it first).
    // seq_cst where the reader may sleep: this claim and commit()'s look at `reader_sleeping` pair
    // with the reader's flag-then-tail check (Dekker), so no commit needs a locked store of its own.
    constexpr auto order = Atomics::wakes_reader ? Atomics::seq_cst : Atomics::acq_rel;
    if (tail.compare_exchange_weak(t, t + pad + bytes, order, Atomics::relaxed)) break;
  }
  if (pad != 0)  // the wrap: the rest of the ring becomes one padding record
    typename Atomics::template shared_ref<std::uint32_t>(ring.header_at(t)->length)
        .store(static_cast<std::uint32_t>(pad) | pad_flag, Atomics::release);
  pos = t + pad;
  return true;
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
  return t + claim_padding(ring.capacity, t, bytes) + bytes - h <= ring.capacity;
}

/** Publishes the record claimed at `pos`, whose payload is already written. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void commit(const ring_view& ring, std::uint64_t pos, std::uint32_t consumer_id,
                               std::uint64_t fingerprint, std::uint32_t payload_bytes) {
  record_header* h = ring.header_at(pos);
  h->consumer_id = consumer_id;
  h->fingerprint = fingerprint;
  typename Atomics::template shared_ref<std::uint32_t>(h->length)
      .store(payload_bytes + sizeof(record_header), Atomics::release);
  if constexpr (Atomics::wakes_reader) {
    // A reader that saw no claim went to sleep: ring it (see try_claim for why this cannot miss).
    // The ringer clears the flag, so one commit rings, not every commit until the reader runs.
    typename Atomics::template shared_ref<std::uint32_t> sleeping(ring.consumer->reader_sleeping);
    if (sleeping.load(Atomics::seq_cst) != 0 && sleeping.exchange(0, Atomics::seq_cst) != 0) {
      typename Atomics::template shared_ref<std::uint32_t> bell(ring.consumer->doorbell);
      bell.fetch_add(1, Atomics::seq_cst);
      bell.notify_one();
    }
  }
}

/** Gives back a claim: the reader skips it. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE void abort(const ring_view& ring, std::uint64_t pos, std::uint64_t bytes) {
  typename Atomics::template shared_ref<std::uint32_t>(ring.header_at(pos)->length)
      .store(static_cast<std::uint32_t>(bytes) | discard_flag, Atomics::release);
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

}  // namespace detail
DEVTAP_END_NAMESPACE
