#pragma once
// A small JSON text writer for the Chrome trace files: strings and numbers (tap/json_value.hpp
// writes tapped values by their shape). No {fmt} and no JSON library: the trace writer appends to one std::string per
// event. Strings come out byte for byte as nlohmann-json's dump(error_handler_t::replace) writes
// them (tests/detail/json.cpp checks that), so a trace is always valid UTF-8 JSON whatever bytes
// a tap carried.
#include <devtap/config.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// How far the bytes at p (n >= 1 of them, p[0] >= 0x80) follow one well-formed UTF-8 sequence
// (Unicode table 3-7: no overlongs, surrogates or code points past U+10FFFF): len of the need
// bytes it takes. len < need means ill-formed, and len (>= 1) is then the maximal valid prefix,
// which nlohmann's decoder replaces by one U+FFFD before it decodes again at the byte after it.
struct utf8_match {
  std::size_t len, need;
};
constexpr utf8_match match_utf8(const unsigned char* p, std::size_t n) {
  const unsigned char b = p[0];
  unsigned char lo = 0x80, hi = 0xBF;  // the second byte's range
  std::size_t need = 0;                // 0: b never starts a sequence (80..C1, F5..FF)
  if (b >= 0xC2 && b <= 0xDF) {
    need = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 3;
    lo = b == 0xE0 ? 0xA0 : 0x80;  // E0 80..9F would be overlong
    hi = b == 0xED ? 0x9F : 0xBF;  // ED A0..BF would be a surrogate
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 4;
    lo = b == 0xF0 ? 0x90 : 0x80;  // F0 80..8F would be overlong
    hi = b == 0xF4 ? 0x8F : 0xBF;  // F4 90.. would pass U+10FFFF
  }
  if (need == 0 || n < 2 || p[1] < lo || p[1] > hi) return {1, need};
  std::size_t len = 2;
  while (len < need && len < n && (p[len] & 0xC0) == 0x80) ++len;
  return {len, need};
}

// Whether s is well-formed UTF-8 throughout (checked at compile time where replacing its bytes
// would merge two texts into one, as two field names into one JSON key).
constexpr bool valid_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    unsigned char seq[4] = {static_cast<unsigned char>(s[i])};
    if (seq[0] < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = std::min<std::size_t>(4, s.size() - i);
    for (std::size_t k = 1; k < n; ++k) seq[k] = static_cast<unsigned char>(s[i + k]);
    const utf8_match m = match_utf8(seq, n);
    if (m.need == 0 || m.len < m.need) return false;
    i += m.need;
  }
  return true;
}

// Appends s as a quoted JSON string; invalid UTF-8 becomes U+FFFD as nlohmann's replace does.
inline void append_json_string(std::string& out, std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const std::size_t n = s.size();
  out.push_back('"');
  std::size_t done = 0;  // s[0, done) is in out; the bytes since go out in one append
  std::size_t i = 0;
  while (i < n) {
    const unsigned char b = p[i];
    if (b >= 0x20 && b != '"' && b != '\\') {
      if (b < 0x80) {
        ++i;
        continue;
      }
      const utf8_match m = match_utf8(p + i, n - i);
      if (m.len == m.need) {
        i += m.len;
        continue;
      }
      out.append(s.data() + done, i - done);
      out += "\xEF\xBF\xBD";
      done = i += m.len;
      continue;
    }
    out.append(s.data() + done, i - done);
    switch (b) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {  // the other controls; lower-case hex, as nlohmann writes
        constexpr const char* hex = "0123456789abcdef";
        const char esc[] = {'\\', 'u', '0', '0', hex[b >> 4], hex[b & 15]};
        out.append(esc, sizeof esc);
      }
    }
    done = ++i;
  }
  out.append(s.data() + done, n - done);
  out.push_back('"');
}

// Shortest round-trip text of v; NaN and infinities as null (JSON has neither), as nlohmann does.
template <class T>
  requires std::is_arithmetic_v<T>
void append_json_number(std::string& out, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      out += "null";
      return;
    }
    char buf[64];
    char* const end = std::to_chars(buf, buf + sizeof buf, v).ptr;
    out.append(buf, end);
    // 1.0, not 1, as nlohmann writes: readers keep a float a float, and -0.0 its sign.
    if (std::find_if(buf, end, [](char c) { return c == '.' || c == 'e'; }) == end) out += ".0";
  } else {
    // Through (unsigned) long long: std::to_chars takes no char8_t, char16_t, char32_t, wchar_t.
    using wide = std::conditional_t<std::is_signed_v<T>, long long, unsigned long long>;
    char buf[24];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, static_cast<wide>(v)).ptr);
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
