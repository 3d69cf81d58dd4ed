#pragma once
/** The recording (receiver_options::record_file): every record a receiver reads, written raw, with
 *  the names of its points and devices, so that `devtap::replay` re-delivers it later and
 *  `devtap-recording` summarises it or converts it to a trace file (docs/timeline.md has the layout).
 *  Internal: the format, its writer and its reader. */
#include <devtap/config.hpp>
#include <devtap/receiver/record_sink.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// ---- the format: little-endian (the host's), every piece a multiple of 8 bytes ----------------
// file    := magic(8) version(u32) flags(u32) origin_ns(u64) header_bytes(u64) header chunk*
// header  := receiver name (str), device count (u32), per device: id (u32) platform (str) name (str)
// str     := length (u32) bytes; the header is padded with zeros to a multiple of 8
// chunk   := type (u32) device (u32) body_bytes (u64) body (padded to 8)
//   point       body: id (u32) kind (u32) fingerprint (u64) name (str)   (before any record of it)
//   scope_name  body: id (u32) name (str)
//   records     body: entry*, one device's, in the order its reader read them
// entry   := word (u32) bytes (u32) [fingerprint (u64)] time... payload (padded to 8)
//   word: the record's id (call flag kept, stamp flag set when the record was stamped), or 0 for a marker
//   bytes: the payload's size; its top bit says the fingerprint follows (it differs from the point's)
//   a stamped record: time_ns (u64) sequence (u64); an unstamped one: the time it was read (u64)
//   a marker (word 0): time_ns (u64) kind (u32) 0 (u32) count (u64), then `bytes` of text; kind
//   recorded_line_kind is a line a printer wrote (its format may exist only in the recorded program)
inline constexpr char recording_magic[8] = {'d', 'e', 'v', 't', 'a', 'p', 'R', 'C'};
// Version 2 ends with an `end` chunk, so that a file cut between two chunks is told from a whole
// one; version 3 marks the records no consumer took live (recorded_unknown_flag). Versions 1 and 2
// are still read.
inline constexpr std::uint32_t recording_version = 3;
// The most devices a recording may name (a replay opens a stream for each, per consumer).
inline constexpr std::uint32_t max_recorded_devices = std::uint32_t{1} << 16;
inline constexpr std::uint32_t recording_timestamps_flag = 1;
inline constexpr std::uint32_t recorded_fingerprint_flag = std::uint32_t{1} << 31;
// In an entry's size word (a payload is under 2^30 bytes, max_record_limit): no point had the id
// when the live reader read it. The id itself is kept (the converted trace names it as the live
// one did); a replay delivers the record to no consumer, even where a point defined later took it.
inline constexpr std::uint32_t recorded_unknown_flag = std::uint32_t{1} << 30;
inline constexpr std::uint32_t recorded_marker_word = 0;
inline constexpr std::uint32_t recorded_line_kind = 0x100;
// The id a record is kept under when its own id carries the stamp flag without a stamp (a record no
// consumer could take): no point has it, so a replay skips it, as the live reader did.
inline constexpr std::uint32_t recorded_unknown_id = (std::uint32_t{1} << 30) - 2;

enum class chunk_type : std::uint32_t { point = 1, scope_name = 2, records = 3, end = 4 };

struct chunk_header {
  chunk_type type;
  std::uint32_t device;
  std::uint64_t body_bytes;
};
static_assert(sizeof(chunk_header) == 16);

/** A device as a recording names it. */
struct recorded_device {
  int id = 0;
  std::string platform;
  std::string name;
};

// ---- the writer -------------------------------------------------------------------------------

class recording_writer final : public record_sink, sink_file<std::vector<std::uint64_t>> {
public:
  /** Opens `path` (std::invalid_argument naming it and why, if it cannot) and writes the header. */
  recording_writer(const std::string& path, std::string_view receiver_name, const std::vector<recorded_device>& devices,
                   bool timestamps, std::uint64_t origin_ns);
  ~recording_writer() override;

  [[nodiscard]] DEVTAP_INLINE_VIRTUAL bool record(const sink_record& rec, const point_description* point,
                                    const consumer_entry* entry) override;
  DEVTAP_INLINE_VIRTUAL void line(std::size_t device, std::uint64_t time_ns, std::string_view text,
                                  bool from_reader) override;
  DEVTAP_INLINE_VIRTUAL void marker(std::size_t device, std::uint64_t time_ns, marker_kind kind, std::uint64_t count,
                                    std::string_view text, bool from_reader) override;
  DEVTAP_INLINE_VIRTUAL void define(const point_description& point) override;
  DEVTAP_INLINE_VIRTUAL void name_scope(std::uint32_t id, std::string_view name) override;
  DEVTAP_INLINE_VIRTUAL void end(std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) override;
  DEVTAP_INLINE_VIRTUAL void write_out(std::size_t device) override;
  DEVTAP_INLINE_VIRTUAL std::string close(std::chrono::steady_clock::time_point give_up_at,
                                          std::chrono::steady_clock::time_point pipe_deadline) override;
  void start() override { start_file(); }

private:
  // A track holds one device's entries (8-byte words: every entry is a multiple of 8), appended by
  // its reader and written as a records chunk every ~256 KiB.
  static void marker_entry(std::vector<std::uint64_t>& words, std::uint64_t time_ns, std::uint32_t kind,
                           std::uint64_t count, std::string_view text);
  void flush(track& t, std::size_t device);  // the reader's: writes its entries as a chunk
  static std::size_t checked_device_count(std::size_t devices);  // throws above max_recorded_devices
  void write_chunk(chunk_type type, std::uint32_t device, const void* body, std::size_t bytes);  // file_mutex_ held
};

// ---- the reader -------------------------------------------------------------------------------

/** One entry of a recording, as its reader hands it over. */
struct recorded_entry {
  std::size_t device = 0;
  bool is_marker = false;
  bool is_line = false;  // a printed line (text), not a marker
  std::uint32_t id = 0;  // without the stamp flag
  bool unknown = false;  // no point had `id` when the live reader read it (version 3)
  std::uint64_t fingerprint = 0;
  record_stamp stamp{};  // unstamped: time_ns is when it was read, sequence its place in the device's stream
  const std::byte* payload = nullptr;
  std::size_t bytes = 0;
  marker_kind marker = marker_kind::error;  // is_marker only
  std::uint64_t count = 0;
  std::string_view text;
};

/** Reads a recording: the header and every definition at open, then the entries on demand. Errors
 *  (std::runtime_error) name the file, the offset and what is wrong. */
class recording_reader {
public:
  explicit recording_reader(std::string path);
  ~recording_reader();
  recording_reader(const recording_reader&) = delete;
  recording_reader& operator=(const recording_reader&) = delete;

  const std::string& path() const noexcept { return path_; }
  const std::string& receiver_name() const noexcept { return receiver_name_; }
  bool timestamps() const noexcept { return timestamps_; }
  std::uint64_t origin_ns() const noexcept { return origin_ns_; }
  /** Where the recording stops short, or 0: in the middle of a chunk, or after a whole chunk with no
   *  end chunk (its writer never closed it: a crash, or a run still going). What comes before is read. */
  std::uint64_t cut_short_at() const noexcept { return cut_at_; }
  const std::vector<recorded_device>& devices() const noexcept { return devices_; }
  const std::vector<point_description>& points() const noexcept { return points_; }
  const std::map<std::uint32_t, std::string>& scope_names() const noexcept { return scope_names_; }
  /** The point with this id (call flag included), or null. */
  const point_description* point(std::uint32_t id) const noexcept;

  /** Calls `fn(const recorded_entry&)` for every entry, device by device in the order each was read
   *  (the devices' entries interleaved as they were written). Payloads are valid during the call. */
  template <class Fn>
  void for_each(Fn&& fn) {
    rewind_entries();
    recorded_entry e;
    while (next_entry(e)) fn(static_cast<const recorded_entry&>(e));
  }

private:
  void open_file();  // the header and the definitions
  void rewind_entries();
  bool next_entry(recorded_entry& e);
  void read_entry(recorded_entry& e);  // the next entry of the chunk in body_ (damage: fail)
  bool next_chunk(chunk_header& h);  // reads a chunk's header and body into body_; false at the end
  void check_kept(const chunk_header& h);  // a chunk read again: the one open() read there
  std::uint64_t body_digest() const noexcept;  // of the chunk in body_
  [[noreturn]] void fail(const std::string& what) const;
  [[noreturn]] void changed() const;  // the file differs from what open() read

  std::string path_;
  std::FILE* file_ = nullptr;
  std::uint64_t file_bytes_ = 0;
  std::string receiver_name_;
  bool timestamps_ = false;
  std::uint64_t origin_ns_ = 0;
  std::uint64_t entries_at_ = 0;  // file offset of the first chunk
  std::vector<recorded_device> devices_;
  std::vector<point_description> points_;
  std::map<std::uint32_t, std::size_t> point_index_;  // id -> its place in points_ (a tree: no hash to flood)
  std::map<std::uint32_t, std::string> scope_names_;  // (a tree, as point_index_)
  std::vector<std::uint64_t> body_;  // the current chunk (8-aligned: payloads decode in place)
  std::size_t body_bytes_ = 0, body_at_ = 0;
  std::uint32_t body_device_ = 0;
  std::uint64_t chunk_offset_ = 0;
  std::uint64_t cut_at_ = 0;
  static constexpr std::uint64_t max_chunk_body_bytes = std::uint64_t{1} << 40;  // no writer makes one (next_chunk)
  // Every chunk as open() read it (a records chunk as a digest of its body): entries read again
  // (run(), after another receiver may have rewritten the file in place, another run of the program
  // recorded again at this path) must find the same chunks, or records open() never saw would be
  // delivered, as the types open() saw.
  struct kept_chunk {
    std::uint64_t offset;
    chunk_header header;
    std::size_t words_at;  // its body in kept_words_ (not a records chunk)
    std::uint64_t digest;  // a records chunk's body
  };
  std::vector<std::byte> opened_header_;  // the bytes before the first chunk, as open() read them
  std::vector<kept_chunk> kept_;
  std::vector<std::uint64_t> kept_words_;
  std::size_t next_kept_ = 0;
  bool opened_ = false;  // open_file() is done: what next_chunk() reads, it read before
  std::uint32_t version_ = 0;
  std::vector<std::uint64_t> read_;  // per device: entries read (an unstamped record's sequence)
};

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/receiver/recording_impl.hpp>
#include <devtap/receiver/recording_reader_impl.hpp>
#endif
