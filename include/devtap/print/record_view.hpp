#pragma once
// Taking a print record apart on the host (host only, fmt-free): views into the payload, checked
// against its size, never trusted.
#include <devtap/config.hpp>
#include <devtap/print/descriptor.hpp>
#include <devtap/print/wire.hpp>

#if !defined(__CUDA_ARCH__)
#  include <cstddef>
#  include <cstdint>
#  include <cstring>
#  include <string_view>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A print record taken apart (views into the payload); `error` says why it could not be.
struct print_record_view {
  std::uint64_t id = 0;
  bool has_definition = false;
  std::string_view def_text;
  const std::byte* def_descs = nullptr;  // nargs little-endian u32, maybe unaligned
  std::size_t def_nargs = 0;
  const std::byte* args = nullptr;
  std::size_t arg_bytes = 0;
  const std::byte* spans = nullptr;  // span_count encoded spans
  std::size_t span_bytes = 0;
  std::size_t span_count = 0;
  const char* error = nullptr;
};

inline std::uint32_t print_load_u32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint64_t print_load_u64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Splits the bytes after the count word into head, definition, arguments and spans; never reads
//  outside [p, p + size).
inline print_record_view parse_print_record(const std::byte* p, std::size_t size) {
  print_record_view r;
  if (size < print_head_rest) {
    r.error = "shorter than a print record's head";
    return r;
  }
  r.id = print_load_u64(p);
  const std::uint32_t flags = print_load_u32(p + 8);
  const std::uint32_t def_bytes = print_load_u32(p + 12);
  const std::uint32_t arg_bytes = print_load_u32(p + 16);
  const std::uint32_t span_count = print_load_u32(p + 20);
  std::size_t pos = print_head_rest;
  if ((flags & ~print_has_definition) != 0 || ((flags & print_has_definition) != 0) != (def_bytes != 0)) {
    r.error = "unknown flags in a print record";
    return r;
  }
  if (def_bytes % 8 != 0 || arg_bytes % 8 != 0 || def_bytes > size - pos || arg_bytes > size - pos - def_bytes) {
    r.error = "print record sizes do not add up";
    return r;
  }
  if (def_bytes != 0) {
    if (def_bytes < 8) {
      r.error = "print definition too short";
      return r;
    }
    const std::uint32_t text_bytes = print_load_u32(p + pos);
    const std::uint32_t nargs = print_load_u32(p + pos + 4);
    if (nargs > print_max_args || text_bytes > def_bytes || print_def_bytes(text_bytes, nargs) != def_bytes) {
      r.error = "print definition sizes do not add up";
      return r;
    }
    r.has_definition = true;
    r.def_nargs = nargs;
    r.def_descs = p + pos + 8;
    r.def_text = std::string_view(reinterpret_cast<const char*>(p + pos + 8 + 4 * nargs), text_bytes);
    pos += def_bytes;
  }
  r.args = p + pos;
  r.arg_bytes = arg_bytes;
  pos += arg_bytes;
  r.spans = p + pos;
  r.span_bytes = size - pos;
  r.span_count = span_count;
  return r;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
#endif  // !__CUDA_ARCH__
