#pragma once
// The wire format of a print record (fmt-free, device-safe); the host takes records apart in
// record_view.hpp and keeps the formats it learned in registry.hpp.
//
// A print is one tap, so one ring record: a line is never split or interleaved. Its payload has
// the codec's encoding of `std::span<const std::byte>` (u64 count, bytes, zero padding to 8), so
// the host attaches one consumer of that type for every format, and the receiver checks and
// decodes it as usual. The device builds the same bytes from a fixed-size struct (and, for span
// arguments, a tuple of it and the spans: the codec encodes each span as u64 count + elements).
//
//   offset  size
//   0       8     count: payload bytes after this word (the span's element count)
//   8       8     format id (format_id.hpp: hash of the text and the argument descriptors)
//   16      4     flags: print_has_definition
//   20      4     def_bytes: the definition block's size (0 without one)
//   24      4     arg_bytes: the packed fixed-size arguments' size (a multiple of 8)
//   28      4     span_count
//   32      def_bytes  definition: u32 text bytes, u32 nargs, u32 desc[nargs], text, zero pad to 8
//   ...     arg_bytes  fixed-size arguments in order, each at a multiple of its element size
//   ...     spans: per span argument, u64 element count, elements, zero pad to 8
//
// Host threads (cpu devices) never send a definition: the printing thread registers the format
// in the process-wide registry before its record is committed, so the reader always knows it.
// A CUDA device sends it with the first record of each format per device and printer.
#include <devtap/config.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/print/descriptor.hpp>

#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint32_t print_has_definition = 1;

// The fixed head of every print record.
struct print_head {
  std::uint64_t count;       // payload bytes after this word
  std::uint64_t id;          // format id
  std::uint32_t flags;       // print_has_definition
  std::uint32_t def_bytes;   // bytes of the definition block
  std::uint32_t arg_bytes;   // bytes of the fixed-size arguments
  std::uint32_t span_count;  // span arguments after them
};
static_assert(sizeof(print_head) == 32);
// Bytes of the head after the count word (what the host's view starts with).
inline constexpr std::size_t print_head_rest = sizeof(print_head) - 8;

// Bytes of a definition block for a text of `text_bytes` and `nargs` arguments.
DEVTAP_HOST_DEVICE constexpr std::size_t print_def_bytes(std::size_t text_bytes, std::size_t nargs) {
  return align8(8 + 4 * nargs + text_bytes);
}

// Where each fixed-size argument goes (offsets[a]; spans get their ordinal), and the totals.
struct print_layout {
  std::size_t arg_bytes = 0;
  std::size_t span_count = 0;
  bool ok = true;  // false: a descriptor is invalid
};

DEVTAP_HOST_DEVICE constexpr print_layout print_compute_layout(const std::uint32_t* descs, std::size_t nargs,
                                                               std::size_t* offsets) {
  print_layout l;
  std::size_t pos = 0;
  for (std::size_t a = 0; a < nargs; ++a) {
    const std::uint32_t d = descs[a];
    if (!print_desc_valid(d)) {
      l.ok = false;
      return l;
    }
    const std::size_t size = print_kind_size(desc_kind(d));
    if (desc_form(d) == print_form::span) {
      if (offsets != nullptr) offsets[a] = l.span_count;
      ++l.span_count;
      continue;
    }
    pos = align_up(pos, size);
    if (offsets != nullptr) offsets[a] = pos;
    pos += size * (desc_form(d) == print_form::array ? desc_extent(d) : 1);
  }
  l.arg_bytes = align8(pos);
  return l;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
