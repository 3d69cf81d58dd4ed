#pragma once
/** Where a receiver's records go besides its consumers: the trace file (trace_writer.hpp) and the
 *  recording (recording.hpp) implement `record_sink`; each device's reader feeds them (internal). */
#include <devtap/config.hpp>
#include <devtap/tap/tap_info.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

struct consumer_entry;

/** What a point's records are, so that a sink draws each kind its own way. */
enum class point_kind : std::uint32_t { tap = 1, call = 2, print = 3, scope = 4 };

/** Marks on a device's track that are not records. */
enum class marker_kind : std::uint32_t {
  dropped = 1,  // taps the device did not write (`drop` policy, a full ring): `count` of them
  lost = 2,     // records close() did not deliver (it gave up on the device)
  error = 3,    // a consumer threw, a record did not match its consumer, the stream failed
};

constexpr std::string_view marker_name(marker_kind k) noexcept {
  switch (k) {
    case marker_kind::dropped: return "dropped";
    case marker_kind::lost: return "lost";
    case marker_kind::error: return "error";
  }
  return "marker";
}

/** A point as a sink knows it: the id records carry (flags cleared), its name, type and kind. */
struct point_description {
  std::uint32_t id = 0;
  point_kind kind = point_kind::tap;
  std::uint64_t fingerprint = 0;
  std::string name;
};

/** One record as a sink receives it. `stamp.time_ns` is always set: the device's time when
 *  `stamp.stamped`, else when the reader read it. `point` is null for an id no consumer has. */
struct sink_record {
  std::size_t device = 0;
  std::uint32_t id = 0;           // without the stamp flag; calls keep theirs
  std::uint64_t fingerprint = 0;  // the record's own (a mismatched record differs from its point's)
  record_stamp stamp{};
  const std::byte* payload = nullptr;  // after the stamp
  std::size_t bytes = 0;
  std::uint64_t dropped = 0;  // the device's taps not written so far (`drop` policy, a full ring)
};

/** A receiver's record sink. `record` and `end` for a device come from that device's reader only;
 *  `marker` and `line` may come from any thread; `close` after every reader finished. */
class record_sink {
public:
  virtual ~record_sink() = default;
  /** `entry` (null for an unknown id) describes the value; `point` is its description. */
  virtual void record(const sink_record& rec, const point_description* point, const consumer_entry* entry) = 0;
  /** A text line a device printed (devtap::print), at `time_ns`. */
  virtual void line(std::size_t device, std::uint64_t time_ns, std::string_view text) = 0;
  virtual void marker(std::size_t device, std::uint64_t time_ns, marker_kind kind, std::uint64_t count,
                      std::string_view text) = 0;
  /** A kernel's scope id gets a name (receiver::name_scope). */
  virtual void name_scope(std::uint32_t id, std::string_view name) = 0;
  /** The device's stream ended; `dropped`: its taps not written, in all. */
  virtual void end(std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) = 0;
  /** Writes what is buffered and closes the file; the first write error, as a message (empty: none). */
  virtual std::string close() = 0;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
