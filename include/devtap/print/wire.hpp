#pragma once
/** The wire format of a print record (fmt-free; the layout part is device-safe).
 *
 * A print is one tap, so one ring record: a line is never split or interleaved. Its payload has
 * the codec's encoding of `std::span<const std::byte>` (u64 count, bytes, zero padding to 8), so
 * the host attaches one consumer of that type for every format, and the receiver checks and
 * decodes it as usual. The device builds the same bytes from a fixed-size struct (and, for span
 * arguments, a tuple of it and the spans: the codec encodes each span as u64 count + elements).
 *
 *   offset  size
 *   0       8     count: payload bytes after this word (the span's element count)
 *   8       8     format id (check.hpp: hash of the text and the argument descriptors)
 *   16      4     flags: print_has_definition
 *   20      4     def_bytes: the definition block's size (0 without one)
 *   24      4     arg_bytes: the packed fixed-size arguments' size (a multiple of 8)
 *   28      4     span_count
 *   32      def_bytes  definition: u32 text bytes, u32 nargs, u32 desc[nargs], text, zero pad to 8
 *   ...     arg_bytes  fixed-size arguments in order, each at a multiple of its element size
 *   ...     spans: per span argument, u64 element count, elements, zero pad to 8
 *
 * Host threads (cpu devices) never send a definition: the printing thread registers the format
 * in the process-wide registry before its record is committed, so the reader always knows it.
 * A CUDA device sends it with the first record of each format per device and printer. */
#include <devtap/config.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/print/check.hpp>

#include <cstddef>
#include <cstdint>

#if !defined(__CUDA_ARCH__)
#  include <devtap/log.hpp>

#  include <algorithm>
#  include <cstring>
#  include <memory>
#  include <mutex>
#  include <string>
#  include <string_view>
#  include <unordered_map>
#  include <vector>
#endif

DEVTAP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::uint32_t print_has_definition = 1;

/** The fixed head of every print record. */
struct print_head {
  std::uint64_t count;       ///< payload bytes after this word
  std::uint64_t id;          ///< format id
  std::uint32_t flags;       ///< print_has_definition
  std::uint32_t def_bytes;   ///< bytes of the definition block
  std::uint32_t arg_bytes;   ///< bytes of the fixed-size arguments
  std::uint32_t span_count;  ///< span arguments after them
};
static_assert(sizeof(print_head) == 32);
/** Bytes of the head after the count word (what the host's view starts with). */
inline constexpr std::size_t print_head_rest = sizeof(print_head) - 8;


/** Bytes of a definition block for a text of `text_bytes` and `nargs` arguments. */
DEVTAP_HOST_DEVICE constexpr std::size_t print_def_bytes(std::size_t text_bytes, std::size_t nargs) {
  return align8(8 + 4 * nargs + text_bytes);
}

/** Where each fixed-size argument goes (offsets[a]; spans get their ordinal), and the totals. */
struct print_layout {
  std::size_t arg_bytes = 0;
  std::size_t span_count = 0;
  bool ok = true;  ///< false: a descriptor is invalid
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

#if !defined(__CUDA_ARCH__)

/** A format the host knows: its text and argument descriptors, and where each argument is. */
struct print_format_def {
  std::uint64_t id = 0;
  std::string text;
  std::vector<std::uint32_t> descs;
  std::vector<std::size_t> offsets;  // fixed-size arguments: offset in the block; spans: ordinal
  std::size_t arg_bytes = 0;
  std::size_t span_count = 0;
  print_check_result check{};  // the checker's verdict (device definitions are checked here)
};

/** Builds a definition; nullptr-equivalent (empty unique_ptr) when the descriptors are invalid. */
inline std::unique_ptr<print_format_def> make_print_format_def(std::uint64_t id, std::string_view text,
                                                               const std::uint32_t* descs, std::size_t nargs) {
  auto def = std::make_unique<print_format_def>();
  def->id = id;
  def->text.assign(text);
  def->descs.assign(descs, descs + nargs);
  def->offsets.assign(nargs, 0);
  const print_layout l = print_compute_layout(descs, nargs, def->offsets.data());
  if (!l.ok) return {};
  def->arg_bytes = l.arg_bytes;
  def->span_count = l.span_count;
  def->check = check_print_format(def->text.data(), def->text.size(), descs, nargs);
  return def;
}

/** Every format this process has learned, by id (entries are never removed: pointers stay valid). */
class print_registry {
public:
  /** Adds a definition (a second one with the same id is ignored; a different one is logged). */
  const print_format_def* add(std::uint64_t id, std::string_view text, const std::uint32_t* descs, std::size_t nargs) {
    std::lock_guard lock(mutex_);
    if (auto it = formats_.find(id); it != formats_.end()) {
      const print_format_def& known = *it->second;
      if (known.text != text || known.descs.size() != nargs ||
          !std::equal(known.descs.begin(), known.descs.end(), descs))
        log(log_level::error, "devtap::print: two formats share the id {} (\"{}\" and \"{}\"); keeping the first",
            id, known.text, std::string(text));
      return &known;
    }
    auto def = make_print_format_def(id, text, descs, nargs);
    if (!def) return nullptr;
    const print_format_def* p = def.get();
    formats_.emplace(id, std::move(def));
    return p;
  }

  const print_format_def* find(std::uint64_t id) const {
    std::lock_guard lock(mutex_);
    auto it = formats_.find(id);
    return it == formats_.end() ? nullptr : it->second.get();
  }

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<print_format_def>> formats_;
};

/** The process-wide registry (function-local: no static-initialisation order to worry about). */
inline print_registry& global_print_registry() {
  static print_registry registry;
  return registry;
}

/** A print record taken apart (views into the payload); `error` says why it could not be. */
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

/** Splits the bytes after the count word into head, definition, arguments and spans; never reads
 *  outside [p, p + size). */
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

#endif  // !__CUDA_ARCH__

}  // namespace detail
DEVTAP_END_NAMESPACE
