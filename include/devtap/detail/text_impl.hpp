#pragma once
// The definitions of the text helpers (declared in text.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/detail/text.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC bool parse_non_negative(const char* text, int& out) noexcept {
  if (text == nullptr) return false;
  const std::string_view v = trim(text);  // "DEVTAP_CPU_DEVICES= 4" means 4
  if (v.empty() || v.front() == '-') return false;  // from_chars takes a minus sign, and "-0" is 0
  int value = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc{} || end != v.data() + v.size() || value < 0) return false;
  out = value;
  return true;
}

DEVTAP_FUNC std::string describe_bytes(std::uint64_t n) {
  if (n >= (1u << 20) && n % (1u << 20) == 0) return std::to_string(n >> 20) + " MiB";
  if (n >= (1u << 10) && n % (1u << 10) == 0) return std::to_string(n >> 10) + " KiB";
  return std::to_string(n) + " bytes";
}

DEVTAP_FUNC std::string printable(std::string_view text, bool ascii_only, std::size_t max_bytes) {
  constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char c : text.substr(0, max_bytes)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f || (ascii_only && byte > 0x7f)) out += {'\\', 'x', hex[byte >> 4], hex[byte & 15]};
    else out += c;
  }
  if (text.size() > max_bytes) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace detail

DEVTAP_END_NAMESPACE
