#pragma once
/** The trace file (receiver_options::trace_file): every record of a receiver as a Chrome Trace
 *  Event JSON file that ui.perfetto.dev and chrome://tracing open — one track per device, taps as
 *  instant events with their fields as arguments, scopes as durations, prints as log events,
 *  drops and errors as markers (docs/timeline.md). Internal. */
#include <devtap/config.hpp>
#include <devtap/receiver/record_sink.hpp>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

class trace_writer final : public record_sink, sink_file<std::string> {
public:
  /** Opens `path` for writing (std::invalid_argument naming it and why, after `where`, if it cannot)
   *  and writes the process and track names. Times are written in µs since `origin_ns` (a
   *  steady_clock time). `where`: the receiver's option; the recording tool's output says none. */
  trace_writer(const std::string& path, std::string_view process_name, const std::vector<std::string>& device_names,
               std::uint64_t origin_ns, std::string_view where = "devtap: receiver_options::trace_file: ");
  ~trace_writer() override;

  [[nodiscard]] DEVTAP_INLINE_VIRTUAL bool record(const sink_record& rec, const point_description* point,
                                    const consumer_entry* entry) override;
  DEVTAP_INLINE_VIRTUAL void line(std::size_t device, std::uint64_t time_ns, std::string_view text,
                                  bool from_reader) override;
  DEVTAP_INLINE_VIRTUAL void marker(std::size_t device, std::uint64_t time_ns, marker_kind kind, std::uint64_t count,
                                    std::string_view text, bool from_reader) override;
  void define(const point_description&) override {}  // the trace names a point at each event
  DEVTAP_INLINE_VIRTUAL void name_scope(std::uint32_t id, std::string_view name) override;
  DEVTAP_INLINE_VIRTUAL void end(std::size_t device, std::uint64_t time_ns, std::uint64_t dropped) override;
  DEVTAP_INLINE_VIRTUAL void write_out(std::size_t device) override;
  DEVTAP_INLINE_VIRTUAL std::string close(std::chrono::steady_clock::time_point give_up_at,
                                          std::chrono::steady_clock::time_point pipe_deadline) override;
  void start() override { start_file(); }

  /** Events written so far (metadata not counted). */
  std::uint64_t events() const noexcept { return events_.load(std::memory_order_relaxed); }

private:
  // A track holds one device's events, rendered by its reader and written to the file in pieces of ~64 KiB.

  // `,\n{"ph":..,"pid":1,"tid":..,"ts":..,"cat":..,"name":..` : the caller adds the rest and `}`.
  void begin_event(std::string& out, const char* phase, std::size_t device, std::uint64_t time_ns,
                   std::string_view category, std::string_view name);
  void marker_event(std::string& out, std::size_t device, std::uint64_t time_ns, marker_kind kind, std::uint64_t count,
                    std::string_view text);
  void dropped_event(track& t, std::size_t device, std::uint64_t time_ns, std::uint64_t dropped);  // the reader's
  // The reader's: counts it. A track grown large is written by write_out, which its reader calls
  // when record() says so, after handing in what it set aside for merged consumers.
  void done_event(track& t);
  void write_locked(std::string_view text) { sink_file::write_locked(text.data(), text.size()); }  // file_mutex_ held

  std::uint64_t origin_ns_;
  std::mutex names_mutex_;
  std::unordered_map<std::uint32_t, std::string> scope_names_;
  std::atomic<std::uint64_t> events_{0};
};

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/receiver/trace_writer_impl.hpp>
#endif
