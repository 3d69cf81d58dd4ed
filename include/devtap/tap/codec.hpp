#pragma once
/**
 * The value codec of taps: the device encodes a value into a ring record's payload, the host
 * decodes it in place for a consumer.
 *
 * Encoding (the payload starts 8-byte aligned):
 *  - a trivially copyable type without spans: its raw bytes, `sizeof(T)` of them (the hot path);
 *  - `std::span<const U>`: at the next multiple of 8, the element count as u64, then the
 *    elements, then zero padding up to a multiple of 8;
 *  - tuples, pairs, arrays and aggregates holding spans (and tuples/pairs, which are not
 *    trivially copyable): their parts in order, each span-free part at the next multiple of
 *    min(alignof, 8) as raw bytes, spans as above; gaps are zeroed.
 * Decoding rebuilds the value with spans viewing the payload (no copy).
 *
 * The producer half (encoded_size, encode) runs in CUDA kernels: nothing host-only, no {fmt}.
 * Spans and tuples in device code call std:: constexpr members: nvcc needs
 * `--expt-relaxed-constexpr` there; the raw path needs nothing.
 */
#include <devtap/config.hpp>
#include <devtap/detail/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// Whether Match<U>::value holds for T or for anything inside it: a span's element type, any
// part (cv-qualifiers ignored).
template <template <class> class Match, class... Ts>
constexpr bool any_reaches(type_list<Ts...>);

template <template <class> class Match, class T>
constexpr bool reaches() {
  using U = std::remove_cv_t<T>;
  if constexpr (Match<U>::value) {
    return true;
  } else if constexpr (shape_of<U> == shape::span) {
    return reaches<Match, typename U::element_type>();
  } else if constexpr (has_parts(shape_of<U>)) {
    return any_reaches<Match>(part_types_t<U>{});
  } else {
    return false;
  }
}

template <template <class> class Match, class... Ts>
constexpr bool any_reaches(type_list<Ts...>) {
  return (false || ... || reaches<Match, Ts>());
}

// bool, or an enum over bool: either holds a byte that must be 0 or 1. (One template parameter:
// clang takes no defaulted second one where `template <class> class Match` is expected.)
template <class U>
constexpr bool bool_or_bool_enum() {
  if constexpr (std::is_enum_v<U>) return std::is_same_v<std::underlying_type_t<U>, bool>;
  else return std::is_same_v<U, bool>;
}
template <class U>
struct is_bool : std::bool_constant<bool_or_bool_enum<U>()> {};

// Whether T holds a bool anywhere: bytes from outside (a recording, a device's ring) must then be
// checked before they are read as a T, since a bool byte other than 0 or 1 is undefined behaviour.
template <class T>
inline constexpr bool has_bools_v = reaches<is_bool, T>();

}  // namespace detail

/** Whether T holds a `std::span` anywhere in its structure (then it is not sent as raw bytes). */
template <class T>
inline constexpr bool has_spans_v = detail::reaches<detail::is_std_span, T>();

namespace detail {

// A type sent as its raw bytes: trivially copyable and nothing inside points elsewhere.
template <class T>
inline constexpr bool is_raw_v =
    std::is_trivially_copyable_v<std::remove_cv_t<T>> && !has_spans_v<T>;

// Checked when a span type is asked about, so misuse reads as a sentence, not a failed concept.
template <class U>
constexpr bool span_element_ok() {
  static_assert(std::is_trivially_copyable_v<U> && !has_spans_v<U>,
                "devtap: std::span<const U> taps need a trivially copyable U without spans");
  static_assert(alignof(U) <= 8,
                "devtap: std::span<const U> taps need alignof(U) <= 8 (elements are viewed in "
                "place in the 8-byte aligned payload)");
  return true;
}

template <class... Ts>
constexpr bool all_tappable(type_list<Ts...>);

template <class T>
constexpr bool tappable_impl() {
  if constexpr (std::is_reference_v<T> || std::is_volatile_v<T>) {
    return false;
  } else {
    using U = std::remove_cv_t<T>;
    if constexpr (shape_of<U> == shape::span) {
      // Only read-only, dynamic-extent spans: a std::span<U> would be sent as a bare pointer.
      using E = typename U::element_type;
      if constexpr (std::is_const_v<E> && U::extent == std::dynamic_extent) {
        return span_element_ok<std::remove_const_t<E>>();
      } else {
        return false;
      }
    } else if constexpr (has_parts(shape_of<U>)) {
      return all_tappable(part_types_t<U>{});
    } else {
      return std::is_trivially_copyable_v<U>;
    }
  }
}

template <class... Ts>
constexpr bool all_tappable(type_list<Ts...>) {
  return (true && ... && tappable_impl<Ts>());
}

}  // namespace detail

/**
 * Types a tap can carry: trivially copyable types, `std::span<const U>` (U trivially copyable,
 * alignof(U) <= 8), and tuples, pairs, arrays and aggregates of those, recursively.
 */
template <class T>
concept tappable = detail::tappable_impl<T>();

namespace detail {

DEVTAP_HOST_DEVICE constexpr std::size_t align_up(std::size_t n, std::size_t a) {
  return (n + (a - 1)) & ~(a - 1);
}

template <class T>
inline constexpr std::size_t part_align = alignof(T) < 8 ? alignof(T) : 8;

template <class T>
DEVTAP_HOST_DEVICE inline void copy_bytes(std::byte* dst, const T& v) {
  memcpy(dst, static_cast<const void*>(&v), sizeof(T));
}

DEVTAP_HOST_DEVICE inline void zero_bytes(std::byte* dst, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = std::byte{0};
}

template <class F>
struct each_field {
  F& f;
  DEVTAP_NO_EXEC_CHECK
  template <class... P>
  DEVTAP_HOST_DEVICE constexpr void operator()(P&... parts) const {
    (f(parts), ...);
  }
};

DEVTAP_NO_EXEC_CHECK
template <class T, class F, std::size_t... I>
DEVTAP_HOST_DEVICE constexpr void for_each_tuple_part(T& v, F& f, std::index_sequence<I...>) {
  (f(std::get<I>(v)), ...);
}

// Calls f(part) for each part of a value whose shape has parts, in order.
DEVTAP_NO_EXEC_CHECK
template <class T, class F>
DEVTAP_HOST_DEVICE constexpr void for_each_part(T& v, F& f) {
  constexpr shape s = shape_of<T>;
  static_assert(has_parts(s), "devtap: only arrays, tuples and aggregates have parts");
  if constexpr (s == shape::array) {
    for (auto& e : v) f(e);
  } else if constexpr (s == shape::tuple) {
    for_each_tuple_part(v, f, std::make_index_sequence<std::tuple_size_v<std::remove_cv_t<T>>>{});
  } else {
    with_fields(v, each_field<F>{f});
  }
}

// ---- size ----------------------------------------------------------------------------------

template <class T>
DEVTAP_HOST_DEVICE constexpr std::size_t size_at(const T& v, std::size_t pos);

struct size_visitor {
  std::size_t pos;
  template <class P>
  DEVTAP_HOST_DEVICE constexpr void operator()(const P& part) {
    pos = size_at(part, pos);
  }
};

// Offset just past `v` when encoded at offset `pos`.
template <class T>
DEVTAP_HOST_DEVICE constexpr std::size_t size_at(const T& v, std::size_t pos) {
  using U = std::remove_cv_t<T>;
  if constexpr (is_raw_v<U>) {
    (void)v;
    return align_up(pos, part_align<U>) + sizeof(U);
  } else if constexpr (shape_of<U> == shape::span) {
    return align_up(pos, 8) + 8 + align_up(v.size() * sizeof(typename U::element_type), 8);
  } else {
    size_visitor s{pos};
    for_each_part(v, s);
    return s.pos;
  }
}

/** Payload bytes `encode` writes for `v`: sizeof(T) for span-free trivially copyable T. */
template <class T>
DEVTAP_HOST_DEVICE constexpr std::size_t encoded_size(const T& v) {
  static_assert(tappable<T>, "devtap: this type cannot be tapped (see devtap::tappable)");
  if constexpr (is_raw_v<T>) {
    (void)v;
    return sizeof(T);
  } else {
    return size_at(v, 0);
  }
}

// ---- encode --------------------------------------------------------------------------------

template <class T>
DEVTAP_HOST_DEVICE std::size_t encode_at(const T& v, std::byte* base, std::size_t pos);

struct encode_visitor {
  std::byte* base;
  std::size_t pos;
  template <class P>
  DEVTAP_HOST_DEVICE void operator()(const P& part) {
    pos = encode_at(part, base, pos);
  }
};

template <class T>
DEVTAP_HOST_DEVICE std::size_t encode_at(const T& v, std::byte* base, std::size_t pos) {
  using U = std::remove_cv_t<T>;
  if constexpr (is_raw_v<U>) {
    const std::size_t at = align_up(pos, part_align<U>);
    zero_bytes(base + pos, at - pos);
    copy_bytes(base + at, v);
    return at + sizeof(U);
  } else if constexpr (shape_of<U> == shape::span) {
    const std::size_t at = align_up(pos, 8);
    zero_bytes(base + pos, at - pos);
    const std::uint64_t n = v.size();
    copy_bytes(base + at, n);
    const std::size_t bytes = v.size() * sizeof(typename U::element_type);
    if (bytes != 0) memcpy(base + at + 8, static_cast<const void*>(v.data()), bytes);
    zero_bytes(base + at + 8 + bytes, align_up(bytes, 8) - bytes);
    return at + 8 + align_up(bytes, 8);
  } else {
    encode_visitor e{base, pos};
    for_each_part(v, e);
    return e.pos;
  }
}

/** Writes exactly `encoded_size(v)` bytes at `dst` (8-byte aligned). Device-safe. */
template <class T>
DEVTAP_HOST_DEVICE inline void encode(const T& v, std::byte* dst) {
  static_assert(tappable<T>, "devtap: this type cannot be tapped (see devtap::tappable)");
  if constexpr (is_raw_v<T>) {
    // The hot path: one fixed-size copy. Telling the compiler dst is 8-aligned lets nvcc use
    // 8-byte stores instead of byte stores.
    copy_bytes(static_cast<std::byte*>(__builtin_assume_aligned(dst, 8)), v);
  } else {
    encode_at(v, dst, 0);
  }
}

// ---- decode (host only) --------------------------------------------------------------------

template <class T>
bool decode_at(const std::byte* src, std::size_t size, std::size_t& pos, T& out);

struct decode_visitor {
  const std::byte* src;
  std::size_t size;
  std::size_t pos;
  bool ok = true;
  template <class P>
  void operator()(P& part) {
    if (ok) ok = decode_at(src, size, pos, part);
  }
};

// Decodes the part at `pos` into `out` and advances `pos`; false when it would pass `size`.
// Invariant: pos <= size, so `size - x` below never wraps.
template <class T>
bool decode_at(const std::byte* src, std::size_t size, std::size_t& pos, T& out) {
  static_assert(!std::is_const_v<T>,
                "devtap: decoding a value with spans assigns its parts: they must not be const");
  if constexpr (std::is_const_v<T>) {
    return false;  // (the assertion above is the one error)
  } else if constexpr (is_raw_v<T>) {
    const std::size_t at = align_up(pos, part_align<T>);
    if (at > size || size - at < sizeof(T)) return false;
    std::memcpy(static_cast<void*>(std::addressof(out)), src + at, sizeof(T));
    pos = at + sizeof(T);
    return true;
  } else if constexpr (shape_of<T> == shape::span) {
    using E = typename T::element_type;
    const std::size_t at = align_up(pos, 8);
    if (at > size || size - at < 8) return false;
    std::uint64_t n = 0;
    std::memcpy(&n, src + at, 8);
    const std::size_t room = size - at - 8;
    if (n > room / sizeof(E)) return false;
    const std::size_t bytes = align_up(static_cast<std::size_t>(n) * sizeof(E), 8);
    if (bytes > room) return false;
    // src is 8-aligned and `at + 8` a multiple of 8, so the elements are aligned (alignof <= 8).
    out = T(reinterpret_cast<const std::remove_const_t<E>*>(src + at + 8),
            static_cast<std::size_t>(n));
    pos = at + 8 + bytes;
    return true;
  } else {
    decode_visitor d{src, size, pos};
    for_each_part(out, d);
    pos = d.pos;
    return d.ok;
  }
}

// Whether every bool in `v` (in its parts and its spans' elements, at any depth) holds 0 or 1.
// Reads them as unsigned char, which is defined whatever the byte; true at once without bools.
// Opaque classes are not looked into: their bools cannot be found.
template <class T>
bool bools_valid(const T& v) {
  using U = std::remove_cv_t<T>;
  if constexpr (!has_bools_v<U>) {
    (void)v;
    return true;
  } else if constexpr (is_bool<U>::value) {
    static_assert(sizeof(U) == 1, "devtap: bools are checked as one byte");
    return *reinterpret_cast<const unsigned char*>(std::addressof(v)) <= 1;
  } else if constexpr (shape_of<U> == shape::span) {
    for (const auto& e : v)
      if (!bools_valid(e)) return false;
    return true;
  } else {
    bool ok = true;
    auto check = [&ok](const auto& part) { ok = ok && bools_valid(part); };
    for_each_part(v, check);
    return ok;
  }
}

/**
 * Decodes `size` payload bytes at `src` (8-byte aligned) into `out`; spans in `out` view the
 * payload. False, with `out` unspecified, when `size` does not match the encoding or a bool in
 * it is neither 0 nor 1 (bytes from a damaged recording); never reads outside [src, src + size).
 * Host only.
 */
template <class T>
bool decode(const std::byte* src, std::size_t size, T& out) {
  static_assert(tappable<T>, "devtap: this type cannot be tapped (see devtap::tappable)");
  if constexpr (is_raw_v<T>) {
    if (size != sizeof(T)) return false;
    std::memcpy(static_cast<void*>(std::addressof(out)), src, sizeof(T));
    return bools_valid(out);
  } else {
    std::size_t pos = 0;
    return decode_at(src, size, pos, out) && pos == size && bools_valid(out);
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
