#pragma once
// Everything known at compile time about one print (fmt-free, device-safe): the argument
// descriptors, the verdict of the checks, the id, the layout and the definition block.
#include <devtap/config.hpp>
#include <devtap/print/arg_traits.hpp>
#include <devtap/print/check.hpp>
#include <devtap/print/descriptor.hpp>
#include <devtap/print/fixed_string.hpp>
#include <devtap/print/format_id.hpp>
#include <devtap/print/rejection.hpp>
#include <devtap/print/wire.hpp>

#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// The first argument type (in order) that cannot be sent, else too_long when the fixed-size
// arguments take too much of the stack together, or ok.
template <class... Args>
DEVTAP_HOST_DEVICE constexpr print_check print_args_check() {
  print_check c = print_check::ok;
  ((c = c == print_check::ok ? print_arg_check<Args>() : c), ...);
  if (c == print_check::ok && (print_fixed_bytes<Args>() + ... + 0) > print_max_fixed_bytes) return print_check::too_long;
  return c;
}

template <std::size_t N>
struct print_layout_of {
  std::size_t offsets[N == 0 ? 1 : N]{};
  print_layout totals{};
};
template <std::size_t N>
constexpr print_layout_of<N> print_make_layout(const std::uint32_t* descs) {
  print_layout_of<N> l{};
  l.totals = print_compute_layout(descs, N, l.offsets);
  return l;
}

template <std::size_t W>
struct print_def_words {
  std::uint64_t w[W]{};
};
// The definition block (wire.hpp) as little-endian words, built at compile time.
template <std::size_t W, fixed_string F, std::size_t N>
constexpr print_def_words<W> print_make_def_words(const std::uint32_t* descs) {
  print_def_words<W> d{};
  unsigned char bytes[W * 8]{};
  auto put32 = [&bytes](std::size_t at, std::uint32_t v) {
    for (std::size_t b = 0; b < 4; ++b) bytes[at + b] = static_cast<unsigned char>(v >> (8 * b));
  };
  put32(0, static_cast<std::uint32_t>(F.size()));
  put32(4, static_cast<std::uint32_t>(N));
  for (std::size_t a = 0; a < N; ++a) put32(8 + 4 * a, descs[a]);
  for (std::size_t i = 0; i < F.size(); ++i) bytes[8 + 4 * N + i] = static_cast<unsigned char>(F.chars[i]);
  for (std::size_t k = 0; k < W; ++k)
    for (std::size_t b = 0; b < 8; ++b) d.w[k] |= static_cast<std::uint64_t>(bytes[8 * k + b]) << (8 * b);
  return d;
}

// Everything known at compile time about one (format, argument types) pair.
template <fixed_string F, class... Args>
struct print_signature {
  static constexpr std::size_t nargs = sizeof...(Args);
  static constexpr std::uint32_t descs[nargs == 0 ? 1 : nargs] = {print_arg_desc<Args>()...};
  // The one verdict on this print: a format array without its terminator (or padded with NULs:
  // `char f[12] = "step {}"`), else the first argument type that cannot be sent, else the format's.
  static constexpr print_check_result check =
      F.chars[F.size()] != '\0' || (F.size() != 0 && F.chars[F.size() - 1] == '\0')
          ? print_check_result{print_check::unterminated_format}
      : print_args_check<Args...>() != print_check::ok ? print_check_result{print_args_check<Args...>()}
#if defined(__CUDA_ARCH__)  // a kernel's record carries the format's text too (its definition)
      : (print_fixed_bytes<Args>() + ... + print_def_bytes(F.size(), nargs)) > print_max_fixed_bytes
          ? print_check_result{print_check::too_long}
#endif
                                                       : check_print_format(F.data(), F.size(), descs, nargs);
  static constexpr bool valid = check.code == print_check::ok;
  static constexpr std::uint64_t id = print_format_id(F.data(), F.size(), descs, nargs);
  // A second hash of the text, unlike the id's (another multiplier, each step mixed): two formats
  // whose ids collide still differ here (print.hpp's definition token).
  static constexpr std::uint64_t text_key = [] {
    std::uint64_t h = 0x9e3779b97f4a7c15u;
    for (std::size_t i = 0; i < F.size(); ++i) {
      h = (h ^ static_cast<unsigned char>(F.chars[i])) * 0xff51afd7ed558ccdu;
      h ^= h >> 31;
    }
    return h;
  }();

  static constexpr print_layout_of<nargs> layout = print_make_layout<nargs>(descs);
  static constexpr std::size_t arg_bytes = layout.totals.arg_bytes;
  static constexpr std::size_t span_count = layout.totals.span_count;

  static constexpr std::size_t def_bytes = print_def_bytes(F.size(), nargs);
  static constexpr std::size_t def_words_count = def_bytes / 8;
  static constexpr print_def_words<def_words_count> def_words = print_make_def_words<def_words_count, F, nargs>(descs);
};

}  // namespace detail
DEVTAP_END_NAMESPACE
