#pragma once
// Small text helpers for error messages and environment values, shared by every layer.
#include <devtap/config.hpp>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

#if defined(__SIZEOF_INT128__)
// 128-bit integers: strict -std=c++20 does not count them as integral or arithmetic, so the
// classifier (shape.hpp), the JSON writer and the logger name them here.
__extension__ typedef __int128 int128;  // __extension__: no -Wpedantic noise
__extension__ typedef unsigned __int128 uint128;
template <class U>
inline constexpr bool is_int128_v = std::is_same_v<U, int128> || std::is_same_v<U, uint128>;

/** A 128-bit integer in full, in decimal (std::to_chars takes none). */
template <class U>
  requires is_int128_v<U>
void append_int128(std::string& out, U v) {
  const bool negative = std::is_same_v<U, int128> && v < 0;
  uint128 magnitude = negative ? uint128{0} - static_cast<uint128>(v) : static_cast<uint128>(v);
  char digits[40];  // 2^128 has 39
  char* first = digits + sizeof digits;
  do {
    *--first = static_cast<char>('0' + static_cast<int>(magnitude % 10));
    magnitude /= 10;
  } while (magnitude != 0);
  if (negative) out.push_back('-');
  out.append(first, digits + sizeof digits);
}
#else
template <class U>
inline constexpr bool is_int128_v = false;
#endif

/** `items` projected to strings and joined with `sep`. */
template <class Range, class Proj>
std::string join(const Range& items, Proj proj, std::string_view sep = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out.append(sep);
    out.append(proj(item));
  }
  return out;
}

/** `s` without surrounding white space, line ends included (a value written by a Windows tool). */
constexpr std::string_view trim(std::string_view s) noexcept {
  constexpr std::string_view space = " \t\r\n\f\v";
  const std::size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

/** A whole non-negative decimal int between optional white space, or false (null, blank, sign,
 *  junk, overflow). */
bool parse_non_negative(const char* text, int& out) noexcept;

/** "4 MiB", "3 KiB", "100 bytes": a byte count as a reader would write it. */
std::string describe_bytes(std::uint64_t n);

/** `text` as a message quotes it: control bytes (and, `ascii_only`, bytes above 0x7f, as in a
 *  variable whose values are ASCII) as \xNN, so a bad value is seen and sends the terminal nothing;
 *  past `max_bytes` of it, cut and its length given. */
std::string printable(std::string_view text, bool ascii_only = false, std::size_t max_bytes = 200);

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/detail/text_impl.hpp>
#endif
