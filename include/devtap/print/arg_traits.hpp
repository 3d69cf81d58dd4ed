#pragma once
// How each argument type travels (fmt-free, device-safe): its kind, form and extent, its wire
// descriptor, or why it cannot be sent (a print_check, reported by devtap::print).
#include <devtap/config.hpp>
#include <devtap/print/descriptor.hpp>
#include <devtap/print/rejection.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

template <class T>
constexpr bool is_char_pointee_v = std::is_same_v<std::remove_cv_t<T>, char> || std::is_same_v<std::remove_cv_t<T>, signed char> ||
                                   std::is_same_v<std::remove_cv_t<T>, unsigned char>;

template <class T>
constexpr bool is_wide_char_v = std::is_same_v<T, wchar_t> || std::is_same_v<T, char8_t> || std::is_same_v<T, char16_t> ||
                                std::is_same_v<T, char32_t>;

// The integer kind of `Bytes` bytes and that signedness.
template <std::size_t Bytes, bool Signed>
DEVTAP_HOST_DEVICE constexpr print_kind print_integer_kind() {
  if constexpr (Signed)
    return Bytes == 1 ? print_kind::i8 : Bytes == 2 ? print_kind::i16 : Bytes == 4 ? print_kind::i32 : Bytes == 8 ? print_kind::i64 : print_kind::invalid;
  else
    return Bytes == 1 ? print_kind::u8 : Bytes == 2 ? print_kind::u16 : Bytes == 4 ? print_kind::u32 : Bytes == 8 ? print_kind::u64 : print_kind::invalid;
}

template <class T>
DEVTAP_HOST_DEVICE constexpr print_kind print_scalar_kind() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_enum_v<U>) {
    // A number whatever the underlying type, char and bool included (docs/print.md, Arguments): a
    // bool-based enum holds 0 or 1, sent as one unsigned byte.
    using I = std::underlying_type_t<U>;
    return print_integer_kind<sizeof(I), std::is_signed_v<I>>();
  } else if constexpr (std::is_same_v<U, bool>) {
    return print_kind::boolean;
  } else if constexpr (std::is_same_v<U, char>) {
    return print_kind::character;
  } else if constexpr (is_wide_char_v<U>) {
    return print_kind::invalid;
  } else if constexpr (std::is_integral_v<U>) {
    return print_integer_kind<sizeof(U), std::is_signed_v<U>>();
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
DEVTAP_HOST_DEVICE constexpr print_check print_scalar_check() {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_pointer_v<U>) {
    if constexpr (is_char_pointee_v<std::remove_pointer_t<U>>) return print_check::char_pointer;
  }
#if !defined(__CUDA_ARCH__)  // device code has no long double (nvcc warns when it is named there)
  if constexpr (std::is_same_v<U, long double>) return print_check::long_double;
#endif
  if constexpr (is_wide_char_v<U>) return print_check::wide_char;
  if constexpr (std::is_array_v<U>) return print_check::nested_array;
  if constexpr (std::is_function_v<U>) return print_check::function_argument;  // a function's name, not &f
  return print_scalar_kind<U>() == print_kind::invalid ? print_check::unsupported_type : print_check::ok;
}

// How an argument type travels: its form, element type and extent.
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

// Arrays and spans are sent as their elements' bytes, which cannot be read through volatile (a
// volatile scalar is read once, as a plain value).
template <class T>
constexpr bool print_volatile_elements_v = std::is_volatile_v<std::remove_all_extents_t<T>>;
template <class E, std::size_t N>
constexpr bool print_volatile_elements_v<std::array<E, N>> = std::is_volatile_v<E>;
template <class E, std::size_t X>
constexpr bool print_volatile_elements_v<std::span<E, X>> = std::is_volatile_v<E>;

// The most the fixed-size arguments of one print may take: its record is built on the printing
// thread's stack, once more when it has span arguments. In device code far less: a kernel's stack
// frame is reserved for every thread that can be resident (a print of 64 KiB made a 196 KB frame,
// 53 GB of local memory on an H100). nvcc's device pass compiles print (host and device) for host
// code's calls too: in a .cu file, this limit holds for every print.
#if defined(__CUDA_ARCH__)
inline constexpr std::size_t print_max_fixed_bytes = std::size_t{1} << 11;
#else
inline constexpr std::size_t print_max_fixed_bytes = std::size_t{1} << 16;
#endif

// The bytes an argument takes in the record (spans travel after it).
template <class T>
DEVTAP_HOST_DEVICE constexpr std::size_t print_fixed_bytes() {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (A::form == print_form::array) return sizeof(typename A::element) * A::extent;
  else if constexpr (A::form == print_form::scalar) return 8;
  else return 0;
}

// The verdict on one argument type (as passed: a volatile one included).
template <class T>
DEVTAP_HOST_DEVICE constexpr print_check print_arg_check() {
  using A = print_arg<std::remove_cv_t<T>>;
  constexpr print_check c = print_scalar_check<typename A::element>();
  if constexpr (A::form != print_form::scalar) {
    if (c != print_check::ok) return c;
    if (A::form == print_form::array && A::extent == 0) return print_check::empty_array;
    if (print_volatile_elements_v<T>) return print_check::volatile_elements;
    if (std::is_null_pointer_v<typename A::element>) return print_check::null_elements;
    if (print_fixed_bytes<T>() > print_max_fixed_bytes) return print_check::too_long;
  }
  return c;
}

// The wire descriptor of an argument type (0 when it cannot be sent).
template <class T>
DEVTAP_HOST_DEVICE constexpr std::uint32_t print_arg_desc() {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (print_arg_check<T>() != print_check::ok) {
    return 0;
  } else {
    return print_desc(print_scalar_kind<typename A::element>(), A::form, static_cast<std::uint32_t>(A::extent));
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
