#pragma once
/** Reading records: inspect, consume in place, release, publish. One host thread (the device's
 *  reader, receiver/reader.hpp) owns a ring_reader. Layout: layout.hpp; producers: produce.hpp. */
#include <devtap/ring/layout.hpp>
#include <devtap/ring/wake.hpp>

#include <atomic>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

enum class record_kind { empty, data, skip, malformed };

struct record_ref {
  record_kind kind = record_kind::empty;
  const record_header* header = nullptr;  // for `data`: all its words; otherwise only the stamp is certain
  const std::byte* payload = nullptr;
  std::uint32_t payload_bytes = 0;
  std::uint64_t bytes = 0;       // ring bytes the record takes (`malformed`: the room left when its header cannot fit)
  std::uint64_t stamp_kind = 0;  // for `malformed`: what its stamp said (a stamp_kind, or an unknown one)
  std::uint32_t length = 0;      // for `malformed`: its length word (0 where it was not read)
};

/** Classifies the record at `pos`. Reads only inside the ring, whatever the bytes say (fuzzed). */
inline record_ref inspect(const ring_view& ring, std::uint64_t pos,
                          std::memory_order order = std::memory_order_acquire) {
  record_header* h = ring.header_at(pos);
  // Acquire: partner of commit's (and abort's, and the padding's) release store (produce.hpp).
  const std::uint64_t kind = std::atomic_ref<std::uint64_t>(h->stamp).load(order) ^ ring.stamp(pos, stamp_record);
  if (kind > stamp_kind_mask) return {};  // another lap's bytes, or never written: not committed yet
  const std::uint64_t room = ring.capacity - (pos & (ring.capacity - 1));
  if (kind == stamp_padding) return {record_kind::skip, h, nullptr, 0, room};  // only the stamp was written
  if (kind != stamp_record && kind != stamp_discard) return {record_kind::malformed, h, nullptr, 0, 0, kind};
  if (room < sizeof(record_header)) return {record_kind::malformed, h, nullptr, 0, room, kind};  // its header cannot fit
  const std::uint64_t n = h->length;
  if (kind == stamp_discard) {
    if (n < sizeof(record_header) || n % 8 != 0 || n > room)
      return {record_kind::malformed, h, nullptr, 0, 0, kind, h->length};
    return {record_kind::skip, h, nullptr, 0, n};
  }
  const std::uint64_t bytes = align8(n);
  if (n < sizeof(record_header) || bytes > max_record_bytes(ring.capacity) || bytes > room)
    return {record_kind::malformed, h, nullptr, 0, 0, kind, h->length};
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

  /** Frees `rec` (the one `peek` returned): moves the private head past it. Its bytes stay as they
   *  are (stamps tell laps apart); producers see the space once publish() runs. */
  void release(const record_ref& rec) noexcept {
    head_ += rec.bytes;
    // Publishing per record would bounce the head's cache line for every tap; a quarter of
    // the ring keeps producers supplied, and publish() runs whenever the ring looks empty.
    // (Every 16 KiB instead was measured slower at 4 KiB and 64 KiB: docs/performance.md.)
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
