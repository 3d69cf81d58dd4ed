#pragma once
// Argument descriptors (fmt-free, device-safe): what every print record is decoded with, and what
// the format checker checks a format against.
#include <devtap/config.hpp>

#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// The scalar kinds a print argument can have (the wire tag; never renumber).
enum class print_kind : std::uint8_t {
  invalid = 0,
  boolean = 1,
  character = 2,
  i8 = 3, i16 = 4, i32 = 5, i64 = 6,
  u8 = 7, u16 = 8, u32 = 9, u64 = 10,
  f32 = 11, f64 = 12,
  pointer = 13,
};
inline constexpr std::uint8_t print_kind_count = 14;

// How an argument is sent: one value, a fixed-size array (in the record), or a span (after it).
enum class print_form : std::uint8_t { scalar = 0, array = 1, span = 2 };

// Largest fixed-size array argument (elements); larger data goes in a std::span.
inline constexpr std::uint32_t print_max_extent = 1u << 22;
// Most arguments one print takes.
inline constexpr std::size_t print_max_args = 64;
// Largest dynamic width or precision a line is built with: a larger one (an uninitialised variable,
// say) makes an error line instead of a line of up to 2 GiB on the reader's thread.
inline constexpr std::uint64_t print_max_width = std::uint64_t{1} << 20;

// An argument descriptor: kind | form << 8 | extent << 10 (extent: arrays only). The 22-bit field
// holds an array's extent modulo 1 << 22: no array is empty, so 0 stands for print_max_extent, and
// every smaller extent keeps the encoding (and the format ids) it always had.
DEVTAP_HOST_DEVICE constexpr std::uint32_t print_desc(print_kind k, print_form f, std::uint32_t extent = 0) {
  return static_cast<std::uint32_t>(k) | (static_cast<std::uint32_t>(f) << 8) | ((extent & (print_max_extent - 1)) << 10);
}
DEVTAP_HOST_DEVICE constexpr print_kind desc_kind(std::uint32_t d) { return static_cast<print_kind>(d & 0xffu); }
DEVTAP_HOST_DEVICE constexpr print_form desc_form(std::uint32_t d) { return static_cast<print_form>((d >> 8) & 3u); }
DEVTAP_HOST_DEVICE constexpr std::uint32_t desc_extent(std::uint32_t d) {
  return desc_form(d) == print_form::array && (d >> 10) == 0 ? print_max_extent : d >> 10;
}

// Bytes (and alignment) of one element of a kind.
DEVTAP_HOST_DEVICE constexpr std::uint32_t print_kind_size(print_kind k) {
  switch (k) {
    case print_kind::boolean: case print_kind::character: case print_kind::i8: case print_kind::u8: return 1;
    case print_kind::i16: case print_kind::u16: return 2;
    case print_kind::i32: case print_kind::u32: case print_kind::f32: return 4;
    case print_kind::i64: case print_kind::u64: case print_kind::f64: case print_kind::pointer: return 8;
    default: return 0;
  }
}

// A descriptor a well-formed record can carry.
DEVTAP_HOST_DEVICE constexpr bool print_desc_valid(std::uint32_t d) {
  const auto k = static_cast<std::uint32_t>(desc_kind(d));
  if (k == 0 || k >= print_kind_count) return false;
  switch (desc_form(d)) {
    case print_form::scalar: case print_form::span: return desc_extent(d) == 0;
    case print_form::array: return true;  // every field value is an extent of 1 to print_max_extent
  }
  return false;
}

// Text arguments: char arrays, char spans and std::string_view print as strings, not as ranges.
DEVTAP_HOST_DEVICE constexpr bool desc_is_string(std::uint32_t d) {
  return desc_kind(d) == print_kind::character && desc_form(d) != print_form::scalar;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
