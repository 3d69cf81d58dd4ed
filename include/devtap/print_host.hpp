#pragma once
/** The host half of devtap::print: the consumer that formats print records with {fmt} and writes
 * whole lines to the printer's sink. It needs {fmt}, so it is for .cpp files only (nvcc cannot
 * compile {fmt} 9 at C++20); <devtap/print.hpp>, which device code uses, stays fmt-free.
 *
 * Include it in one .cpp file of a program and `devtap::attach_print` works from every file of it,
 * .cu ones included (it installs the formatter behind attach_print when the program starts):
 *
 *   // print_host.cpp: the whole file
 *   #include <devtap/print_host.hpp>
 *
 * Per device, one coroutine formats that device's records in emission order into a reused buffer
 * (no allocation per line once warm) and writes each line with one fwrite, or one call of the
 * sink callable under a mutex. A record whose format is not known yet (a CUDA thread's id-only
 * record overtook the record that carries the definition) waits, with every later record of that
 * device, until the definition arrives, so the order stays the emission order. */
#include <devtap/print.hpp>

#include <fmt/args.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
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
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A range argument (array or span, not text) in the record, formatted as std::span<const T>. */
struct print_range {
  print_kind kind = print_kind::invalid;
  const std::byte* data = nullptr;
  std::size_t count = 0;
};

}  // namespace detail
DEVTAP_END_NAMESPACE

/** Formats a print_range as fmt formats a std::span of its element type ("[1, 2]", "{::x}", "{:n}"). */
template <>
struct fmt::formatter<devtap::detail::print_range> {
  fmt::string_view spec;
  int first_dynamic_id = 0;  // automatic ids of {} widths in the element spec start here

  // The element type is known only at format time: keep the spec, and take the argument ids of
  // its dynamic widths and precisions from the outer context now, as fmt's range formatter would.
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    auto end = it;
    bool first = true;
    while (end != ctx.end() && *end != '}') {
      if (*end == '{') {
        ++end;
        if (end != ctx.end() && *end == '}') {
          const int id = ctx.next_arg_id();
          if (first) first_dynamic_id = id;
          first = false;
        } else {
          int id = 0;
          while (end != ctx.end() && *end >= '0' && *end <= '9') id = id * 10 + (*end++ - '0');
          ctx.check_arg_id(id);
        }
        while (end != ctx.end() && *end != '}') ++end;
        if (end != ctx.end()) ++end;
        continue;
      }
      ++end;
    }
    spec = fmt::string_view(it, static_cast<std::size_t>(end - it));
    return end;
  }

  template <class T>
  auto format_as(const devtap::detail::print_range& r, fmt::format_context& ctx) const {
    const std::span<const T> values(reinterpret_cast<const T*>(r.data), r.count);
    fmt::formatter<std::span<const T>> f;
    fmt::format_parse_context inner(spec, {}, first_dynamic_id);
    inner.advance_to(f.parse(inner));
    return f.format(values, ctx);
  }

  auto format(const devtap::detail::print_range& r, fmt::format_context& ctx) const {
    using devtap::detail::print_kind;
    switch (r.kind) {
      case print_kind::boolean: return format_as<bool>(r, ctx);
      case print_kind::character: return format_as<char>(r, ctx);
      case print_kind::i8: return format_as<signed char>(r, ctx);
      case print_kind::i16: return format_as<std::int16_t>(r, ctx);
      case print_kind::i32: return format_as<std::int32_t>(r, ctx);
      case print_kind::i64: return format_as<std::int64_t>(r, ctx);
      case print_kind::u8: return format_as<unsigned char>(r, ctx);
      case print_kind::u16: return format_as<std::uint16_t>(r, ctx);
      case print_kind::u32: return format_as<std::uint32_t>(r, ctx);
      case print_kind::u64: return format_as<std::uint64_t>(r, ctx);
      case print_kind::f32: return format_as<float>(r, ctx);
      case print_kind::f64: return format_as<double>(r, ctx);
      case print_kind::pointer: return format_as<const void*>(r, ctx);
      default: throw fmt::format_error("devtap::print: unknown argument kind");
    }
  }
};

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A printer's state shared by its per-device consumers. */
struct print_host_state {
  explicit print_host_state(print_options o)
      : options(std::move(o)), counters(std::make_shared<print_counters>()), start(std::chrono::steady_clock::now()) {}

  print_options options;
  std::shared_ptr<print_counters> counters;
  std::chrono::steady_clock::time_point start;
  std::mutex sink_mutex;  // callables only: a FILE locks itself per fwrite
};

/** Most records (and bytes) one device may hold back while it waits for a format's definition. */
inline constexpr std::size_t print_max_pending_records = 1u << 16;
inline constexpr std::size_t print_max_pending_bytes = std::size_t{16} << 20;

/** One device's formatting state: runs on that device's reader thread only. */
class print_lane {
public:
  explicit print_lane(std::shared_ptr<print_host_state> state)
      : state_(std::move(state)), counters_(&state_->counters->add_lane()) {
    ranges_.resize(print_max_args);  // stable addresses: the store refers to them
    store_.reserve(print_max_args, 0);
  }

  void on_record(const device& dev, std::span<const std::byte> bytes) {
    const print_record_view r = parse_print_record(bytes.data(), bytes.size());
    if (r.has_definition) learn_definition(r);
    if (pending_.empty() && format(dev, r)) return;
    pending_.emplace_back(bytes.begin(), bytes.end());
    pending_bytes_ += bytes.size();
    drain(dev, false);
  }

  /** The end of the device's stream: whatever still waits is written as unknown, the FILE flushed. */
  void finish(const device& dev) {
    drain(dev, true);
    if (state_->options.sink.callback() == nullptr && state_->options.sink.file() != nullptr)
      std::fflush(state_->options.sink.file());
  }

private:
  void learn_definition(const print_record_view& r) {
    std::vector<std::uint32_t> descs(r.def_nargs);
    if (r.def_nargs != 0) std::memcpy(descs.data(), r.def_descs, 4 * r.def_nargs);
    bump(counters_->definitions);
    if (const print_format_def* def = global_print_registry().add(r.id, r.def_text, descs.data(), descs.size()))
      cache_[r.id] = def;
  }

  void drain(const device& dev, bool at_end) {
    while (!pending_.empty()) {
      const std::vector<std::byte>& front = pending_.front();
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
    if (def->check.code != print_check::ok) {
      error_line(dev, counters_->format_errors,
                 fmt::format("devtap::print: format \"{}\" rejected at offset {}: {}", def->text, def->check.offset,
                             print_check_text(def->check.code)));
      return true;
    }
    if (r.arg_bytes != def->arg_bytes || r.span_count != def->span_count || !collect(*def, r)) {
      error_line(dev, counters_->malformed,
                 fmt::format("devtap::print: malformed arguments for format \"{}\"", def->text));
      return true;
    }
    begin_line(dev);
    const std::size_t message_at = line_.size();
    try {
      fmt::vformat_to(fmt::appender(line_), fmt::string_view(def->text), store_);
    } catch (const std::exception& e) {
      line_.resize(message_at);
      fmt::format_to(fmt::appender(line_), "devtap::print: cannot format \"{}\": {}; arguments: ", def->text, e.what());
      append_plain_arguments(def->descs.size());
      bump(counters_->format_errors);
    }
    end_line(dev, message_at);
    return true;
  }

  // Fills the argument store from the record; false when the bytes do not fit the definition.
  bool collect(const print_format_def& def, const print_record_view& r) {
    store_.clear();
    const std::size_t nargs = def.descs.size();
    // the spans, in order
    span_data_.clear();
    std::size_t pos = 0;
    for (std::size_t a = 0; a < nargs; ++a) {
      const std::uint32_t d = def.descs[a];
      if (desc_form(d) != print_form::span) continue;
      if (r.span_bytes - pos < 8) return false;
      const std::uint64_t count = print_load_u64(r.spans + pos);
      const std::size_t size = print_kind_size(desc_kind(d));
      const std::size_t room = r.span_bytes - pos - 8;
      if (count > room / size || align8(static_cast<std::size_t>(count) * size) > room) return false;
      span_data_.push_back({desc_kind(d), r.spans + pos + 8, static_cast<std::size_t>(count)});
      pos += 8 + align8(static_cast<std::size_t>(count) * size);
    }
    if (pos != r.span_bytes) return false;
    for (std::size_t a = 0; a < nargs; ++a) {
      const std::uint32_t d = def.descs[a];
      const print_kind k = desc_kind(d);
      switch (desc_form(d)) {
        case print_form::scalar:
          if (!push_scalar(k, r.args + def.offsets[a])) return false;
          break;
        case print_form::array:
          if (!push_range(a, {k, r.args + def.offsets[a], desc_extent(d)}, false)) return false;
          break;
        case print_form::span:
          if (!push_range(a, span_data_[def.offsets[a]], true)) return false;
          break;
      }
    }
    return true;
  }

  template <class T>
  void push_value(const std::byte* at) {
    T v;
    std::memcpy(&v, at, sizeof(T));
    store_.push_back(v);
  }

  bool push_scalar(print_kind k, const std::byte* at) {
    switch (k) {
      case print_kind::boolean: {
        const auto b = static_cast<unsigned char>(*at);
        if (b > 1) return false;
        store_.push_back(b != 0);
        return true;
      }
      case print_kind::character: push_value<char>(at); return true;
      case print_kind::i8: push_value<signed char>(at); return true;
      case print_kind::i16: push_value<std::int16_t>(at); return true;
      case print_kind::i32: push_value<std::int32_t>(at); return true;
      case print_kind::i64: push_value<long long>(at); return true;
      case print_kind::u8: push_value<unsigned char>(at); return true;
      case print_kind::u16: push_value<std::uint16_t>(at); return true;
      case print_kind::u32: push_value<std::uint32_t>(at); return true;
      case print_kind::u64: push_value<unsigned long long>(at); return true;
      case print_kind::f32: push_value<float>(at); return true;
      case print_kind::f64: push_value<double>(at); return true;
      case print_kind::pointer: {
        std::uint64_t v;
        std::memcpy(&v, at, 8);
        store_.push_back(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(v)));
        return true;
      }
      default: return false;
    }
  }

  // Text (char arrays stop at their first NUL, as fmt prints char arrays; spans do not) or a range.
  bool push_range(std::size_t a, print_range range, bool is_span) {
    if (range.kind == print_kind::character) {
      const char* chars = reinterpret_cast<const char*>(range.data);
      std::size_t n = range.count;
      if (!is_span) {
        const void* nul = std::memchr(chars, 0, n);
        if (nul != nullptr) n = static_cast<std::size_t>(static_cast<const char*>(nul) - chars);
      }
      store_.push_back(fmt::string_view(chars, n));
      return true;
    }
    if (range.kind == print_kind::boolean)
      for (std::size_t i = 0; i < range.count; ++i)
        if (static_cast<unsigned char>(range.data[i]) > 1) return false;
    ranges_[a] = range;
    store_.push_back(std::cref(ranges_[a]));
    return true;
  }

  void append_plain_arguments(std::size_t nargs) {
    std::string plain;
    for (std::size_t a = 0; a < nargs; ++a) plain += a == 0 ? "{}" : ", {}";
    const std::size_t at = line_.size();
    try {
      fmt::vformat_to(fmt::appender(line_), fmt::string_view(plain), store_);
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
    const print_sink& sink = state_->options.sink;
    if (sink.callback()) {
      std::lock_guard lock(state_->sink_mutex);
      const char* p = line_.data();
      const char* end = p + line_.size();
      while (p < end) {
        const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
        sink.callback()(std::string_view(p, static_cast<std::size_t>(nl - p)), dev);
        p = nl + 1;
      }
    } else if (sink.file() != nullptr) {
      if (std::fwrite(line_.data(), 1, line_.size(), sink.file()) != line_.size())
        bump(counters_->write_errors);
      if (state_->options.flush_each_line) std::fflush(sink.file());
    }
    bump(counters_->lines);
  }

  // This lane is the only writer of its counters: a plain add, no locked instruction per line.
  static void bump(std::atomic<std::uint64_t>& c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

  std::shared_ptr<print_host_state> state_;
  print_lane_counters* counters_;  // owned by the printer's print_counters
  fmt::memory_buffer line_;
  fmt::dynamic_format_arg_store<fmt::format_context> store_;
  std::vector<print_range> ranges_;
  std::vector<print_range> span_data_;
  std::unordered_map<std::uint64_t, const print_format_def*> cache_;
  std::uint64_t last_id_ = 0;  // 0 is never an id
  const print_format_def* last_def_ = nullptr;
  std::deque<std::vector<std::byte>> pending_;
  std::size_t pending_bytes_ = 0;
};

/** The consumer of one device's print records. */
inline consumer<std::span<const std::byte>> print_consumer(inbox<std::span<const std::byte>> in,
                                                           std::shared_ptr<print_host_state> state) {
  print_lane lane(std::move(state));
  while (auto record = co_await in.next()) lane.on_record(in.device(), *record);
  lane.finish(in.device());
}

/** attach_print's implementation (installed behind the hook below). */
inline print_channel attach_print_fmt(receiver& rx, print_options options) {
  auto state = std::make_shared<print_host_state>(std::move(options));
  std::string name = state->options.name;
  const tap_point<std::span<const std::byte>> point = rx.attach<std::span<const std::byte>>(
      [state](inbox<std::span<const std::byte>> in) { return print_consumer(in, state); }, std::move(name));
  static std::atomic<std::uint32_t> tokens{0};
  std::uint32_t token = tokens.fetch_add(1, std::memory_order_relaxed) + 1;
  if (token == 0) token = tokens.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 means "never defined"
  return print_channel(print_point{point, token}, state->counters);
}

/** Installs the formatter behind devtap::attach_print when the program starts. */
inline const bool print_host_installed = [] {
  print_attach_hook().store(&attach_print_fmt, std::memory_order_release);
  return true;
}();

}  // namespace detail
DEVTAP_END_NAMESPACE
