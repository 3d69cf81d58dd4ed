#pragma once
// Small text helpers for error messages and environment values, shared by every layer.
#include <devtap/config.hpp>

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

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

/** `s` without surrounding blanks. */
inline std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

/** A whole non-negative decimal int, or false (null, empty, sign, junk, overflow). */
bool parse_non_negative(const char* text, int& out) noexcept;

/** "4 MiB", "3 KiB", "100 bytes": a byte count as a reader would write it. */
std::string describe_bytes(std::uint64_t n);

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/detail/text_impl.hpp>
#endif
