#pragma once
/** Reading records: inspect, consume in place, release, publish. One host thread (the device's
 *  reader, receiver/reader.hpp) owns a ring_reader. Layout: layout.hpp; producers: produce.hpp. */
#include <devtap/ring/layout.hpp>
#include <devtap/ring/wake.hpp>

#include <atomic>
#include <cstring>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

enum class record_kind { empty, data, skip, malformed };

struct record_ref {
  record_kind kind = record_kind::empty;
  const record_header* header = nullptr;
  const std::byte* payload = nullptr;
  std::uint32_t payload_bytes = 0;
  std::uint64_t bytes = 0;  // ring bytes the record takes
};

/** Classifies the record at `pos`. Reads only inside the ring, whatever the bytes say (fuzzed). */
inline record_ref inspect(const ring_view& ring, std::uint64_t pos,
                          std::memory_order order = std::memory_order_acquire) {
  record_header* h = ring.header_at(pos);
  // Acquire: partner of commit's (and abort's, and the padding's) release store (produce.hpp).
  const std::uint32_t word = std::atomic_ref<std::uint32_t>(h->length).load(order);
  if (word == 0) return {};
  const std::uint64_t offset = pos & (ring.capacity - 1);
  const std::uint64_t room = ring.capacity - offset;
  const std::uint64_t n = word & length_mask;
  if (word & pad_flag) {  // padding runs exactly to the end of the ring
    if ((word & discard_flag) || n != room) return {record_kind::malformed, h};
    return {record_kind::skip, h, nullptr, 0, n};
  }
  if (word & discard_flag) {
    if (n < sizeof(record_header) || n % 8 != 0 || n > room) return {record_kind::malformed, h};
    return {record_kind::skip, h, nullptr, 0, n};
  }
  const std::uint64_t bytes = align8(n);
  if (n < sizeof(record_header) || bytes > max_record_bytes(ring.capacity) || bytes > room)
    return {record_kind::malformed, h};
  return {record_kind::data, h, ring.payload_at(pos), static_cast<std::uint32_t>(n - sizeof(record_header)), bytes};
}

/** The single reader of one ring. Not thread-safe: one receiver thread owns it. */
class ring_reader {
public:
  explicit ring_reader(const ring_view& ring) noexcept
      : ring_(ring), head_(ring.consumer->head), published_(head_) {}

  /** The record at the read position (`empty` while none is committed there). */
  record_ref peek(std::memory_order order = std::memory_order_acquire) const noexcept {
    return inspect(ring_, head_, order);
  }

  /** Frees `rec` (the one `peek` returned): zeroes its bytes, so free space stays all-zero. */
  void release(const record_ref& rec) noexcept {
    auto* bytes = reinterpret_cast<std::byte*>(const_cast<record_header*>(rec.header));
    if (rec.header->length & pad_flag)
      std::memset(bytes, 0, 8);  // only its length word was written
    else if (rec.bytes <= 32)  // small records are most records: two fixed-size stores, no memset call
      std::memset(bytes, 0, 16), std::memset(bytes + rec.bytes - 16, 0, 16);
    else if (rec.bytes <= 64)
      std::memset(bytes, 0, 32), std::memset(bytes + rec.bytes - 32, 0, 32);
    else
      std::memset(bytes, 0, rec.bytes);
    head_ += rec.bytes;
    // Publishing per record would bounce the head's cache line for every tap; a quarter of
    // the ring keeps producers supplied, and publish() runs whenever the ring looks empty.
    if (head_ - published_ >= ring_.capacity / 4) publish();
  }

  /** Makes released space visible to producers and wakes those blocked for space. */
  void publish() noexcept {
    if (head_ == published_) return;
    // Partner: try_claim's acquire load of the head (produce.hpp). seq_cst, then the look at
    // `producers_waiting`: pairs with host_wait's count-then-retry (wake.hpp), so no waiter is missed.
    std::atomic_ref<std::uint64_t>(ring_.consumer->head).store(head_, std::memory_order_seq_cst);
    published_ = head_;
    if (std::atomic_ref<std::uint32_t>(ring_.consumer->producers_waiting).load(std::memory_order_seq_cst) != 0)
      wake_producers(ring_);
  }

  /** Bytes consumed so far (a position). */
  std::uint64_t position() const noexcept { return head_; }
  /** Offset of the read position in the ring (for error reports). */
  std::uint64_t offset() const noexcept { return head_ & (ring_.capacity - 1); }

private:
  ring_view ring_;
  std::uint64_t head_;
  std::uint64_t published_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
