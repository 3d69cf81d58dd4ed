#pragma once
// The definitions of trace_writer (declared in trace_writer.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/detail/json.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/receiver/trace_writer.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/scope.hpp>

#include <cerrno>
#include <cstring>
#include <stdexcept>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A track is written out once it holds this much text: few writes, little memory per device.
inline constexpr std::size_t trace_flush_bytes = std::size_t{64} << 10;

DEVTAP_FUNC trace_writer::trace_writer(const std::string& path, std::string_view process_name,
                                       const std::vector<std::string>& device_names, std::uint64_t origin_ns,
                                       std::string_view where)
    : sink_file(path, "trace file", where, device_names.size(), false), origin_ns_(origin_ns) {
  std::string head = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":"
                     "\"process_name\",\"args\":{\"name\":";
  append_json_string(head, process_name);
  head += "}}";
  for (std::size_t i = 0; i < device_names.size(); ++i) {
    for (const char* meta : {"thread_name", "thread_sort_index"}) {
      head += ",\n{\"ph\":\"M\",\"pid\":1,\"tid\":";
      append_json_number(head, i + 1);
      head += ",\"name\":\"";
      head += meta;
      head += "\",\"args\":{";
      if (meta[7] == 'n') {
        head += "\"name\":";
        append_json_string(head, device_names[i]);
      } else {
        head += "\"sort_index\":";
        append_json_number(head, i);
      }
      head += "}}";
    }
  }
  const auto lock = lock_file();
  write_locked(head);
}

DEVTAP_FUNC trace_writer::~trace_writer() { (void)close(std::chrono::steady_clock::time_point::max(), std::chrono::steady_clock::time_point::max()); }

DEVTAP_FUNC void trace_writer::begin_event(std::string& out, const char* phase, std::size_t device,
                                           std::uint64_t time_ns, std::string_view category, std::string_view name) {
  out += ",\n{\"ph\":\"";
  out += phase;
  out += "\",\"pid\":1,\"tid\":";
  append_json_number(out, device + 1);
  // Microseconds with the nanoseconds as three decimals: exact, where a double would round.
  const std::int64_t ns = static_cast<std::int64_t>(time_ns - origin_ns_);
  const std::uint64_t magnitude = ns < 0 ? 0 - static_cast<std::uint64_t>(ns) : static_cast<std::uint64_t>(ns);
  out += ",\"ts\":";
  if (ns < 0) out += '-';
  append_json_number(out, magnitude / 1000);
  const unsigned fraction = static_cast<unsigned>(magnitude % 1000);
  out += '.';
  out += static_cast<char>('0' + fraction / 100);
  out += static_cast<char>('0' + fraction / 10 % 10);
  out += static_cast<char>('0' + fraction % 10);
  out += ",\"cat\":\"";
  out += category;  // our own words: nothing to escape
  out += "\",\"name\":";
  append_json_string(out, name);
}

DEVTAP_FUNC void trace_writer::done_event(track&) { events_.fetch_add(1, std::memory_order_relaxed); }

DEVTAP_FUNC bool trace_writer::record(const sink_record& rec, const point_description* point,
                                      const consumer_entry* entry) {
  track* tp = reader_track(rec.device);
  if (tp == nullptr) return false;
  track& t = *tp;
  dropped_event(t, rec.device, rec.stamp.time_ns, rec.dropped);
  std::string& out = t.own;
  const point_kind kind = point != nullptr ? point->kind : point_kind::tap;
  if (kind == point_kind::print) return t.own.size() >= trace_flush_bytes;  // its lines arrive through line(), formatted
  if (kind == point_kind::scope) {
    std::optional<scope_event> e = decode_value<scope_event>(rec.payload, rec.bytes);
    if (e && (e->phase == scope_phase::begin || e->phase == scope_phase::end)) {
      std::string name(e->text());
      if (name.empty()) {
        std::lock_guard names(names_mutex_);
        const auto it = scope_names_.find(e->id);
        name = it != scope_names_.end() ? it->second : "scope " + std::to_string(e->id);
      }
      begin_event(out, e->phase == scope_phase::begin ? "B" : "E", rec.device, rec.stamp.time_ns, "scope", name);
      out += ",\"args\":{\"id\":";
      append_json_number(out, e->id);
      out += "}}";
      done_event(t);
      return t.own.size() >= trace_flush_bytes;
    }
  }
  if (point == nullptr) {
    begin_event(out, "i", rec.device, rec.stamp.time_ns, "unknown", unknown_id_text(rec.id));
  } else {
    begin_event(out, "i", rec.device, rec.stamp.time_ns, kind == point_kind::call ? "call" : "tap", point->name);
  }
  out += ",\"s\":\"t\",\"args\":";
  const std::size_t args_at = out.size();
  if (entry != nullptr && rec.fingerprint == entry->fingerprint) {
    entry->describe(rec.payload, rec.bytes, out);
  } else {
    out += "{\"bytes\":";
    append_json_number(out, rec.bytes);
    out += '}';
  }
  // The device's sequence number beside the value's fields: `{...}` becomes `{...,"sequence":n}`.
  out.pop_back();
  if (out.size() != args_at + 1) out += ',';
  out += "\"sequence\":";
  append_json_number(out, rec.stamp.sequence);
  out += "}}";
  done_event(t);
  return t.own.size() >= trace_flush_bytes;
}

DEVTAP_FUNC void trace_writer::line(std::size_t device, std::uint64_t time_ns, std::string_view text, bool from_reader) {
  auto render = [&](std::string& out) {
    begin_event(out, "i", device, time_ns, "print", "print");
    out += ",\"s\":\"t\",\"args\":{\"line\":";
    append_json_string(out, text);
    out += "}}";
  };
  if (device >= tracks_.size()) return;
  track* t = from_reader ? reader_track(device) : nullptr;
  if (t == nullptr) {  // another thread's, or after the reader ended
    tracks_[device]->add_foreign(render);
    return;
  }
  render(t->own);
  done_event(*t);
}

DEVTAP_FUNC void trace_writer::marker_event(std::string& out, std::size_t device, std::uint64_t time_ns, marker_kind kind,
                                            std::uint64_t count, std::string_view text) {
  begin_event(out, "i", device, time_ns, "marker", marker_name(kind));
  out += ",\"s\":\"t\",\"args\":{\"count\":";
  append_json_number(out, count);
  out += ",\"text\":";
  append_json_string(out, text);
  out += "}}";
}

DEVTAP_FUNC void trace_writer::dropped_event(track& t, std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) {
  if (dropped <= t.dropped) return;
  marker_event(t.own, device, time_ns, marker_kind::dropped, dropped - t.dropped, "taps the device did not write");
  t.dropped = dropped;
  done_event(t);
}

DEVTAP_FUNC void trace_writer::marker(std::size_t device, std::uint64_t time_ns, marker_kind kind, std::uint64_t count,
                                      std::string_view text, bool from_reader) {
  if (device >= tracks_.size()) return;
  track* t = from_reader ? reader_track(device) : nullptr;
  if (t == nullptr) {  // another thread's (close() adds drops counted after the reader ended), or after it ended
    tracks_[device]->add_foreign([&](std::string& out) { marker_event(out, device, time_ns, kind, count, text); });
    return;
  }
  if (kind == marker_kind::dropped) dropped_event(*t, device, time_ns, t->dropped + count);
  else {
    marker_event(t->own, device, time_ns, kind, count, text);
    done_event(*t);
  }
}

DEVTAP_FUNC void trace_writer::name_scope(std::uint32_t id, std::string_view name) {
  std::lock_guard lock(names_mutex_);
  scope_names_[id] = std::string(name);
}

DEVTAP_FUNC void trace_writer::end(std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) {
  if (track* t = reader_track(device)) {
    dropped_event(*t, device, time_ns, dropped);
    write_out(device);  // in the file at once, as the recording's: flush() skips a stream ended before close()
    t->ended.store(true, std::memory_order_release);  // what comes later (other threads' markers) is close()'s
  }
}

DEVTAP_FUNC void trace_writer::write_out(std::size_t device) {
  track* t = reader_track(device);
  const auto lock = lock_file();
  if (t != nullptr) {
    write_locked(t->own);
    t->own.clear();
  }
  flush_locked();
}

DEVTAP_FUNC std::string trace_writer::close(std::chrono::steady_clock::time_point give_up_at,
                                                std::chrono::steady_clock::time_point pipe_deadline) {
  // Each track's text, then the file (a reader writes to the file from its own text: never the other way round).
  std::vector<std::string> rest = take_all_tracks([&](std::string& text, std::size_t device) {
    marker_event(text, device, stamp_now_ns(), marker_kind::lost, 0,
                 "the device's reader was stuck in a consumer or a write when the trace was closed: the events it had not "
                 "yet written (up to 64 KiB) are missing");
  });
  std::unique_lock<std::mutex> lock;
  if (lock_for_close(lock, give_up_at, pipe_deadline)) {
    for (const std::string& text : rest) write_locked(text);
    write_locked("\n]}\n");
  }
  return lock.owns_lock() ? close_locked() : left_message();
}

}  // namespace detail
DEVTAP_END_NAMESPACE
