#pragma once
// The names of a tapped type's fields, given by the user (C++20 cannot reflect them): the keys of
// the trace file's event arguments.
#include <devtap/config.hpp>

#include <iterator>
#include <string_view>

DEVTAP_BEGIN_NAMESPACE

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
 *  record's sequence number). Declare it before anything uses the type's field names: the compiler
 *  rejects a specialization that comes after. */
template <class T>
struct field_names {};

namespace detail {

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
