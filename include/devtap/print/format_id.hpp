#pragma once
// A format's id (fmt-free, device-safe): what a record carries instead of the format's text.
#include <devtap/config.hpp>
#include <devtap/tap/fingerprint.hpp>

#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// FNV-1a 64 of the format's text and its argument descriptors: a format's id on every compiler.
DEVTAP_HOST_DEVICE constexpr std::uint64_t print_format_id(const char* s, std::size_t n, const std::uint32_t* descs,
                                                           std::size_t nargs) {
  fnv1a64 f;
  f.byte('p').byte(1);  // a version: changing the wire format changes every id
  for (std::size_t i = 0; i < n; ++i) f.byte(static_cast<unsigned char>(s[i]));
  f.byte(0);
  for (std::size_t a = 0; a < nargs; ++a)
    for (int b = 0; b < 4; ++b) f.byte(static_cast<unsigned char>(descs[a] >> (8 * b)));
  return f.h == 0 ? 1 : f.h;  // 0 is never an id
}

}  // namespace detail
DEVTAP_END_NAMESPACE
