#pragma once
// The host side of one device's prints: formats its records in emission order into a reused buffer
// and writes each whole line with one fwrite, or one call of the sink callable under a mutex. A
// record whose format is not known yet (a CUDA thread's id-only record overtook the record that
// carries the definition) waits, with every later record of that device, until the definition
// arrives, so the order stays the emission order. Needs {fmt}: host only.
#include <devtap/backend/device.hpp>
#include <devtap/config.hpp>
#include <devtap/print/arg_store.hpp>
#include <devtap/print/format_id.hpp>
#include <devtap/print/options.hpp>
#include <devtap/print/record_view.hpp>
#include <devtap/print/registry.hpp>
#include <devtap/print/rejection.hpp>
#include <devtap/print/stats.hpp>
#include <devtap/receiver/consumer_entry.hpp>

#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#if __has_include(<stdio_ext.h>)
#  include <stdio_ext.h>  // __fpending (glibc, musl)
#endif

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A printer's state shared by its per-device consumers.
struct print_host_state {
  explicit print_host_state(print_options o)
      : options(std::move(o)), counters(std::make_shared<print_counters>()), start(std::chrono::steady_clock::now()) {}

  print_options options;
  std::shared_ptr<print_counters> counters;
  std::chrono::steady_clock::time_point start;
  std::mutex sink_mutex;  // devices take turns at the sink (a FILE's line and its bookkeeping below)
  // A FILE sink's lines (their bytes, oldest first; all devices') not yet known to be out of its
  // buffer: what a failing flush loses. Guarded by sink_mutex, held across each write so that it
  // moves with the buffer (not flockfile: TSan cannot see that lock).
  std::deque<std::size_t> unflushed_lines;
  std::size_t unflushed_bytes = 0;
  // The receiver's trace file, when it has one: every line also goes there (device, time in ns, text).
  std::function<void(const device&, std::uint64_t, std::string_view)> trace_line;
};

// Most records (and bytes) one device may hold back while it waits for a format's definition.
inline constexpr std::size_t print_max_pending_records = 1u << 16;
inline constexpr std::size_t print_max_pending_bytes = std::size_t{16} << 20;

// One device's formatting state: runs on that device's reader thread only.
class print_device_formatter {
public:
  explicit print_device_formatter(std::shared_ptr<print_host_state> state)
      : state_(std::move(state)), counters_(&state_->counters->add_device()) {}

  void on_record(const device& dev, std::span<const std::byte> bytes, std::uint64_t time_ns = 0) {
    time_ns_ = time_ns;
    const print_record_view r = parse_print_record(bytes.data(), bytes.size());
    if (r.has_definition) learn_definition(r);
    if (pending_.empty() && format(dev, r)) return;
    pending_.push_back({time_ns, std::vector<std::byte>(bytes.begin(), bytes.end())});
    pending_bytes_ += bytes.size();
    try {
      drain(dev, false);
    } catch (...) {
      lose_pending(1);  // this record's failed delivery is the receiver's consumer error
      throw;
    }
  }

  // Records still waiting when the coroutine ends without its end of stream (close() gave up).
  ~print_device_formatter() { lose_pending(0); }

  // The end of the device's stream: whatever still waits is written as unknown, the FILE flushed.
  void finish(const device& dev) {
    try {
      drain(dev, true);
    } catch (...) {
      lose_pending(0);  // the end of stream is no record: nobody else counts them
      throw;
    }
    const print_sink& sink = state_->options.sink;
    if (sink.callback() || sink.file() == nullptr) return;
    std::FILE* f = sink.file();
    std::uint64_t lost = 0;
    {
      std::lock_guard lock(state_->sink_mutex);
      lost = flush_locked(f) ? 0 : take_unflushed();
    }
    add(counters_->write_errors, lost);
  }

private:
  // Records taken from the ring that will never be written (the sink threw, or the stream was
  // given up): each counts as a line the sink lost. `counted_elsewhere` of them the receiver counts.
  void lose_pending(std::size_t counted_elsewhere) noexcept {
    const std::size_t n = pending_.size() > counted_elsewhere ? pending_.size() - counted_elsewhere : 0;
    add(counters_->lines, n);
    add(counters_->write_errors, n);
    pending_.clear();
    pending_bytes_ = 0;
  }

  void learn_definition(const print_record_view& r) {
    std::vector<std::uint32_t> descs(r.def_nargs);
    if (r.def_nargs != 0) std::memcpy(descs.data(), r.def_descs, 4 * r.def_nargs);
    bump(counters_->definitions);
    // The id is the hash of the text and the descriptors: a definition that does not hash to its
    // id was damaged, and registering it would replace that format process-wide (the registry
    // keeps the first). Not learned: its records become "malformed format definition" lines.
    if (print_format_id(r.def_text.data(), r.def_text.size(), descs.data(), descs.size()) != r.id) return;
    if (const print_format_def* def = global_print_registry().add(r.id, r.def_text, descs.data(), descs.size()))
      cache_[r.id] = def;
  }

  void drain(const device& dev, bool at_end) {
    while (!pending_.empty()) {
      const std::vector<std::byte>& front = pending_.front().bytes;
      time_ns_ = pending_.front().time_ns;  // its own time on the timeline, not the record's that released it
      const bool over = pending_.size() > print_max_pending_records || pending_bytes_ > print_max_pending_bytes;
      if (!format(dev, parse_print_record(front.data(), front.size()))) {
        if (!at_end && !over) return;
        unknown_line(dev, front);
      }
      pending_bytes_ -= front.size();
      pending_.pop_front();
    }
  }

  const print_format_def* lookup(std::uint64_t id) {
    if (id == last_id_) return last_def_;
    const print_format_def* def = nullptr;
    if (auto it = cache_.find(id); it != cache_.end()) {
      def = it->second;
    } else {
      def = global_print_registry().find(id);
      if (def == nullptr) return nullptr;
      cache_.emplace(id, def);
    }
    last_id_ = id;
    last_def_ = def;
    return def;
  }

  // Formats and writes one record; false when its format is not known (yet).
  bool format(const device& dev, const print_record_view& r) {
    if (r.error != nullptr) {
      error_line(dev, counters_->malformed, fmt::format("devtap::print: malformed record ({})", r.error));
      return true;
    }
    const print_format_def* def = lookup(r.id);
    if (def == nullptr) {
      if (r.has_definition)  // it had one, and the registry refused it
        error_line(dev, counters_->malformed,
                   fmt::format("devtap::print: malformed format definition (id {:#018x})", r.id));
      return r.has_definition;
    }
    if (def->id_shared.load(std::memory_order_acquire)) {  // partner: print_registry::add's release store
      error_line(dev, counters_->format_errors,
                 fmt::format("devtap::print: two formats share the id {:#018x} (\"{}\" and \"{}\"): this print "
                             "cannot be told apart", r.id, def->text, def->other_text));
      return true;
    }
    if (def->check.code != print_check::ok) {
      error_line(dev, counters_->format_errors,
                 fmt::format("devtap::print: format \"{}\" rejected at offset {}: {}", def->text, def->check.offset,
                             print_check_text(def->check.code)));
      return true;
    }
    if (r.arg_bytes != def->arg_bytes || r.span_count != def->span_count || !args_.collect(*def, r)) {
      error_line(dev, counters_->malformed,
                 fmt::format("devtap::print: malformed arguments for format \"{}\"", def->text));
      return true;
    }
    begin_line(dev);
    const std::size_t message_at = line_.size();
    try {
      print_check_widths(*def, r);
      fmt::vformat_to(fmt::appender(line_), fmt::string_view(def->text), args_.args());
    } catch (const std::exception& e) {
      line_.resize(message_at);
      fmt::format_to(fmt::appender(line_), "devtap::print: cannot format \"{}\": {}; arguments: ", def->text, e.what());
      append_plain_arguments(def->descs.size());
      bump(counters_->format_errors);
    }
    end_line(dev, message_at);
    return true;
  }

  void append_plain_arguments(std::size_t nargs) {
    std::string plain;
    for (std::size_t a = 0; a < nargs; ++a) plain += a == 0 ? "{}" : ", {}";
    const std::size_t at = line_.size();
    try {
      fmt::vformat_to(fmt::appender(line_), fmt::string_view(plain), args_.args());
    } catch (const std::exception&) {
      line_.resize(at);
      fmt::format_to(fmt::appender(line_), "({} arguments)", nargs);
    }
  }

  void begin_line(const device& dev) {
    line_.clear();
    const print_prefix p = state_->options.prefix;
    if (has_prefix(p, print_prefix::elapsed)) {
      const std::chrono::duration<double> s = std::chrono::steady_clock::now() - state_->start;
      fmt::format_to(fmt::appender(line_), "[{:12.6f}] ", s.count());
    }
    if (has_prefix(p, print_prefix::wall_clock)) {
      const auto now = std::chrono::system_clock::now();
      const std::time_t t = std::chrono::system_clock::to_time_t(now);
      std::tm tm{};
      localtime_r(&t, &tm);
      const auto us = std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() % 1000000;
      fmt::format_to(fmt::appender(line_), "[{:02}:{:02}:{:02}.{:06}] ", tm.tm_hour, tm.tm_min, tm.tm_sec, us);
    }
    if (has_prefix(p, print_prefix::device)) fmt::format_to(fmt::appender(line_), "[{}] ", dev.name());
  }

  // Completes the line that starts at message_at after its prefix: every inner line gets the prefix
  // too, the text ends with one '\n'; then writes it.
  void end_line(const device& dev, std::size_t message_at) {
    if (line_.size() > message_at && line_[line_.size() - 1] == '\n') line_.resize(line_.size() - 1);
    if (message_at != 0 && std::memchr(line_.data() + message_at, '\n', line_.size() - message_at) != nullptr) {
      const std::string prefix(line_.data(), message_at);
      const std::string message(line_.data() + message_at, line_.size() - message_at);
      line_.resize(message_at);
      for (char c : message) {
        line_.push_back(c);
        if (c == '\n') line_.append(prefix.data(), prefix.data() + prefix.size());
      }
    }
    line_.push_back('\n');
    write(dev);
  }

  void error_line(const device& dev, std::atomic<std::uint64_t>& counter, std::string_view text) {
    bump(counter);
    begin_line(dev);
    const std::size_t at = line_.size();
    line_.append(text.data(), text.data() + text.size());
    end_line(dev, at);
  }

  void unknown_line(const device& dev, std::span<const std::byte> bytes) {
    const print_record_view r = parse_print_record(bytes.data(), bytes.size());
    error_line(dev, counters_->unknown_formats,
               fmt::format("devtap::print: format id {:#018x} unknown (its definition never arrived from {}; {} "
                           "argument bytes)",
                           r.id, dev.name(), r.arg_bytes + r.span_bytes));
  }

  void write(const device& dev) {
    if (given_up_here()) {  // close() gave up on this device: nothing more reaches the trace or a sink,
      add(counters_->write_errors, 1);  // however many held lines a definition released (FILE too)
      return bump(counters_->lines);
    }
    if (state_->trace_line)
      state_->trace_line(dev, time_ns_, std::string_view(line_.data(), line_.size() - (line_.size() == 0 ? 0 : 1)));
    const print_sink& sink = state_->options.sink;
    if (sink.callback()) {
      std::unique_lock lock(state_->sink_mutex, std::defer_lock);
      // Not after close() gave up on this device: neither when this line waited for another device's
      // sink call, nor for its next line once its own sink call took that long.
      bool given_up = !lock_shared(lock);
      const char* p = line_.data();
      const char* end = p + line_.size();
      for (; p < end && !given_up; given_up = given_up_here()) {
        const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
        sink.callback()(std::string_view(p, static_cast<std::size_t>(nl - p)), dev);
        p = nl + 1;
      }
      if (p < end) add(counters_->write_errors, 1);  // lines left: the print counts once, however many
    } else if (sink.file() != nullptr) {
      write_file(sink.file());
    }
    bump(counters_->lines);
  }

  // One line into the FILE. A failure shows as a short fwrite, a failing fflush, or (glibc, when
  // the flush inside fwrite fails) only as the error indicator newly set; the lines still in the
  // buffer are lost with it, so each failure counts the lines that may still be there, this one
  // included (docs/print.md, Lines).
  void write_file(std::FILE* f) {
    std::unique_lock lock(state_->sink_mutex);  // the FILE's buffer holds other devices' lines too
    // The FILE's own lock too, so that other threads writing to it (printf to stdout) cannot move
    // its buffer between the write and the look at what is pending (__fpending takes no lock).
    ::flockfile(f);
    const bool had_error = std::ferror(f) != 0;
    state_->unflushed_lines.push_back(line_.size());
    state_->unflushed_bytes += line_.size();
    bool ok = std::fwrite(line_.data(), 1, line_.size(), f) == line_.size() && (had_error || std::ferror(f) == 0);
    if (ok && state_->options.flush_each_line) ok = flush_locked(f);
    const std::uint64_t lost = ok ? 0 : take_unflushed();
    if (ok) forget_written(f);
    ::funlockfile(f);
    lock.unlock();
    add(counters_->write_errors, lost);
  }

  // fflush under the FILE's lock; on success nothing is pending any more.
  bool flush_locked(std::FILE* f) {
    if (std::fflush(f) != 0) return false;
    state_->unflushed_lines.clear();
    state_->unflushed_bytes = 0;
    return true;
  }

  std::uint64_t take_unflushed() {
    const std::uint64_t n = state_->unflushed_lines.size();
    state_->unflushed_lines.clear();
    state_->unflushed_bytes = 0;
    return n;
  }

  // Drops the lines that have left the buffer: the buffer holds the last __fpending bytes written,
  // so a line wholly before those is out. Without <stdio_ext.h>, lines leave only at a flush.
  void forget_written([[maybe_unused]] std::FILE* f) {
#if __has_include(<stdio_ext.h>)
    const std::size_t pending = __fpending(f);
    auto& lines = state_->unflushed_lines;
    while (!lines.empty() && state_->unflushed_bytes - lines.front() >= pending) {
      state_->unflushed_bytes -= lines.front();
      lines.pop_front();
    }
#endif
  }

  // This device's reader thread is the only writer of its counters: a plain add, no locked
  // instruction per line.
  static void bump(std::atomic<std::uint64_t>& c) { add(c, 1); }
  static void add(std::atomic<std::uint64_t>& c, std::uint64_t n) {
    if (n != 0) c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }

  std::shared_ptr<print_host_state> state_;
  print_device_counters* counters_;  // owned by the printer's print_counters
  fmt::memory_buffer line_;
  print_arg_store args_;
  std::unordered_map<std::uint64_t, const print_format_def*> cache_;
  std::uint64_t last_id_ = 0;  // 0 is never an id
  const print_format_def* last_def_ = nullptr;
  struct held_record {  // waiting for its format's definition
    std::uint64_t time_ns;
    std::vector<std::byte> bytes;
  };
  std::deque<held_record> pending_;
  std::size_t pending_bytes_ = 0;
  std::uint64_t time_ns_ = 0;  // the time of the record being formatted (for the trace)
};

}  // namespace detail
DEVTAP_END_NAMESPACE
