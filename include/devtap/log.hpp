#pragma once
/** devtap's logger: one line per event on stderr, level chosen by `DEVTAP_LOG=debug|info|warn|error|off`
 * (case-insensitive; an unknown value means warn and is reported once, by the first log() call).
 *
 * It deliberately does not include {fmt}: the host half of a `.cu` file includes these headers, and
 * {fmt} 9 cannot be compiled by nvcc at C++20. It substitutes `{}` placeholders only. */
#include <devtap/config.hpp>

#include <atomic>
#include <charconv>
#include <chrono>
#include <concepts>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE

/** Severity of a log line. */
enum class log_level : int { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

namespace detail {

/** The level `text` names (`warning` = warn, `none` = off), case-insensitive, surrounding white
 * space ignored; `false` for anything else. */
inline bool log_level_named(std::string_view text, log_level& out) noexcept {
  constexpr std::string_view space = " \t\r\n\f\v";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string_view::npos) return false;
  text = text.substr(first, text.find_last_not_of(space) - first + 1);
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

/** The threshold a `DEVTAP_LOG` value means: unset, empty or unknown mean warn. */
inline log_level parse_log_level(const char* text) noexcept {
  log_level level = log_level::warn;
  if (text != nullptr && !log_level_named(text, level)) return log_level::warn;
  return level;
}

/** The warning an unknown `DEVTAP_LOG` value deserves; empty when the value is fine (or unset). */
inline std::string log_env_problem(const char* text) {
  log_level level{};
  if (text == nullptr || *text == '\0' || log_level_named(text, level)) return {};
  return std::string("DEVTAP_LOG='") + text +
         "' is not a log level (expected debug, info, warn, error or off); using warn";
}

struct logger_state {
  const char* env = std::getenv("DEVTAP_LOG");
  std::atomic<int> threshold{static_cast<int>(parse_log_level(env))};
  std::string env_problem = log_env_problem(env);  // reported by the first log() call, through the sink
  std::atomic<bool> env_problem_pending{!env_problem.empty()};
  std::mutex mutex;
  std::function<void(log_level, std::string_view)> sink;  // empty: stderr
  bool sink_failure_noted = false;                        // per sink; guarded by mutex
};

inline logger_state& logger() {
  static logger_state state;  // function-local: no static-init order problem
  return state;
}

inline void append(std::string& out, std::string_view v) { out.append(v); }
inline void append(std::string& out, const char* v) { out.append(v ? v : "(null)"); }
inline void append(std::string& out, const std::string& v) { out.append(v); }
inline void append(std::string& out, char v) { out.push_back(v); }
inline void append(std::string& out, bool v) { out.append(v ? "true" : "false"); }
template <class T>
  requires(std::is_arithmetic_v<T> && !std::same_as<T, bool> && !std::same_as<T, char>)
void append(std::string& out, T v) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc{} ? end : buf);
}
template <class T>
  requires std::is_enum_v<T>
void append(std::string& out, T v) { append(out, static_cast<std::underlying_type_t<T>>(v)); }
inline void append(std::string& out, const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  out.append(buf);
}

/** Replaces each `{}` in `pattern` by the next argument; `{{`/`}}` are literal braces. */
template <class... Args>
std::string format_message(std::string_view pattern, const Args&... args) {
  std::string out;
  out.reserve(pattern.size() + 16 * sizeof...(Args));
  std::function<void()> fills[] = {[&out, &args] { append(out, args); }..., [] {}};
  std::size_t next = 0;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
      out.push_back(c);
      ++i;
    } else if (c == '{' && i + 1 < pattern.size() && pattern[i + 1] == '}') {
      if (next < sizeof...(Args)) fills[next++]();
      ++i;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

inline std::string_view level_name(log_level level) noexcept {
  constexpr std::string_view names[] = {"debug", "info", "warn", "error", "off"};
  return names[static_cast<int>(level)];
}

inline void write_stderr(log_level level, std::string_view message) noexcept {
  std::fprintf(stderr, "[devtap %.*s] %.*s\n", static_cast<int>(level_name(level).size()),
               level_name(level).data(), static_cast<int>(message.size()), message.data());
}

/** Hands `message` to the sink, or to stderr. A sink that throws never ends the program (the
 * receiver's reader threads log too, where an escaping exception is std::terminate): the line goes
 * to stderr instead, and the first failure of each sink is noted there. */
inline void write_log_line(log_level level, std::string_view message) {
  auto& state = logger();
  std::lock_guard lock(state.mutex);
  if (state.sink) {
    char why[256] = "unknown exception";  // copied: what() dies with the exception
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

}  // namespace detail

/** True when lines of `level` are written. */
inline bool log_enabled(log_level level) noexcept {
  return static_cast<int>(level) >= detail::logger().threshold.load(std::memory_order_relaxed) &&
         level != log_level::off;
}

/** Sets the threshold (overrides `DEVTAP_LOG`). */
inline void set_log_level(log_level level) noexcept {
  detail::logger().threshold.store(static_cast<int>(level), std::memory_order_relaxed);
}

/** Current threshold. */
inline log_level get_log_level() noexcept {
  return static_cast<log_level>(detail::logger().threshold.load(std::memory_order_relaxed));
}

/** Routes log lines to `sink` instead of stderr (an empty function restores stderr). */
inline void set_log_sink(std::function<void(log_level, std::string_view)> sink) {
  auto& state = detail::logger();
  std::lock_guard lock(state.mutex);
  state.sink = std::move(sink);
  state.sink_failure_noted = false;
}

/** Logs `pattern` with `{}` placeholders filled by `args`, if `level` is enabled. */
template <class... Args>
void log(log_level level, std::string_view pattern, const Args&... args) {
  auto& state = detail::logger();
  // An unknown DEVTAP_LOG value is reported once, by the first call (any level), so that a sink set
  // before it receives the warning.
  if (state.env_problem_pending.load(std::memory_order_relaxed) &&
      state.env_problem_pending.exchange(false, std::memory_order_relaxed) && log_enabled(log_level::warn))
    detail::write_log_line(log_level::warn, state.env_problem);
  if (!log_enabled(level)) return;
  detail::write_log_line(level, detail::format_message(pattern, args...));
}

DEVTAP_END_NAMESPACE
