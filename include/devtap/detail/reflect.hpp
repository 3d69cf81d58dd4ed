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
// Braces are syntax, so no pack expansion can choose them per position: each run is its own
// expansion and each run count its own init_ok overload. Those overloads and the structured
// bindings (one name per field) are the ladders detail/reflect_generated.hpp holds; field types
// and field visiting both derive from its with_bindings.
// Up to 32 fields; aggregates with more, or with base classes, are opaque (see reflectable_v).
// Not supported: anonymous unions and bit-fields in aggregates that hold spans.
#include <devtap/config.hpp>
#include <devtap/detail/reflect_generated.hpp>  // with_bindings, init_ok, max_reflected_fields

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

// The lengths of the runs tried so far: braced, bare, braced, ...
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

// with_bindings visitor that keeps only the declared types; only named in decltype. The fields
// are taken by const& so that bit-fields bind too.
struct binding_types {
  template <class L, class... P>
  DEVTAP_HOST_DEVICE constexpr L operator()(L, const P&...) const {
    return {};
  }
};

/** The declared types of T's fields, in order (cv as declared). */
template <class T>
using field_types_t =
    decltype(with_bindings<type_list, field_count_v<T>>(std::declval<T&>(), binding_types{}));

// with_bindings visitor that drops the types and hands the fields to f.
template <class F>
struct binding_fields {
  F& f;
  DEVTAP_NO_EXEC_CHECK
  template <class L, class... P>
  DEVTAP_HOST_DEVICE constexpr void operator()(L, P&... fields) const {
    f(fields...);
  }
};

// Calls f(field0, field1, ...) with lvalues of all of t's fields (t may be const).
DEVTAP_NO_EXEC_CHECK
template <class T, class F>
DEVTAP_HOST_DEVICE constexpr void with_fields(T& t, F&& f) {
  static_assert(reflectable_v<T>, "devtap: T's fields cannot be reflected");
  with_bindings<type_list, field_count_v<T>>(t, binding_fields<F>{f});
}

}  // namespace detail
DEVTAP_END_NAMESPACE
