#pragma once
/** devtap's logger: one line per event on stderr, level chosen by `DEVTAP_LOG=debug|info|warn|error|off`
 * (case-insensitive; an unknown value means warn and is reported once, by the first log() call).
 *
 * It deliberately does not include {fmt}: the host half of a `.cu` file includes these headers, and
 * {fmt} 9 cannot be compiled by nvcc at C++20. It substitutes `{}` placeholders only. */
#include <devtap/config.hpp>
#include <devtap/detail/text.hpp>

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
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

DEVTAP_BEGIN_NAMESPACE

/** Severity of a log line. */
enum class log_level : int { debug = 0, info = 1, warn = 2, error = 3, off = 4 };

namespace detail {

/** The level `text` names (`warning` = warn, `none` = off), case-insensitive, surrounding white
 * space ignored; `false` for anything else. */
bool log_level_named(std::string_view text, log_level& out) noexcept;

/** The threshold a `DEVTAP_LOG` value means: unset, empty or unknown mean warn. */
log_level parse_log_level(const char* text) noexcept;

/** Whether this thread runs the log sink, holding the logger's lock: every thread that logs waits for it. */
bool& inside_log_sink() noexcept;

/** The warning an unknown `DEVTAP_LOG` value deserves; empty when the value is fine (or unset). */
std::string log_env_problem(const char* text);

struct logger_state {
  const char* env = std::getenv("DEVTAP_LOG");
  std::atomic<int> threshold{static_cast<int>(parse_log_level(env))};
  std::string env_problem = log_env_problem(env);  // reported by the first log() call, through the sink
  std::atomic<bool> env_problem_pending{!env_problem.empty()};
  std::mutex mutex;
  std::function<void(log_level, std::string_view)> sink;  // empty: stderr
  bool sink_failure_noted = false;                        // per sink; guarded by mutex
};

logger_state& logger();

/** One `{}` argument, type-erased so that formatting a line is one non-template function whatever
 * the argument types (a `log` call instantiates only the conversion of its arguments). */
struct log_arg {
  enum class kind : unsigned char { text, character, signed_int, unsigned_int, floating, boolean, pointer, wide_int } what;
  bool wide_signed = false;  // wide_int: `wide` holds an int128's bits
  union {
    std::string_view text;
    char character;
    long long signed_int;
    unsigned long long unsigned_int;
    double floating;
    bool boolean;
    const void* pointer;
#if defined(__SIZEOF_INT128__)
    detail::uint128 wide;
#endif
  };
  log_arg(std::string_view v) noexcept : what(kind::text), text(v) {}
  log_arg(const std::string& v) noexcept : log_arg(std::string_view(v)) {}
  log_arg(const char* v) noexcept : log_arg(std::string_view(v ? v : "(null)")) {}
  log_arg(char v) noexcept : what(kind::character), character(v) {}
  log_arg(bool v) noexcept : what(kind::boolean), boolean(v) {}
  log_arg(const void* v) noexcept : what(kind::pointer), pointer(v) {}
  template <class T>
    requires(std::is_integral_v<T> && std::is_signed_v<T> && !std::same_as<T, char> && !detail::is_int128_v<T>)
  log_arg(T v) noexcept : what(kind::signed_int), signed_int(v) {}
  template <class T>
    requires(std::is_integral_v<T> && std::is_unsigned_v<T> && !std::same_as<T, bool> && !detail::is_int128_v<T>)
  log_arg(T v) noexcept : what(kind::unsigned_int), unsigned_int(v) {}
#if defined(__SIZEOF_INT128__)
  template <class T>  // in full, whether or not the compiler's mode counts it as integral
    requires detail::is_int128_v<T>
  log_arg(T v) noexcept
      : what(kind::wide_int), wide_signed(std::is_same_v<T, detail::int128>), wide(static_cast<detail::uint128>(v)) {}
#endif
  template <class T>
    requires std::is_floating_point_v<T>
  log_arg(T v) noexcept : what(kind::floating), floating(static_cast<double>(v)) {}
  template <class T>
    requires std::is_enum_v<T>
  log_arg(T v) noexcept : log_arg(static_cast<std::underlying_type_t<T>>(v)) {}
};

void append(std::string& out, const log_arg& arg);

/** Replaces each `{}` in `pattern` by the next argument; `{{`/`}}` are literal braces. */
std::string format_message(std::string_view pattern, std::span<const log_arg> args);
template <class... Args>
std::string format_message(std::string_view pattern, const Args&... args) {
  const log_arg erased[sizeof...(Args) + 1] = {log_arg(args)..., log_arg(std::string_view())};
  return format_message(pattern, std::span<const log_arg>(erased, sizeof...(Args)));
}

std::string_view level_name(log_level level) noexcept;

void write_stderr(log_level level, std::string_view message) noexcept;

/** Hands `message` to the sink, or to stderr. A sink that throws never ends the program (the
 * receiver's reader threads log too, where an escaping exception is std::terminate): the line goes
 * to stderr instead, and the first failure of each sink is noted there. */
void write_log_line(log_level level, std::string_view message);

}  // namespace detail

/** True when lines of `level` are written. */
bool log_enabled(log_level level) noexcept;

/** Sets the threshold (overrides `DEVTAP_LOG`). */
void set_log_level(log_level level) noexcept;

/** Current threshold. */
log_level get_log_level() noexcept;

/** Routes log lines to `sink` instead of stderr (an empty function restores stderr). The sink is
 *  never called concurrently; a line it logs itself goes to stderr, and calling set_log_sink from
 *  inside it throws std::logic_error. */
void set_log_sink(std::function<void(log_level, std::string_view)> sink);

namespace detail {
/** `log` past its argument conversion: one function for every call site. */
void log_erased(log_level level, std::string_view pattern, std::span<const log_arg> args);
}  // namespace detail

/** Logs `pattern` with `{}` placeholders filled by `args`, if `level` is enabled. */
template <class... Args>
void log(log_level level, std::string_view pattern, const Args&... args) {
  const detail::log_arg erased[sizeof...(Args) + 1] = {detail::log_arg(args)..., detail::log_arg(std::string_view())};
  detail::log_erased(level, pattern, std::span<const detail::log_arg>(erased, sizeof...(Args)));
}

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/log_impl.hpp>
#endif
