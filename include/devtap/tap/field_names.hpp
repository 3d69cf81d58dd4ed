#pragma once
// The names of a tapped type's fields, given by the user (C++20 cannot reflect them): the keys of
// the trace file's event arguments.
#include <devtap/config.hpp>

#include <iterator>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
struct unnamed_fields {};  // the base of field_names<T> where the user gave no names for T
}  // namespace detail

/** Names for the fields of a tapped aggregate or tuple, in declaration order: the keys of its
 *  values in the trace file (`receiver_options::trace_file`), which are "0", "1", ... without them.
 *  Specialize it with a static constexpr array holding one name per field:
 *
 *      struct step_stats { int step; float loss; float grad_norm; };
 *      template <>
 *      struct devtap::field_names<step_stats> {
 *        static constexpr std::array names{"step", "loss", "grad_norm"};
 *      };
 *
 *  A nested aggregate with names is written as an object with its own keys, else as an array.
 *  Checked at compile time wherever a consumer of the type is attached: one name per field, each
 *  non-empty and distinct, and none "sequence" at the top level (the trace adds that key: the
 *  record's sequence number), and a specialization without `names` is an error, not ignored.
 *  Declare it before anything uses the type's field names: the compiler rejects a specialization
 *  that comes after. */
template <class T>
struct field_names : detail::unnamed_fields {};

namespace detail {

// field_names<T> is the user's specialization (well-formed or not: json_value.hpp checks it).
template <class T>
concept gives_field_names = !std::is_base_of_v<unnamed_fields, field_names<T>>;

// T's fields have names: field_names<T> is specialized with an indexable `names`.
template <class T>
concept named_fields = requires {
  std::size(field_names<T>::names);
  std::string_view(field_names<T>::names[0]);
};

template <class T>
constexpr std::string_view field_name(std::size_t i) {
  return std::string_view(field_names<T>::names[i]);
}

}  // namespace detail
DEVTAP_END_NAMESPACE
