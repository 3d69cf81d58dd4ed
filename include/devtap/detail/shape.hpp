#pragma once
// The one classification of the types taps carry. The fingerprint and every pass of the codec
// switch on shape_of, so that they cannot disagree about what is a span, an array, a tuple or a
// reflected aggregate.
#include <devtap/config.hpp>
#include <devtap/detail/reflect.hpp>
#include <devtap/detail/text.hpp>

#include <cstddef>
#include <tuple>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

enum class shape : unsigned char {
  scalar,     // neither class, union nor array: arithmetic, enum, pointer, reference, ...
  span,       // std::span: what travels is its elements, not the span object
  array,      // T[N] or std::array<T, N>: the same bytes, so one shape
  tuple,      // std::tuple or std::pair
  aggregate,  // an aggregate whose fields are reflected (reflectable_v)
  opaque,     // any other class or union: only its bytes are known
};

template <class U>
constexpr shape shape_of_impl() {
  if constexpr (is_std_span<U>::value) {
    return shape::span;
  } else if constexpr (std::is_array_v<U> || is_std_array<U>::value) {
    return shape::array;
  } else if constexpr (is_tuple_like<U>::value) {
    return shape::tuple;
  } else if constexpr (reflectable_v<U>) {
    return shape::aggregate;
  } else if constexpr (std::is_class_v<U> || std::is_union_v<U>) {
    return shape::opaque;
  } else {
    return shape::scalar;
  }
}


// What T is made of (cv-qualifiers ignored).
template <class T>
inline constexpr shape shape_of = shape_of_impl<std::remove_cv_t<T>>();

// Shapes whose value is its parts, laid out in order: part_types_t lists them.
DEVTAP_HOST_DEVICE constexpr bool has_parts(shape s) {
  return s == shape::array || s == shape::tuple || s == shape::aggregate;
}

// Element type and length of a shape::array type (U without cv).
template <class U, bool = std::is_array_v<U>>
struct array_of {
  using element = std::remove_extent_t<U>;
  static constexpr std::size_t size = std::extent_v<U>;
};
template <class U>
struct array_of<U, false> {
  using element = typename U::value_type;
  static constexpr std::size_t size = std::tuple_size_v<U>;
};

template <class U, shape S = shape_of<U>>
struct part_types {
  using type = type_list<>;
};
template <class U>
struct part_types<U, shape::array> {
  using type = type_list<typename array_of<U>::element>;  // one type for all elements
};
template <class U>
struct part_types<U, shape::tuple> {
  using type = typename tuple_types<U>::type;
};
template <class U>
struct part_types<U, shape::aggregate> {
  using type = field_types_t<U>;
};

// The types of T's parts (cv-qualifiers of T ignored): an array's element type once, a tuple's
// element types, an aggregate's field types; empty for other shapes.
template <class T>
using part_types_t = typename part_types<std::remove_cv_t<T>>::type;

}  // namespace detail
DEVTAP_END_NAMESPACE
