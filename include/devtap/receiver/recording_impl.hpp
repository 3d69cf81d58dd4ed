#pragma once
// The definitions of the recording's writer and reader (declared in recording.hpp): included by that
// header when header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/receiver/recording.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/scope.hpp>
#include <devtap/tap/tap_info.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A track is written out once it holds this many 8-byte words (256 KiB).
inline constexpr std::size_t recording_flush_words = std::size_t{32} << 10;

// Appends to a vector of 8-byte words: fixed-size fields, and bytes padded with zeros to 8.
struct word_appender {
  std::vector<std::uint64_t>& words;
  void u64(std::uint64_t v) { words.push_back(v); }
  void u32_pair(std::uint32_t low, std::uint32_t high) { words.push_back(low | (std::uint64_t{high} << 32)); }
  void bytes(const void* data, std::size_t n) {
    const std::size_t at = words.size();
    words.resize(at + (n + 7) / 8, 0);
    if (n != 0) std::memcpy(words.data() + at, data, n);
  }
  void str(std::string_view s) {  // length, then the bytes: the first word holds the length and 4 bytes
    std::uint64_t first = static_cast<std::uint32_t>(s.size());
    const std::size_t head = s.size() < 4 ? s.size() : 4;
    if (head != 0) std::memcpy(reinterpret_cast<char*>(&first) + 4, s.data(), head);
    words.push_back(first);
    bytes(s.data() + head, s.size() - head);
  }
};

DEVTAP_FUNC std::size_t recording_writer::checked_device_count(std::size_t devices) {
  if (devices > max_recorded_devices)  // a replay would refuse the file: refuse it before it is written
    throw std::invalid_argument("devtap: receiver_options::record_file: a recording holds at most " +
                                std::to_string(max_recorded_devices) + " devices; this receiver has " +
                                std::to_string(devices));
  return devices;
}

DEVTAP_FUNC recording_writer::recording_writer(const std::string& path, std::string_view receiver_name,
                                               const std::vector<recorded_device>& devices, bool timestamps,
                                               std::uint64_t origin_ns)
    : sink_file(path, "record file", "devtap: receiver_options::record_file: ", checked_device_count(devices.size()), true) {
  std::vector<std::uint64_t> header;
  word_appender h{header};
  h.str(receiver_name);
  h.u32_pair(static_cast<std::uint32_t>(devices.size()), 0);
  for (const auto& d : devices) {
    h.u32_pair(static_cast<std::uint32_t>(d.id), 0);
    h.str(d.platform);
    h.str(d.name);
  }
  const auto lock = lock_file();
  write_locked(recording_magic, sizeof recording_magic);
  const std::uint32_t version_flags[2] = {recording_version, timestamps ? recording_timestamps_flag : 0};
  write_locked(version_flags, sizeof version_flags);
  const std::uint64_t sizes[2] = {origin_ns, header.size() * 8};
  write_locked(sizes, sizeof sizes);
  write_locked(header.data(), header.size() * 8);
  // Scope records have one description, whatever attach() did: defined before anything else.
  std::vector<std::uint64_t> body;
  word_appender b{body};
  b.u32_pair(scope_record_id, static_cast<std::uint32_t>(point_kind::scope));
  b.u64(type_fingerprint_v<scope_event>);
  b.str("scope");
  write_chunk(chunk_type::point, 0, body.data(), body.size() * 8);
}

DEVTAP_FUNC recording_writer::~recording_writer() { (void)close(std::chrono::steady_clock::time_point::max(), std::chrono::steady_clock::time_point::max()); }

DEVTAP_FUNC void recording_writer::write_chunk(chunk_type type, std::uint32_t device, const void* body, std::size_t bytes) {
  const chunk_header h{type, device, bytes};
  write_locked(&h, sizeof h);
  write_locked(body, bytes);
  flush_locked();  // whole chunks on disk as they are made: a run that dies leaves every one before
}

DEVTAP_FUNC void recording_writer::define(const point_description& point) {
  std::vector<std::uint64_t> body;
  word_appender b{body};
  b.u32_pair(point.id, static_cast<std::uint32_t>(point.kind));
  b.u64(point.fingerprint);
  b.str(point.name);
  const auto lock = lock_file();
  write_chunk(chunk_type::point, 0, body.data(), body.size() * 8);
}

DEVTAP_FUNC void recording_writer::flush(track& t, std::size_t device) {
  const auto lock = lock_file();
  write_chunk(chunk_type::records, static_cast<std::uint32_t>(device), t.own.data(), t.own.size() * 8);
  t.own.clear();
}

DEVTAP_FUNC bool recording_writer::record(const sink_record& rec, const point_description* point, const consumer_entry*) {
  track* tp = reader_track(rec.device);
  if (tp == nullptr) return false;
  track& t = *tp;
  if (rec.dropped > t.dropped) {
    marker_entry(t.own, rec.stamp.time_ns, static_cast<std::uint32_t>(marker_kind::dropped), rec.dropped - t.dropped,
                 "taps the device did not write");
    t.dropped = rec.dropped;
  }
  // The stamp flag says a stamp follows: an id that carries it without one is kept as unknown.
  const std::uint32_t id = (rec.id & stamped_id_flag) != 0 ? recorded_unknown_id : rec.id;
  // One resize per entry, then the fields in place: this runs for every record a reader reads.
  const bool own_fingerprint = point == nullptr || point->fingerprint != rec.fingerprint || id != rec.id;
  const std::size_t words = 2 + (own_fingerprint ? 1 : 0) + (rec.stamp.stamped ? 1 : 0) + (rec.bytes + 7) / 8;
  const std::size_t at = t.own.size();
  t.own.resize(at + words);
  std::uint64_t* w = t.own.data() + at;
  const std::uint32_t word = rec.stamp.stamped ? id | stamped_id_flag : id;
  // An id no point had when it was read is marked: a point attached later may take it.
  const std::uint32_t bytes = static_cast<std::uint32_t>(rec.bytes) | (own_fingerprint ? recorded_fingerprint_flag : 0) |
                              (point == nullptr ? recorded_unknown_flag : 0);
  *w++ = word | (std::uint64_t{bytes} << 32);
  if (own_fingerprint) *w++ = rec.fingerprint;
  *w++ = rec.stamp.time_ns;
  if (rec.stamp.stamped) *w++ = rec.stamp.sequence;
  // (resize zeroed the words: the last one's padding stays zero)
  if (rec.bytes != 0) std::memcpy(w, rec.payload, rec.bytes);
  return t.own.size() >= recording_flush_words;  // (written by write_out, which the reader calls)
}

DEVTAP_FUNC void recording_writer::marker_entry(std::vector<std::uint64_t>& words, std::uint64_t time_ns, std::uint32_t kind,
                                                std::uint64_t count, std::string_view text) {
  word_appender w{words};
  w.u32_pair(recorded_marker_word, static_cast<std::uint32_t>(text.size()));
  w.u64(time_ns);
  w.u32_pair(kind, 0);
  w.u64(count);
  w.bytes(text.data(), text.size());
}

DEVTAP_FUNC void recording_writer::marker(std::size_t device, std::uint64_t time_ns, marker_kind kind,
                                          std::uint64_t count, std::string_view text, bool from_reader) {
  if (device >= tracks_.size()) return;
  track* t = from_reader ? reader_track(device) : nullptr;
  const auto k = static_cast<std::uint32_t>(kind);
  if (t == nullptr) {  // another thread's, or after the reader ended
    tracks_[device]->add_foreign([&](std::vector<std::uint64_t>& words) { marker_entry(words, time_ns, k, count, text); });
    return;
  }
  if (kind == marker_kind::dropped) t->dropped += count;
  marker_entry(t->own, time_ns, k, count, text);
}

DEVTAP_FUNC void recording_writer::line(std::size_t device, std::uint64_t time_ns, std::string_view text, bool from_reader) {
  if (device >= tracks_.size()) return;
  track* t = from_reader ? reader_track(device) : nullptr;
  if (t == nullptr) {
    tracks_[device]->add_foreign(
        [&](std::vector<std::uint64_t>& words) { marker_entry(words, time_ns, recorded_line_kind, 1, text); });
    return;
  }
  marker_entry(t->own, time_ns, recorded_line_kind, 1, text);
}

DEVTAP_FUNC void recording_writer::name_scope(std::uint32_t id, std::string_view name) {
  std::vector<std::uint64_t> body;
  word_appender b{body};
  b.u32_pair(id, 0);
  b.str(name);
  const auto lock = lock_file();
  write_chunk(chunk_type::scope_name, 0, body.data(), body.size() * 8);
}

DEVTAP_FUNC void recording_writer::end(std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) {
  track* t = reader_track(device);
  if (t == nullptr) return;
  if (dropped > t->dropped) {
    marker_entry(t->own, time_ns, static_cast<std::uint32_t>(marker_kind::dropped), dropped - t->dropped,
                 "taps the device did not write");
    t->dropped = dropped;
  }
  if (!t->own.empty()) flush(*t, device);  // (an empty chunk says nothing)
  t->ended.store(true, std::memory_order_release);  // what comes later (other threads' markers) is close()'s
}

DEVTAP_FUNC void recording_writer::write_out(std::size_t device) {
  if (track* t = reader_track(device); t != nullptr && !t->own.empty()) flush(*t, device);  // (flush hands it over)
}

DEVTAP_FUNC std::string recording_writer::close(std::chrono::steady_clock::time_point give_up_at,
                                                std::chrono::steady_clock::time_point pipe_deadline) {
  // Each track's entries, then the file (a reader writes to the file from its own entries: never the other way round).
  std::vector<std::vector<std::uint64_t>> rest = take_all_tracks([](std::vector<std::uint64_t>& words, std::size_t) {
    marker_entry(words, stamp_now_ns(), static_cast<std::uint32_t>(marker_kind::lost), 0,
                 "the device's reader was stuck in a consumer or a write when the recording was closed: the records it had "
                 "not yet written (up to 256 KiB) are missing");
  });
  std::unique_lock<std::mutex> lock;
  if (lock_for_close(lock, give_up_at, pipe_deadline)) {
    for (std::size_t device = 0; device < rest.size(); ++device)
      if (!rest[device].empty())
        write_chunk(chunk_type::records, static_cast<std::uint32_t>(device), rest[device].data(), rest[device].size() * 8);
    write_chunk(chunk_type::end, 0, nullptr, 0);  // a whole recording: a reader tells it from one cut between chunks
  }
  return lock.owns_lock() ? close_locked() : left_message();
}

}  // namespace detail
DEVTAP_END_NAMESPACE
