#pragma once
/** devtap::print: fmt-style printing from device code, formatted on the host with {fmt}.
 *
 *   // host, once (a .cpp file: the formatter needs {fmt}, see <devtap/print_host.hpp>)
 *   devtap::receiver rx;
 *   devtap::print_channel prints = devtap::attach_print(rx, {.prefix = devtap::print_prefix::device});
 *
 *   // a cpu device's work
 *   dev->submit([=](devtap::cpu_context& ctx) {
 *     devtap::printer out(ctx, prints);
 *     devtap::print<"step {} loss {:.3f}">(out, step, loss);
 *   });
 *
 *   // a CUDA kernel (this header is fmt-free: a .cu file may include it)
 *   __global__ void k(devtap::printer out) { devtap::print<"thread {}">(out, threadIdx.x); }
 *   k<<<1, 32>>>(prints.on(rx.outfeed(gpu)));
 *
 * The format is a template argument, so it is known at compile time: the argument count and
 * each spec are checked against the argument types (static_assert), the format gets a 64-bit id,
 * and the device sends only that id and the argument values, never the text. The host learns each
 * format once (host threads register it before their first record; a CUDA device sends the text
 * with its first record of that format). Every print is one record: whole lines, in emission order
 * per device, never interleaved, and nothing lost under the receiver's `block` policy.
 *
 * Arguments: bool, char, integers (8 to 64 bits), float, double, enums (as their underlying
 * integer), pointers (printed as addresses; not char pointers: pass a std::string_view), fixed-size
 * arrays and std::array of those, std::span of those, std::string_view. Char arrays, char spans and
 * string views print as text; other arrays and spans as ranges ("[1, 2, 3]", "{::.2f}", "{:n}").
 * Spans in device code need nvcc's --expt-relaxed-constexpr (as every span tap does). See docs/print.md. */
#include <devtap/backend/cpu.hpp>
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/tap_point.hpp>
#include <devtap/print/check.hpp>
#include <devtap/print/wire.hpp>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

// Host-only API below is declared in nvcc's device pass too: it parses a .cu file's host code.
#include <devtap/receiver/receiver.hpp>

#include <stdexcept>

DEVTAP_BEGIN_NAMESPACE

// ---- handles --------------------------------------------------------------------------------

/** What device code needs, besides the outfeed, to print: trivially copyable (a kernel argument). */
struct print_point {
  tap_point<std::span<const std::byte>> point{};  ///< the printer's consumer on the receiver
  std::uint32_t token = 0;  ///< this printer instance: a CUDA device defines each format once per token
};

/** The `out` of devtap::print: a device's outfeed and a printer. Trivially copyable; valid while the
 *  receiver that made the outfeed is open. */
class printer {
public:
  printer() = default;
  DEVTAP_HOST_DEVICE printer(const outfeed& out, const print_point& point) : out_(out), point_(point) {}
  /** For work on a cpu device: that device's attached receiver. Throws outfeed_error without one. */
  printer(const cpu_context& ctx, const print_point& point);

  DEVTAP_HOST_DEVICE const outfeed& out() const { return out_; }
  DEVTAP_HOST_DEVICE const print_point& point() const { return point_; }

private:
  outfeed out_{};
  print_point point_{};
};

/** Prefixes of each printed line; combine with `|`. Times are the host's when it formats the line. */
enum class print_prefix : unsigned {
  none = 0,
  device = 1,      ///< "[cpu:0] "
  elapsed = 2,     ///< "[   1.234567] ": seconds since attach_print
  wall_clock = 4,  ///< "[13:37:42.123456] ": local time of day
};
constexpr print_prefix operator|(print_prefix a, print_prefix b) {
  return static_cast<print_prefix>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/** True when `set` includes `flag`. */
constexpr bool has_prefix(print_prefix set, print_prefix flag) {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0;
}

/** Where printed lines go: a FILE* (stdout by default), or a callable taking `std::string_view line`
 *  (without its '\n'), optionally followed by `const devtap::device&`. A callable is never called
 *  concurrently (devices take turns); a FILE gets each line in one fwrite. */
class print_sink {
public:
  using callback_type = std::function<void(std::string_view, const device&)>;

  print_sink() : file_(stdout) {}
  print_sink(std::FILE* file) : file_(file) {}  // NOLINT: implicit, so `.sink = stderr` reads well
  template <class F>
    requires(!std::is_convertible_v<F, std::FILE*> &&
             (std::is_invocable_v<F&, std::string_view, const device&> || std::is_invocable_v<F&, std::string_view>))
  print_sink(F fn) {  // NOLINT: implicit, so `.sink = [&](std::string_view line) {...}` reads well
    if constexpr (std::is_invocable_v<F&, std::string_view, const device&>)
      callback_ = std::move(fn);
    else
      callback_ = [f = std::move(fn)](std::string_view line, const device&) mutable { f(line); };
  }

  std::FILE* file() const noexcept { return file_; }
  const callback_type& callback() const noexcept { return callback_; }

private:
  std::FILE* file_ = nullptr;
  callback_type callback_;
};

/** How attach_print sets a printer up. */
struct print_options {
  print_sink sink{};                          ///< stdout unless told otherwise
  print_prefix prefix = print_prefix::none;   ///< what each line starts with
  bool flush_each_line = false;               ///< fflush a FILE sink after every line (also off a terminal)
  std::string name = "print";                 ///< the consumer's name in the receiver's errors
};

/** What a printer has done so far. */
struct print_stats {
  std::uint64_t lines = 0;            ///< prints written (one each, inner newlines or not), error lines included
  std::uint64_t format_errors = 0;    ///< prints {fmt} could not format (written as an error line)
  std::uint64_t unknown_formats = 0;  ///< prints whose format never became known (written as an error line)
  std::uint64_t malformed = 0;        ///< records that were not valid prints (written as an error line)
  std::uint64_t definitions = 0;      ///< format definitions received from CUDA devices
  std::uint64_t write_errors = 0;     ///< lines a FILE sink did not take
};

namespace detail {
/** One device's counters of a printer: written by that device's reader thread only. */
struct alignas(64) print_lane_counters {
  std::atomic<std::uint64_t> lines{0}, format_errors{0}, unknown_formats{0}, malformed{0}, definitions{0},
      write_errors{0};
};
/** A printer's counters, per device (no cache line shared between readers), summed on demand. */
struct print_counters {
  print_lane_counters& add_lane() {
    std::lock_guard lock(mutex);
    lanes.push_back(std::make_unique<print_lane_counters>());
    return *lanes.back();
  }
  print_stats sum() const {
    print_stats s;
    std::lock_guard lock(mutex);
    for (const auto& l : lanes) {
      s.lines += l->lines.load(std::memory_order_relaxed);
      s.format_errors += l->format_errors.load(std::memory_order_relaxed);
      s.unknown_formats += l->unknown_formats.load(std::memory_order_relaxed);
      s.malformed += l->malformed.load(std::memory_order_relaxed);
      s.definitions += l->definitions.load(std::memory_order_relaxed);
      s.write_errors += l->write_errors.load(std::memory_order_relaxed);
    }
    return s;
  }
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<print_lane_counters>> lanes;
};
}  // namespace detail

/** What attach_print returns: the print_point for device code, the printers for devices, the stats. */
class print_channel {
public:
  print_channel() = default;
  print_channel(print_point point, std::shared_ptr<detail::print_counters> counters)
      : point_(point), counters_(std::move(counters)) {}

  print_point point() const noexcept { return point_; }
  operator print_point() const noexcept { return point_; }  // NOLINT: pass a channel where a point goes

  /** A printer writing into `out` (a host thread's `rx.outfeed(dev)`, or a kernel argument). */
  printer on(const outfeed& out) const noexcept { return printer(out, point_); }
  /** A printer for work on a cpu device. */
  printer on(const cpu_context& ctx) const { return printer(ctx, point_); }

  /** Counters so far (safe at any time). */
  print_stats stats() const { return counters_ ? counters_->sum() : print_stats{}; }

private:
  print_point point_{};
  std::shared_ptr<detail::print_counters> counters_;
};

// ---- arguments --------------------------------------------------------------------------------

namespace detail {

/** Why a type cannot be a print argument (each has its static_assert). */
enum class print_arg_problem { none, char_pointer, long_double, wide_char, nested_array, empty_array, too_long, unsupported };

template <class T>
constexpr bool is_char_pointee_v = std::is_same_v<std::remove_cv_t<T>, char> || std::is_same_v<std::remove_cv_t<T>, signed char> ||
                                   std::is_same_v<std::remove_cv_t<T>, unsigned char>;

template <class T>
constexpr bool is_wide_char_v = std::is_same_v<T, wchar_t> || std::is_same_v<T, char8_t> || std::is_same_v<T, char16_t> ||
                                std::is_same_v<T, char32_t>;

template <class T>
DEVTAP_HOST_DEVICE constexpr print_kind print_scalar_kind() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_enum_v<U>) {
    return print_scalar_kind<std::underlying_type_t<U>>();
  } else if constexpr (std::is_same_v<U, bool>) {
    return print_kind::boolean;
  } else if constexpr (std::is_same_v<U, char>) {
    return print_kind::character;
  } else if constexpr (is_wide_char_v<U>) {
    return print_kind::invalid;
  } else if constexpr (std::is_integral_v<U>) {
    constexpr std::size_t s = sizeof(U);
    if constexpr (std::is_signed_v<U>)
      return s == 1 ? print_kind::i8 : s == 2 ? print_kind::i16 : s == 4 ? print_kind::i32 : s == 8 ? print_kind::i64 : print_kind::invalid;
    else
      return s == 1 ? print_kind::u8 : s == 2 ? print_kind::u16 : s == 4 ? print_kind::u32 : s == 8 ? print_kind::u64 : print_kind::invalid;
  } else if constexpr (std::is_same_v<U, float>) {
    return print_kind::f32;
  } else if constexpr (std::is_same_v<U, double>) {
    return print_kind::f64;
  } else if constexpr (std::is_null_pointer_v<U>) {
    return print_kind::pointer;
  } else if constexpr (std::is_pointer_v<U>) {
    if constexpr (is_char_pointee_v<std::remove_pointer_t<U>>) return print_kind::invalid;
    else return sizeof(U) == 8 ? print_kind::pointer : print_kind::invalid;
  } else {
    return print_kind::invalid;
  }
}

template <class T>
DEVTAP_HOST_DEVICE constexpr print_arg_problem print_scalar_problem() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>) {
    if constexpr (is_char_pointee_v<std::remove_pointer_t<U>>) return print_arg_problem::char_pointer;
  }
#if !defined(__CUDA_ARCH__)  // device code has no long double (nvcc warns when it is named there)
  if constexpr (std::is_same_v<U, long double>) return print_arg_problem::long_double;
#endif
  if constexpr (is_wide_char_v<U>) return print_arg_problem::wide_char;
  if constexpr (std::is_array_v<U>) return print_arg_problem::nested_array;
  return print_scalar_kind<U>() == print_kind::invalid ? print_arg_problem::unsupported : print_arg_problem::none;
}

/** How an argument type travels: its form, element type and extent. */
template <class T>
struct print_arg {
  using element = std::remove_cv_t<T>;
  static constexpr print_form form = print_form::scalar;
  static constexpr std::size_t extent = 0;
};
template <class E, std::size_t N>
struct print_arg<E[N]> {
  using element = std::remove_cv_t<E>;
  static constexpr print_form form = print_form::array;
  static constexpr std::size_t extent = N;
};
template <class E, std::size_t N>
struct print_arg<std::array<E, N>> {
  using element = std::remove_cv_t<E>;
  static constexpr print_form form = print_form::array;
  static constexpr std::size_t extent = N;
};
template <class E, std::size_t X>
struct print_arg<std::span<E, X>> {
  using element = std::remove_cv_t<E>;
  static constexpr print_form form = print_form::span;
  static constexpr std::size_t extent = 0;
};
template <>
struct print_arg<std::string_view> {
  using element = char;
  static constexpr print_form form = print_form::span;
  static constexpr std::size_t extent = 0;
};

template <class T>
DEVTAP_HOST_DEVICE constexpr print_arg_problem print_arg_problem_of() {
  using A = print_arg<std::remove_cv_t<T>>;
  constexpr print_arg_problem p = print_scalar_problem<typename A::element>();
  if constexpr (A::form == print_form::array) {
    if (A::extent == 0) return print_arg_problem::empty_array;
    if (A::extent > print_max_extent) return print_arg_problem::too_long;
  }
  return p;
}

/** The wire descriptor of an argument type (0 when it cannot be sent). */
template <class T>
DEVTAP_HOST_DEVICE constexpr std::uint32_t print_arg_desc() {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (print_arg_problem_of<T>() != print_arg_problem::none) {
    return 0;
  } else {
    return print_desc(print_scalar_kind<typename A::element>(), A::form, static_cast<std::uint32_t>(A::extent));
  }
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
/** The definition block (wire.hpp) as little-endian words, built at compile time. */
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

/** Everything known at compile time about one (format, argument types) pair. */
template <fixed_string F, class... Args>
struct print_signature {
  static constexpr std::size_t nargs = sizeof...(Args);
  static constexpr std::uint32_t descs[nargs == 0 ? 1 : nargs] = {print_arg_desc<Args>()...};
  static constexpr bool args_ok = ((print_arg_problem_of<Args>() == print_arg_problem::none) && ...);
  static constexpr print_check_result check =
      args_ok ? check_print_format(F.data(), F.size(), descs, nargs) : print_check_result{};
  static constexpr bool valid = args_ok && check.code == print_check::ok;
  static constexpr std::uint64_t id = print_format_id(F.data(), F.size(), descs, nargs);

  static constexpr print_layout_of<nargs> layout = print_make_layout<nargs>(descs);
  static constexpr std::size_t arg_bytes = layout.totals.arg_bytes;
  static constexpr std::size_t span_count = layout.totals.span_count;

  static constexpr std::size_t def_bytes = print_def_bytes(F.size(), nargs);
  static constexpr std::size_t def_words_count = def_bytes / 8;
  static constexpr print_def_words<def_words_count> def_words = print_make_def_words<def_words_count, F, nargs>(descs);
};

/** A print record without span arguments: head and body (definition, fixed-size arguments). Not
 *  an aggregate on purpose: the codec sends it as raw bytes without reflecting on it. */
template <std::size_t Body>
struct print_record {
  print_head head;
  std::byte body[Body];
  DEVTAP_HOST_DEVICE print_record() : head{}, body{} {}
};
template <>
struct print_record<0> {
  print_head head;
  DEVTAP_HOST_DEVICE print_record() : head{} {}
};

// One fixed-size argument into the block at its offset.
template <std::size_t Offset, class T>
DEVTAP_HOST_DEVICE inline void print_put(std::byte* block, const T& v) {
  using A = print_arg<std::remove_cv_t<T>>;
  using E = typename A::element;
  std::byte* at = block + Offset;
  if constexpr (A::form == print_form::span) {
    (void)at;
    (void)v;  // sent after the record
  } else if constexpr (A::form == print_form::array) {
    // a C array, or std::array (whose only member is one): the elements start at the object
    memcpy(static_cast<void*>(at), static_cast<const void*>(&v), sizeof(E) * A::extent);
  } else if constexpr (std::is_same_v<E, bool>) {
    *at = static_cast<std::byte>(v ? 1 : 0);
  } else if constexpr (std::is_null_pointer_v<E>) {
    copy_bytes(at, std::uint64_t{0});
  } else if constexpr (std::is_pointer_v<E>) {
    copy_bytes(at, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(v)));
  } else if constexpr (std::is_enum_v<E>) {
    copy_bytes(at, static_cast<std::underlying_type_t<E>>(v));
  } else {
    copy_bytes(at, v);
  }
}

template <class Sig, class... Args, std::size_t... I>
DEVTAP_HOST_DEVICE inline void print_put_all(std::byte* block, std::index_sequence<I...>, const Args&... args) {
  (print_put<std::integral_constant<std::size_t, Sig::layout.offsets[I]>::value>(block, args), ...);
}

// One word of the definition: a local constant, so device code never refers to the host's copy.
template <class Sig, std::size_t K>
DEVTAP_HOST_DEVICE inline void print_put_word(std::byte* body) {
  constexpr std::uint64_t word = Sig::def_words.w[K];
  copy_bytes(body + 8 * K, word);
}

template <class Sig, std::size_t... K>
DEVTAP_HOST_DEVICE inline void print_put_definition(std::byte* body, std::index_sequence<K...>) {
  (print_put_word<Sig, K>(body), ...);
}

// The value a print with span arguments taps: std::tuple<record, std::span<const E>...> (one span
// per span argument, in order), which the codec encodes as the record's bytes then each span.
template <class Tuple, class... Args>
struct print_with_spans {
  using type = Tuple;
};
template <class... Ts, class A, class... Rest>
struct print_with_spans<std::tuple<Ts...>, A, Rest...> {
  using arg = print_arg<std::remove_cv_t<A>>;
  using next = std::conditional_t<arg::form == print_form::span,
                                  std::tuple<Ts..., std::span<const typename arg::element>>, std::tuple<Ts...>>;
  using type = typename print_with_spans<next, Rest...>::type;
};

template <class Sig, std::size_t I, class Value, class T>
DEVTAP_HOST_DEVICE inline void print_put_span(Value& value, const T& v) {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (A::form == print_form::span) {
    constexpr std::size_t part = 1 + Sig::layout.offsets[I];
    std::get<part>(value) = std::span<const typename A::element>(v.data(), v.size());
  } else {
    (void)value;
    (void)v;
  }
}

template <class Sig, class Value, class... Args, std::size_t... I>
DEVTAP_HOST_DEVICE inline void print_put_spans(Value& value, std::index_sequence<I...>, const Args&... args) {
  (print_put_span<Sig, I>(value, args), ...);
}

template <class T>
DEVTAP_HOST_DEVICE inline std::size_t print_span_bytes(const T& v) {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (A::form == print_form::span) {
    return 8 + align8(v.size() * sizeof(typename A::element));
  } else {
    (void)v;
    return 0;
  }
}

/** Builds the record of one print and taps it. `Define`: carry the format's definition. */
template <class Sig, bool Define, class... Args>
DEVTAP_HOST_DEVICE inline void print_send(const printer& p, const Args&... args) {
  constexpr std::size_t def_bytes = Define ? Sig::def_bytes : 0;
  constexpr std::size_t body = def_bytes + Sig::arg_bytes;
  using record = print_record<body>;
  record rec;
  rec.head.id = Sig::id;
  rec.head.flags = Define ? print_has_definition : 0;
  rec.head.def_bytes = static_cast<std::uint32_t>(def_bytes);
  rec.head.arg_bytes = static_cast<std::uint32_t>(Sig::arg_bytes);
  rec.head.span_count = static_cast<std::uint32_t>(Sig::span_count);
  if constexpr (body != 0) {
    if constexpr (Define) print_put_definition<Sig>(rec.body, std::make_index_sequence<Sig::def_words_count>{});
    if constexpr (Sig::arg_bytes != 0)
      print_put_all<Sig>(rec.body + def_bytes, std::index_sequence_for<Args...>{}, args...);
  }
  const tap_point<std::span<const std::byte>>& point = p.point().point;
  if constexpr (Sig::span_count == 0) {
    rec.head.count = sizeof(record) - 8;
    p.out().tap(tap_point<record>{point.id, point.fingerprint}, rec);
  } else {
    rec.head.count = sizeof(record) - 8 + (print_span_bytes(args) + ... + 0);
    using value_type = typename print_with_spans<std::tuple<record>, Args...>::type;
    value_type value;
    std::get<0>(value) = rec;
    print_put_spans<Sig>(value, std::index_sequence_for<Args...>{}, args...);
    p.out().tap(tap_point<value_type>{point.id, point.fingerprint}, value);
  }
}

#if !defined(__CUDA_ARCH__)
/** Host threads: the format goes into the process-wide registry before the first record. */
template <class Sig, fixed_string F>
inline bool print_register() {
  global_print_registry().add(Sig::id, std::string_view(F.data(), F.size()), Sig::descs, Sig::nargs);
  return true;
}
#endif

#if defined(__CUDACC__)
/** Per device (each GPU has its own copy) and module: the token of the printer that last received
 *  this format's definition from the device. */
template <std::uint64_t Id>
__device__ unsigned int print_defined_token = 0;
#endif

}  // namespace detail

// ---- print ----------------------------------------------------------------------------------

/** Prints one line: `devtap::print<"step {} loss {:.3f}">(out, step, loss)`. From a cpu device's
 *  work, a host thread, or a CUDA kernel (any thread). Under the receiver's `block` policy it waits
 *  for room; on the host it throws outfeed_error where a tap would. */
template <fixed_string F, class... Args>
DEVTAP_HOST_DEVICE void print(const printer& out, const Args&... args) {
  using namespace detail;
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::char_pointer) && ...),
                "devtap::print: a char pointer cannot be sent (the host cannot read device memory): pass a "
                "std::string_view (its characters are sent), or cast to const void* to print the address");
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::long_double) && ...),
                "devtap::print: long double is not supported: cast to double");
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::wide_char) && ...),
                "devtap::print: wchar_t, char8_t, char16_t and char32_t are not supported: cast to an integer");
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::nested_array) && ...),
                "devtap::print: arrays of arrays are not supported: pass each row, or a flat std::span");
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::empty_array) && ...),
                "devtap::print: an empty array argument");
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::too_long) && ...),
                "devtap::print: a fixed-size array argument over 4M elements: pass a std::span");
  static_assert(((print_arg_problem_of<Args>() != print_arg_problem::unsupported) && ...),
                "devtap::print: unsupported argument type (supported: bool, char, integers up to 64 bits, float, "
                "double, enums, pointers, fixed-size arrays, std::array and std::span of those, std::string_view)");
  using sig = print_signature<F, std::remove_cv_t<Args>...>;
  constexpr print_check c = sig::check.code;
  static_assert(c != print_check::too_many_arguments, "devtap::print: too many arguments (at most 64)");
  static_assert(c != print_check::missing_argument,
                "devtap::print: the format has more replacement fields than arguments (or an index past the last one)");
  static_assert(c != print_check::unused_argument,
                "devtap::print: more arguments than the format uses (an argument no replacement field refers to)");
  static_assert(c != print_check::unmatched_close, "devtap::print: unmatched '}' in the format (write '}}' for a literal brace)");
  static_assert(c != print_check::unclosed_field,
                "devtap::print: '{' without its closing '}' in the format (write '{{' for a literal brace)");
  static_assert(c != print_check::named_argument, "devtap::print: named arguments are not supported (use {} or {0})");
  static_assert(c != print_check::mixed_indexing,
                "devtap::print: automatic ({}) and manual ({0}) argument indexing cannot be mixed");
  static_assert(c != print_check::bad_spec, "devtap::print: invalid format spec");
  static_assert(c != print_check::spec_type,
                "devtap::print: a presentation type that does not suit its argument (e.g. {:f} for an integer, {:x} "
                "for a floating-point value, {:d} for a string)");
  static_assert(c != print_check::spec_sign, "devtap::print: a sign (+, -, space) in a spec needs a signed number");
  static_assert(c != print_check::spec_alt, "devtap::print: '#' in a spec does not suit its argument");
  static_assert(c != print_check::spec_zero, "devtap::print: '0' padding in a spec does not suit its argument");
  static_assert(c != print_check::spec_precision,
                "devtap::print: a precision in a spec for an argument that takes none (only floating point and "
                "strings do)");
  static_assert(c != print_check::spec_locale, "devtap::print: 'L' in a spec does not suit its argument");
  static_assert(c != print_check::width_not_integer,
                "devtap::print: a dynamic width or precision ({}) must refer to an integer argument");

  if constexpr (sig::valid) {
#if defined(__CUDA_ARCH__)
  unsigned int* const defined = &print_defined_token<sig::id>;
  const unsigned int token = out.point().token;
  if (*static_cast<volatile unsigned int*>(defined) != token && atomicExch(defined, token) != token)
    print_send<sig, true>(out, args...);
  else
    print_send<sig, false>(out, args...);
#else
  static const bool registered = print_register<sig, F>();  // once per process, before the first record
  (void)registered;
  print_send<sig, false>(out, args...);
#endif
  }
}

// ---- host -------------------------------------------------------------------------------------

inline printer::printer(const cpu_context& ctx, const print_point& point)
    : out_(ctx.device().attached_outfeed("print")), point_(point) {}

namespace detail {
using print_attach_fn = print_channel (*)(receiver&, print_options);
/** Set by <devtap/print_host.hpp> (at static initialisation) in the program that includes it. */
inline std::atomic<print_attach_fn>& print_attach_hook() {
  static std::atomic<print_attach_fn> hook{nullptr};
  return hook;
}
}  // namespace detail

/** Attaches a printer to `rx`: one consumer that formats print records with {fmt} and writes whole
 *  lines to `options.sink`. Callable from any file, .cu ones too; the formatter itself is compiled
 *  where <devtap/print_host.hpp> is included (one .cpp file of the program). */
inline print_channel attach_print(receiver& rx, print_options options = {}) {
  const detail::print_attach_fn fn = detail::print_attach_hook().load(std::memory_order_acquire);
  if (fn == nullptr)
    throw std::logic_error(
        "devtap::attach_print: this program has no print formatter: include <devtap/print_host.hpp> in one .cpp "
        "file (it needs {fmt}, which .cu files cannot include)");
  return fn(rx, std::move(options));
}

DEVTAP_END_NAMESPACE
