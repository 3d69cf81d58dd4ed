#pragma once
/** devtap's logger: one line per event on stderr, level chosen by `DEVTAP_LOG=debug|info|warn|error|off`.
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
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE

/** Severity of a log line. */
enum class log_level : int { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

namespace detail {

inline log_level parse_log_level(const char* text) noexcept {
  if (text == nullptr) return log_level::warn;
  const std::string_view v(text);
  if (v == "debug") return log_level::debug;
  if (v == "info") return log_level::info;
  if (v == "warn" || v == "warning") return log_level::warn;
  if (v == "error") return log_level::error;
  if (v == "off" || v == "none") return log_level::off;
  return log_level::warn;
}

struct logger_state {
  std::atomic<int> threshold{static_cast<int>(parse_log_level(std::getenv("DEVTAP_LOG")))};
  std::mutex mutex;
  std::function<void(log_level, std::string_view)> sink;  // empty: stderr
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

inline void write_log_line(log_level level, std::string_view message) {
  auto& state = logger();
  std::lock_guard lock(state.mutex);
  if (state.sink) {
    state.sink(level, message);
    return;
  }
  std::fprintf(stderr, "[devtap %.*s] %.*s\n", static_cast<int>(level_name(level).size()),
               level_name(level).data(), static_cast<int>(message.size()), message.data());
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
}

/** Logs `pattern` with `{}` placeholders filled by `args`, if `level` is enabled. */
template <class... Args>
void log(log_level level, std::string_view pattern, const Args&... args) {
  if (!log_enabled(level)) return;
  detail::write_log_line(level, detail::format_message(pattern, args...));
}

DEVTAP_END_NAMESPACE
