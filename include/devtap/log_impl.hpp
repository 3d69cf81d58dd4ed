#pragma once
// The definitions of the logger (declared in log.hpp): included by that header when header-only,
// compiled once into the library in compiled mode (see config.hpp).
#include <devtap/log.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC bool log_level_named(std::string_view text, log_level& out) noexcept {
  text = trim(text);
  if (text.empty()) return false;
  char lower[8] = {};
  if (text.size() > sizeof lower) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    lower[i] = (text[i] >= 'A' && text[i] <= 'Z') ? static_cast<char>(text[i] - 'A' + 'a') : text[i];
  constexpr struct { std::string_view name; log_level level; } names[] = {
      {"debug", log_level::debug}, {"info", log_level::info}, {"warn", log_level::warn}, {"warning", log_level::warn},
      {"error", log_level::error}, {"off", log_level::off},   {"none", log_level::off}};
  for (const auto& n : names)
    if (n.name == std::string_view(lower, text.size())) {
      out = n.level;
      return true;
    }
  return false;
}

DEVTAP_FUNC log_level parse_log_level(const char* text) noexcept {
  log_level level = log_level::warn;
  if (text != nullptr && !log_level_named(text, level)) return log_level::warn;
  return level;
}

DEVTAP_FUNC std::string log_env_problem(const char* text) {
  log_level level{};
  if (text == nullptr || trim(text).empty() || log_level_named(text, level)) return {};  // blank: unset, as every variable
  return std::string("DEVTAP_LOG='") + printable(text, true) +
         "' is not a log level (expected debug, info, warn, error or off); using warn";
}

DEVTAP_FUNC logger_state& logger() {
  // Function-local: no static-init order problem. Never destroyed: receivers still open at exit
  // are closed by an atexit handler that may run after a static logger's destructor, and log.
  static logger_state& state = *new logger_state;
  return state;
}

/** Set while this thread runs the log sink, which holds the logger's mutex: a line the sink logs
 *  goes to stderr, and set_log_sink refuses, where either would wait for the mutex it holds. */
DEVTAP_FUNC bool& inside_log_sink() noexcept {
  static thread_local bool inside = false;
  return inside;
}

DEVTAP_FUNC void append(std::string& out, const log_arg& arg) {
  char buf[64];
  std::to_chars_result r{buf, {}};
  switch (arg.what) {
    case log_arg::kind::text: out.append(arg.text); return;
    case log_arg::kind::character: out.push_back(arg.character); return;
    case log_arg::kind::boolean: out.append(arg.boolean ? "true" : "false"); return;
    case log_arg::kind::pointer: std::snprintf(buf, sizeof buf, "%p", arg.pointer); out.append(buf); return;
    case log_arg::kind::signed_int: r = std::to_chars(buf, buf + sizeof buf, arg.signed_int); break;
    case log_arg::kind::unsigned_int: r = std::to_chars(buf, buf + sizeof buf, arg.unsigned_int); break;
    case log_arg::kind::floating: r = std::to_chars(buf, buf + sizeof buf, arg.floating); break;
    case log_arg::kind::wide_int:
#if defined(__SIZEOF_INT128__)
      arg.wide_signed ? append_int128(out, static_cast<int128>(arg.wide)) : append_int128(out, arg.wide);
#endif
      return;
  }
  out.append(buf, r.ec == std::errc{} ? r.ptr : buf);
}

DEVTAP_FUNC std::string format_message(std::string_view pattern, std::span<const log_arg> args) {
  std::string out;
  out.reserve(pattern.size() + 16 * args.size());
  std::size_t next = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out.push_back(c);
      ++i;
    } else if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      if (next < args.size()) append(out, args[next++]);
      ++i;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

DEVTAP_FUNC std::string_view level_name(log_level level) noexcept {
  constexpr std::string_view names[] = {"debug", "info", "warn", "error", "off"};
  const auto index = static_cast<unsigned>(level);  // a cast from any int may reach here
  return index < std::size(names) ? names[index] : "?";
}

DEVTAP_FUNC void write_stderr(log_level level, std::string_view message) noexcept {
  ::flockfile(stderr);  // one line, whole (a message may hold NUL bytes: written, not formatted)
  std::fprintf(stderr, "[devtap %.*s] ", static_cast<int>(level_name(level).size()), level_name(level).data());
  std::fwrite(message.data(), 1, message.size(), stderr);
  std::fputc('\n', stderr);
  ::funlockfile(stderr);
}

DEVTAP_FUNC void write_log_line(log_level level, std::string_view message) {
  if (inside_log_sink()) return write_stderr(level, message);
  auto& state = logger();
  std::lock_guard lock(state.mutex);
  if (state.sink) {
    char why[256] = "unknown exception";  // copied: what() dies with the exception
    struct inside_guard {
      inside_guard() noexcept { inside_log_sink() = true; }
      ~inside_guard() { inside_log_sink() = false; }
    };
    const inside_guard inside;  // also while what it threw is destroyed (its destructor may log)
    try {
      state.sink(level, message);
      return;
    } catch (const std::exception& e) {
      std::snprintf(why, sizeof why, "%s", e.what());
    } catch (...) {
    }
    if (!state.sink_failure_noted) {
      state.sink_failure_noted = true;
      std::fprintf(stderr, "[devtap error] the log sink threw (%s); the lines it fails to take go to stderr\n", why);
    }
  }
  write_stderr(level, message);
}

DEVTAP_FUNC void log_erased(log_level level, std::string_view pattern, std::span<const log_arg> args) {
  auto& state = logger();
  // An unknown DEVTAP_LOG value is reported once, by the first call (any level), so that a sink set
  // before it receives the warning.
  if (state.env_problem_pending.load(std::memory_order_relaxed) &&
      state.env_problem_pending.exchange(false, std::memory_order_relaxed) && log_enabled(log_level::warn))
    write_log_line(log_level::warn, state.env_problem);
  if (!log_enabled(level)) return;
  write_log_line(level, format_message(pattern, args));
}

}  // namespace detail

DEVTAP_FUNC bool log_enabled(log_level level) noexcept {
  return static_cast<int>(level) >= detail::logger().threshold.load(std::memory_order_relaxed) &&
         static_cast<unsigned>(level) < static_cast<unsigned>(log_level::off);  // (off, or a cast from any int: never)
}

DEVTAP_FUNC void set_log_level(log_level level) noexcept {
  detail::logger().threshold.store(static_cast<int>(level), std::memory_order_relaxed);
}

DEVTAP_FUNC log_level get_log_level() noexcept {
  return static_cast<log_level>(detail::logger().threshold.load(std::memory_order_relaxed));
}

DEVTAP_FUNC void set_log_sink(std::function<void(log_level, std::string_view)> sink) {
  if (detail::inside_log_sink())
    throw std::logic_error("devtap: set_log_sink called from inside the log sink (it would wait for itself)");
  auto& state = detail::logger();
  std::function<void(log_level, std::string_view)> old;  // destroyed unlocked: what it owns may log
  std::lock_guard lock(state.mutex);
  old = std::exchange(state.sink, std::move(sink));
  state.sink_failure_noted = false;
}

DEVTAP_END_NAMESPACE
