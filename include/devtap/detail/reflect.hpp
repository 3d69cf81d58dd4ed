#pragma once
// Compile-time structure of the types taps carry: which are spans, tuples, arrays, and the
// fields of aggregates (PFR-style: no macros, no registration). Shared by the fingerprint and
// the codec, and evaluated identically by g++, clang and both nvcc passes.
//
// Field counting initialises T with one braced `{any}` per field, which counts a C-array member
// as one field (a bare `any` would brace-elide into its elements). A braced initialiser is
// ambiguous for a class with several converting constructors (std::complex, __half) on g++ and
// nvcc but not on clang, so such a position falls back to a bare `any` (copy-initialisation only
// considers conversion functions). Positions thus form runs, alternating braced/bare; allowing
// as many runs as positions keeps the count independent of which compiler found what ambiguous.
// Up to 32 fields; aggregates with more, or with base classes, are opaque (see reflectable_v).
// Not supported: anonymous unions and bit-fields in aggregates that hold spans.
#include <devtap/config.hpp>

#include <array>
#include <cstddef>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>


DEVTAP_BEGIN_NAMESPACE
namespace detail {

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

inline constexpr std::size_t max_reflected_fields = 32;
inline constexpr std::size_t max_init_runs = 34;  // enough for 33 alternating positions
// Field count meaning "could not be determined": the type is not reflected.
inline constexpr std::size_t unknown_field_count = static_cast<std::size_t>(-1);

// ---- what kind of composite a type is ----------------------------------------------------

template <class T>
struct is_std_span : std::false_type {};
template <class E, std::size_t X>
struct is_std_span<std::span<E, X>> : std::true_type {};

template <class T>
struct is_std_array : std::false_type {};
template <class E, std::size_t N>
struct is_std_array<std::array<E, N>> : std::true_type {};

template <class T>
struct is_tuple_like : std::false_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like<std::pair<A, B>> : std::true_type {};

template <class T>
struct tuple_types;
template <class... Ts>
struct tuple_types<std::tuple<Ts...>> {
  using type = type_list<Ts...>;
};
template <class A, class B>
struct tuple_types<std::pair<A, B>> {
  using type = type_list<A, B>;
};

// ---- field counting ------------------------------------------------------------------------

// Converts to anything; only ever named in unevaluated operands. Not constexpr on purpose: a
// constexpr declaration without definition warns when a constexpr constructor template it feeds
// gets instantiated.
template <std::size_t>
struct any_field {
  template <class U>
  operator U() const noexcept;
};

// Converts only to proper base classes of T: `T{any_base<T>{}}` is valid iff T has a base.
template <class T>
struct any_base {
  template <class U>
    requires(std::is_base_of_v<U, T> && !std::is_same_v<std::remove_cv_t<U>, T>)
  operator U() const noexcept;
};

template <class T>
constexpr bool has_base_v = requires { T{any_base<T>{}}; };

// `T{ {any}..., any..., {any}..., ... }`: runs alternate braced (even) / bare (odd).
template <class T, std::size_t... I0>
constexpr bool init_ok(std::index_sequence<I0...>) {
  return requires { T{{any_field<I0>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27, std::size_t... I28>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>, std::index_sequence<I28...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}..., {any_field<I28>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27, std::size_t... I28, std::size_t... I29>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>, std::index_sequence<I28...>, std::index_sequence<I29...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}..., {any_field<I28>{}}..., any_field<I29>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27, std::size_t... I28, std::size_t... I29, std::size_t... I30>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>, std::index_sequence<I28...>, std::index_sequence<I29...>, std::index_sequence<I30...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}..., {any_field<I28>{}}..., any_field<I29>{}..., {any_field<I30>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27, std::size_t... I28, std::size_t... I29, std::size_t... I30, std::size_t... I31>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>, std::index_sequence<I28...>, std::index_sequence<I29...>, std::index_sequence<I30...>, std::index_sequence<I31...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}..., {any_field<I28>{}}..., any_field<I29>{}..., {any_field<I30>{}}..., any_field<I31>{}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27, std::size_t... I28, std::size_t... I29, std::size_t... I30, std::size_t... I31, std::size_t... I32>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>, std::index_sequence<I28...>, std::index_sequence<I29...>, std::index_sequence<I30...>, std::index_sequence<I31...>, std::index_sequence<I32...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}..., {any_field<I28>{}}..., any_field<I29>{}..., {any_field<I30>{}}..., any_field<I31>{}..., {any_field<I32>{}}...}; };
}
template <class T, std::size_t... I0, std::size_t... I1, std::size_t... I2, std::size_t... I3, std::size_t... I4, std::size_t... I5, std::size_t... I6, std::size_t... I7, std::size_t... I8, std::size_t... I9, std::size_t... I10, std::size_t... I11, std::size_t... I12, std::size_t... I13, std::size_t... I14, std::size_t... I15, std::size_t... I16, std::size_t... I17, std::size_t... I18, std::size_t... I19, std::size_t... I20, std::size_t... I21, std::size_t... I22, std::size_t... I23, std::size_t... I24, std::size_t... I25, std::size_t... I26, std::size_t... I27, std::size_t... I28, std::size_t... I29, std::size_t... I30, std::size_t... I31, std::size_t... I32, std::size_t... I33>
constexpr bool init_ok(std::index_sequence<I0...>, std::index_sequence<I1...>, std::index_sequence<I2...>, std::index_sequence<I3...>, std::index_sequence<I4...>, std::index_sequence<I5...>, std::index_sequence<I6...>, std::index_sequence<I7...>, std::index_sequence<I8...>, std::index_sequence<I9...>, std::index_sequence<I10...>, std::index_sequence<I11...>, std::index_sequence<I12...>, std::index_sequence<I13...>, std::index_sequence<I14...>, std::index_sequence<I15...>, std::index_sequence<I16...>, std::index_sequence<I17...>, std::index_sequence<I18...>, std::index_sequence<I19...>, std::index_sequence<I20...>, std::index_sequence<I21...>, std::index_sequence<I22...>, std::index_sequence<I23...>, std::index_sequence<I24...>, std::index_sequence<I25...>, std::index_sequence<I26...>, std::index_sequence<I27...>, std::index_sequence<I28...>, std::index_sequence<I29...>, std::index_sequence<I30...>, std::index_sequence<I31...>, std::index_sequence<I32...>, std::index_sequence<I33...>) {
  return requires { T{{any_field<I0>{}}..., any_field<I1>{}..., {any_field<I2>{}}..., any_field<I3>{}..., {any_field<I4>{}}..., any_field<I5>{}..., {any_field<I6>{}}..., any_field<I7>{}..., {any_field<I8>{}}..., any_field<I9>{}..., {any_field<I10>{}}..., any_field<I11>{}..., {any_field<I12>{}}..., any_field<I13>{}..., {any_field<I14>{}}..., any_field<I15>{}..., {any_field<I16>{}}..., any_field<I17>{}..., {any_field<I18>{}}..., any_field<I19>{}..., {any_field<I20>{}}..., any_field<I21>{}..., {any_field<I22>{}}..., any_field<I23>{}..., {any_field<I24>{}}..., any_field<I25>{}..., {any_field<I26>{}}..., any_field<I27>{}..., {any_field<I28>{}}..., any_field<I29>{}..., {any_field<I30>{}}..., any_field<I31>{}..., {any_field<I32>{}}..., any_field<I33>{}...}; };
}
template <std::size_t... L>
struct init_runs {};

template <class T, std::size_t... L>
constexpr bool runs_ok(init_runs<L...>) {
  return init_ok<T>(std::make_index_sequence<L>{}...);
}

template <std::size_t... L>
constexpr std::size_t run_at(std::size_t i) {
  constexpr std::size_t l[] = {L...};
  return l[i];
}

template <class R, class I>
struct bump_last_impl;
template <std::size_t... L, std::size_t... I>
struct bump_last_impl<init_runs<L...>, std::index_sequence<I...>> {
  using type = init_runs<(run_at<L...>(I) + (I + 1 == sizeof...(L) ? 1 : 0))...>;
};

// One more position of kind `Bare` (false: braced): extend the last run if it has that kind,
// else open a new run; `void` when that would need more runs than init_ok supports.
template <class R, bool Bare>
struct extend_runs;
template <std::size_t... L, bool Bare>
struct extend_runs<init_runs<L...>, Bare> {
  static constexpr bool last_is_bare = sizeof...(L) % 2 == 0;
  using type = std::conditional_t<
      last_is_bare == Bare,
      typename bump_last_impl<init_runs<L...>, std::make_index_sequence<sizeof...(L)>>::type,
      std::conditional_t<(sizeof...(L) < max_init_runs), init_runs<L..., 1>, void>>;
};

template <class T, class R>
constexpr bool try_runs() {
  if constexpr (std::is_void_v<R>) {
    return false;
  } else {
    return runs_ok<T>(R{});
  }
}

template <class T, std::size_t... L>
constexpr std::size_t count_fields_from(init_runs<L...>) {
  constexpr std::size_t total = (std::size_t{0} + ... + L);
  using braced = typename extend_runs<init_runs<L...>, false>::type;
  using bare = typename extend_runs<init_runs<L...>, true>::type;
  if constexpr (total > max_reflected_fields) {
    return unknown_field_count;
  } else if constexpr (try_runs<T, braced>()) {
    return count_fields_from<T>(braced{});
  } else if constexpr (try_runs<T, bare>()) {
    return count_fields_from<T>(bare{});
  } else if constexpr (std::is_void_v<braced> || std::is_void_v<bare>) {
    return unknown_field_count;  // ran out of runs: cannot tell whether more fields follow
  } else {
    return total;
  }
}

template <class T>
constexpr std::size_t field_count() {
  if constexpr (!std::is_class_v<T> || !std::is_aggregate_v<T> || std::is_union_v<T> ||
                is_std_array<T>::value) {
    return unknown_field_count;
  } else if constexpr (has_base_v<T>) {
    return unknown_field_count;  // structured bindings reject members split across bases
  } else {
    return count_fields_from<T>(init_runs<0>{});
  }
}

/** Whether T's fields are reflected (an aggregate without bases, at most 32 fields). */
template <class T>
inline constexpr bool reflectable_v = field_count<std::remove_cv_t<T>>() != unknown_field_count;

template <class T>
inline constexpr std::size_t field_count_v = field_count<std::remove_cv_t<T>>();

// ---- field types and access via structured bindings ----------------------------------------

// Only named in decltype: the bindings' declared types (also for bit-fields).
template <std::size_t N, class T>
constexpr auto field_types_of(T& t) {
  if constexpr (N == 0) {
    (void)t;
    return type_list<>{};
  }
  else if constexpr (N == 1) {
    auto& [f0] = t;
    return type_list<decltype(f0)>{};
  }
  else if constexpr (N == 2) {
    auto& [f0, f1] = t;
    return type_list<decltype(f0), decltype(f1)>{};
  }
  else if constexpr (N == 3) {
    auto& [f0, f1, f2] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2)>{};
  }
  else if constexpr (N == 4) {
    auto& [f0, f1, f2, f3] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3)>{};
  }
  else if constexpr (N == 5) {
    auto& [f0, f1, f2, f3, f4] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4)>{};
  }
  else if constexpr (N == 6) {
    auto& [f0, f1, f2, f3, f4, f5] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5)>{};
  }
  else if constexpr (N == 7) {
    auto& [f0, f1, f2, f3, f4, f5, f6] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6)>{};
  }
  else if constexpr (N == 8) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7)>{};
  }
  else if constexpr (N == 9) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8)>{};
  }
  else if constexpr (N == 10) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9)>{};
  }
  else if constexpr (N == 11) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10)>{};
  }
  else if constexpr (N == 12) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11)>{};
  }
  else if constexpr (N == 13) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12)>{};
  }
  else if constexpr (N == 14) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13)>{};
  }
  else if constexpr (N == 15) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14)>{};
  }
  else if constexpr (N == 16) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15)>{};
  }
  else if constexpr (N == 17) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16)>{};
  }
  else if constexpr (N == 18) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17)>{};
  }
  else if constexpr (N == 19) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18)>{};
  }
  else if constexpr (N == 20) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19)>{};
  }
  else if constexpr (N == 21) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20)>{};
  }
  else if constexpr (N == 22) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21)>{};
  }
  else if constexpr (N == 23) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22)>{};
  }
  else if constexpr (N == 24) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23)>{};
  }
  else if constexpr (N == 25) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24)>{};
  }
  else if constexpr (N == 26) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25)>{};
  }
  else if constexpr (N == 27) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25), decltype(f26)>{};
  }
  else if constexpr (N == 28) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25), decltype(f26), decltype(f27)>{};
  }
  else if constexpr (N == 29) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25), decltype(f26), decltype(f27), decltype(f28)>{};
  }
  else if constexpr (N == 30) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25), decltype(f26), decltype(f27), decltype(f28), decltype(f29)>{};
  }
  else if constexpr (N == 31) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25), decltype(f26), decltype(f27), decltype(f28), decltype(f29), decltype(f30)>{};
  }
  else if constexpr (N == 32) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31] = t;
    return type_list<decltype(f0), decltype(f1), decltype(f2), decltype(f3), decltype(f4), decltype(f5), decltype(f6), decltype(f7), decltype(f8), decltype(f9), decltype(f10), decltype(f11), decltype(f12), decltype(f13), decltype(f14), decltype(f15), decltype(f16), decltype(f17), decltype(f18), decltype(f19), decltype(f20), decltype(f21), decltype(f22), decltype(f23), decltype(f24), decltype(f25), decltype(f26), decltype(f27), decltype(f28), decltype(f29), decltype(f30), decltype(f31)>{};
  }
}

/** The declared types of T's fields, in order (cv as declared). */
template <class T>
using field_types_t = decltype(field_types_of<field_count_v<T>>(std::declval<T&>()));

// Calls f(field0, field1, ...) with lvalues of all of t's fields (t may be const).
DEVTAP_NO_EXEC_CHECK
template <std::size_t N, class T, class F>
DEVTAP_HOST_DEVICE constexpr void with_fields_n(T& t, F&& f) {
  if constexpr (N == 0) {
    (void)t;
    f();
  }
  else if constexpr (N == 1) {
    auto& [f0] = t;
    f(f0);
  }
  else if constexpr (N == 2) {
    auto& [f0, f1] = t;
    f(f0, f1);
  }
  else if constexpr (N == 3) {
    auto& [f0, f1, f2] = t;
    f(f0, f1, f2);
  }
  else if constexpr (N == 4) {
    auto& [f0, f1, f2, f3] = t;
    f(f0, f1, f2, f3);
  }
  else if constexpr (N == 5) {
    auto& [f0, f1, f2, f3, f4] = t;
    f(f0, f1, f2, f3, f4);
  }
  else if constexpr (N == 6) {
    auto& [f0, f1, f2, f3, f4, f5] = t;
    f(f0, f1, f2, f3, f4, f5);
  }
  else if constexpr (N == 7) {
    auto& [f0, f1, f2, f3, f4, f5, f6] = t;
    f(f0, f1, f2, f3, f4, f5, f6);
  }
  else if constexpr (N == 8) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7);
  }
  else if constexpr (N == 9) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8);
  }
  else if constexpr (N == 10) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9);
  }
  else if constexpr (N == 11) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10);
  }
  else if constexpr (N == 12) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11);
  }
  else if constexpr (N == 13) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12);
  }
  else if constexpr (N == 14) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13);
  }
  else if constexpr (N == 15) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14);
  }
  else if constexpr (N == 16) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15);
  }
  else if constexpr (N == 17) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16);
  }
  else if constexpr (N == 18) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17);
  }
  else if constexpr (N == 19) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18);
  }
  else if constexpr (N == 20) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19);
  }
  else if constexpr (N == 21) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20);
  }
  else if constexpr (N == 22) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21);
  }
  else if constexpr (N == 23) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22);
  }
  else if constexpr (N == 24) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23);
  }
  else if constexpr (N == 25) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24);
  }
  else if constexpr (N == 26) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25);
  }
  else if constexpr (N == 27) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26);
  }
  else if constexpr (N == 28) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27);
  }
  else if constexpr (N == 29) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28);
  }
  else if constexpr (N == 30) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29);
  }
  else if constexpr (N == 31) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30);
  }
  else if constexpr (N == 32) {
    auto& [f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31] = t;
    f(f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15, f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31);
  }
}

DEVTAP_NO_EXEC_CHECK
template <class T, class F>
DEVTAP_HOST_DEVICE constexpr void with_fields(T& t, F&& f) {
  static_assert(reflectable_v<T>, "devtap: T's fields cannot be reflected");
  with_fields_n<field_count_v<T>>(t, static_cast<F&&>(f));
}

}  // namespace detail
DEVTAP_END_NAMESPACE
