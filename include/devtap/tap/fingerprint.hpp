#pragma once
/**
 * Structural type fingerprints: a 64-bit hash of a type's shape (scalar kinds and sizes,
 * alignment, field layout), checked by the receiver against what a consumer expects. Built only
 * from constexpr type traits, so g++, clang and nvcc (host and device pass) agree; a compiler's
 * pretty name or typeid never enters it.
 *
 * Limitation: only aggregates are seen field by field (public fields, no user-declared
 * constructor, no base class, at most 32 fields; see detail::reflectable_v). Every other class
 * or union is *opaque* and fingerprinted by its size and alignment alone: `class A { int64_t v; }`
 * and `class B { double v; }` match, so a record of B that reaches a consumer of A is handed over
 * as A's bytes, not counted as a type mismatch. An opaque type never matches an aggregate, a
 * tuple or an array (its own tag), nor an opaque type of another size or alignment. Names never
 * enter a fingerprint, so same-layout aggregates match too; nor do a field's offset or a
 * bit-field's width, which no constant expression can see (only the type's size and alignment
 * catch an alignas). docs/guide.md, section 3, says so.
 */
#include <devtap/config.hpp>
#include <devtap/detail/shape.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// FNV-1a 64 over a small token stream. Every node hashes a version byte, a tag, its numbers
// (little-endian u64) and its children's fingerprints: changing the scheme means bumping the
// version, so stale peers mismatch instead of misreading.
inline constexpr unsigned char fingerprint_version = 1;

struct fnv1a64 {
  std::uint64_t h = 0xcbf29ce484222325ull;

  DEVTAP_HOST_DEVICE constexpr fnv1a64& byte(unsigned char c) {
    h ^= c;
    h *= 0x100000001b3ull;
    return *this;
  }
  DEVTAP_HOST_DEVICE constexpr fnv1a64& u64(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>(v >> (8 * i)));
    return *this;
  }
};

DEVTAP_HOST_DEVICE constexpr fnv1a64 fp_node(char tag) {
  fnv1a64 f;
  f.byte(fingerprint_version).byte(static_cast<unsigned char>(tag));
  return f;
}

template <class T>
DEVTAP_HOST_DEVICE constexpr std::uint64_t fingerprint_of();

template <class... Ts>
DEVTAP_HOST_DEVICE constexpr void fp_children(fnv1a64& f, type_list<Ts...>) {
  (f.u64(fingerprint_of<Ts>()), ...);
}

template <class T>
constexpr bool is_char_kind_v =
    std::is_same_v<T, char> || std::is_same_v<T, wchar_t> || std::is_same_v<T, char8_t> ||
    std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t>;

// A scalar: its kind and size.
template <class U>
DEVTAP_HOST_DEVICE constexpr std::uint64_t fingerprint_scalar() {
  if constexpr (std::is_reference_v<U>) {
    return fp_node('r').h;  // never tappable; hashed only so that asking does not fail
  } else if constexpr (std::is_enum_v<U>) {
    return fingerprint_of<std::underlying_type_t<U>>();
  } else if constexpr (std::is_same_v<U, bool>) {
    return fp_node('b').u64(sizeof(U)).h;
  } else if constexpr (is_char_kind_v<U>) {
    return fp_node('c').u64(sizeof(U)).h;
  } else if constexpr (std::is_integral_v<U>) {
    return fp_node(std::is_signed_v<U> ? 'i' : 'u').u64(sizeof(U)).h;
#if defined(__SIZEOF_INT128__)
    // Strict -std=c++20 does not count __int128 as integral; keep its sign anyway.
  } else if constexpr (std::is_same_v<U, int128>) {
    return fp_node('i').u64(sizeof(U)).h;
  } else if constexpr (std::is_same_v<U, uint128>) {
    return fp_node('u').u64(sizeof(U)).h;
#endif
  } else if constexpr (std::is_floating_point_v<U>) {
    return fp_node('f').u64(sizeof(U)).h;
  } else if constexpr (std::is_null_pointer_v<U>) {
    return fp_node('n').u64(sizeof(U)).h;
  } else if constexpr (std::is_pointer_v<U>) {
    // The pointee is left out: its address means nothing to the host, and it may be recursive.
    return fp_node('p').u64(sizeof(U)).h;
  } else if constexpr (std::is_member_pointer_v<U>) {
    return fp_node('m').u64(sizeof(U)).h;
  } else {
    // Other scalars the traits do not classify (_Float16, __bf16 in strict mode).
    return fp_node('x').u64(sizeof(U)).u64(alignof(U)).h;
  }
}

template <class T>
DEVTAP_HOST_DEVICE constexpr std::uint64_t fingerprint_of() {
  using U = std::remove_cv_t<T>;
  constexpr shape s = shape_of<U>;
  if constexpr (s == shape::scalar) {
    return fingerprint_scalar<U>();
  } else if constexpr (s == shape::array) {
    // int[3] and std::array<int, 3> are the same bytes, so the same fingerprint.
    auto f = fp_node('a').u64(array_of<U>::size);
    return f.u64(fingerprint_of<typename array_of<U>::element>()).h;
  } else if constexpr (s == shape::span) {
    // What a span sends is its elements, not the span object (pointer + size).
    using E = typename U::element_type;
    auto f = fp_node('s').u64(static_cast<std::uint64_t>(U::extent)).byte(std::is_const_v<E>);
    return f.u64(fingerprint_of<E>()).h;
  } else if constexpr (s == shape::tuple) {
    using elems = part_types_t<U>;
    auto f = fp_node('t').u64(elems::size);
    fp_children(f, elems{});
    return f.h;
  } else if constexpr (s == shape::aggregate) {
    // Size and alignment too: they catch alignas and padding the field list does not show.
    using fields = part_types_t<U>;
    auto f = fp_node('S').u64(sizeof(U)).u64(alignof(U)).u64(fields::size);
    fp_children(f, fields{});
    return f.h;
  } else {
    // Opaque classes (private members, user-declared constructors, bases, > 32 fields, unions):
    // only their size and alignment (see the limitation at the top of this file).
    return fp_node('O').u64(sizeof(U)).u64(alignof(U)).h;
  }
}

}  // namespace detail

/** Structural fingerprint of T (cv-qualifiers ignored); identical across g++, clang and nvcc. */
template <class T>
inline constexpr std::uint64_t type_fingerprint_v = detail::fingerprint_of<T>();

/** Structural fingerprint of T, as a function (usable in device code). */
template <class T>
DEVTAP_HOST_DEVICE constexpr std::uint64_t type_fingerprint() {
  return type_fingerprint_v<T>;
}

DEVTAP_END_NAMESPACE
