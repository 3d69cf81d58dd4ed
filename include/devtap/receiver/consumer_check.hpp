#pragma once
/** What `receiver::attach<T>(fn)` asks of T and of fn: the one classifier of consumers (a coroutine
 *  factory or a plain callable, and its exact parameters), and the one checker that turns a misuse
 *  into one error at the user's line (internal). */
#include <devtap/backend/device.hpp>
#include <devtap/receiver/consumer.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/json_value.hpp>
#include <devtap/tap/tap_info.hpp>

#include <concepts>
#include <functional>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// ---- the parameters of a callable, where they are known --------------------------------------
// Known for a function pointer and for a class with one call operator that is not a template (a
// non-generic lambda, std::function, a struct with one operator()), also through std::ref. Not
// known for a generic lambda or an overload set: those are only asked to be invocable.
template <class... P>
struct param_list {};

template <class C, class R, class... P, bool NE>
param_list<P...> params_of(R (C::*)(P...) noexcept(NE));
template <class C, class R, class... P, bool NE>
param_list<P...> params_of(R (C::*)(P...) const noexcept(NE));
template <class C, class R, class... P, bool NE>
param_list<P...> params_of(R (C::*)(P...) & noexcept(NE));
template <class C, class R, class... P, bool NE>
param_list<P...> params_of(R (C::*)(P...) const & noexcept(NE));
template <class R, class... P, bool NE>
param_list<P...> params_of(R (*)(P...) noexcept(NE));

template <class Fn>
struct call_params {};  // no `type`: not known
template <class Fn>
  requires std::is_pointer_v<Fn> && requires(Fn f) { params_of(f); }
struct call_params<Fn> {
  using type = decltype(params_of(std::declval<Fn>()));
};
template <class Fn>
  requires std::is_class_v<Fn> && requires { params_of(&Fn::operator()); }
struct call_params<Fn> {
  using type = decltype(params_of(&Fn::operator()));
};
template <class Fn>
struct call_params<std::reference_wrapper<Fn>> : call_params<std::remove_cv_t<Fn>> {};

// A value parameter for T without conversion: `const T&` or `T` (by value).
template <class P, class T>
inline constexpr bool exact_value_param_v = std::is_same_v<P, const T&> || std::is_same_v<P, T>;

template <class T, class Ps>
inline constexpr bool exact_params_v = false;
template <class T, class P>
inline constexpr bool exact_params_v<T, param_list<P>> = exact_value_param_v<P, T>;
template <class T, class P, class D>
inline constexpr bool exact_params_v<T, param_list<P, D>> =
    exact_value_param_v<P, T> && (std::is_same_v<D, const device&> || std::is_same_v<D, const tap_info&>);

template <class Fn>
concept known_params = requires { typename call_params<Fn>::type; };

/** A coroutine consumer: `consumer<T> f(inbox<T>)`, one instance per device (or one shared).
 *  A generic lambda is asked `f(const T&)` first: a value consumer `[](const auto& v) { v.x; }`
 *  is never instantiated with an inbox (a hard error, not a "no"), while a coroutine lambda
 *  `[](auto in) -> consumer<T> { ... }` says so by the type it returns. */
template <class T, class Fn>
concept coroutine_factory =
    (known_params<Fn> || !std::invocable<Fn&, const T&> ||
     std::same_as<std::invoke_result_t<Fn&, const T&>, consumer<T>>) &&
    std::invocable<Fn&, inbox<T>> && std::same_as<std::invoke_result_t<Fn&, inbox<T>>, consumer<T>>;

template <class T, class Fn>
concept loose_value_callable = std::invocable<Fn&, const T&> || std::invocable<Fn&, const T&, const device&> ||
                               std::invocable<Fn&, const T&, const tap_info&>;

/** True unless the callable's parameters are known and are not exactly (`const T&` or `T`) and
 *  optionally `const device&` or `const tap_info&`: no consumer is fed through a conversion
 *  (`const int&` for a double). */
template <class T, class Fn>
concept takes_exactly = !known_params<Fn> || exact_params_v<T, typename call_params<Fn>::type>;

/** A plain callable consumer of T: `fn(const T&)` or `fn(const T&, const device&)`, with no
 *  conversion of the value (a generic lambda gets `const T&`). */
template <class T, class Fn>
concept value_callable = loose_value_callable<T, Fn> && takes_exactly<T, Fn>;

/** What `receiver::attach<T>` needs of T beyond `tappable`: a plain type the receiver can decode
 *  into (default constructible) and hand over by value (implicitly move constructible). */
template <class T>
concept receivable = std::is_same_v<T, std::remove_cvref_t<T>> && !std::is_array_v<T> && tappable<T> &&
                     std::default_initializable<T> && std::move_constructible<T>;

template <class...>
inline constexpr bool dependent_false_v = false;

/** Every requirement `receiver::attach<T>(fn)` puts on T and on fn, so that misuse reads as one
 *  sentence at the call instead of an error inside <optional>: at most one static_assert fails,
 *  the first unmet requirement's. Returns true (the static_asserts speak), so that it is called
 *  as `static_assert(detail::check_consumer<T, Fn>());`. */
template <class T, class Fn>
constexpr bool check_consumer() {
  if constexpr (!std::is_same_v<T, std::remove_cvref_t<T>>)
    static_assert(dependent_false_v<T>, "devtap: attach<T>: T must be a plain type, not const, volatile or a reference");
  else if constexpr (std::is_array_v<T>)
    static_assert(dependent_false_v<T>,
                  "devtap: attach<T>: T cannot be a C array; tap and attach a std::array (the same bytes and fingerprint)");
  else if constexpr (!tappable<T> && shape_of<T> == shape::span)
    static_assert(dependent_false_v<T>,
                  "devtap: attach<T>: a span is tapped as std::span<const U> (read-only, dynamic extent), not as this one");
  else if constexpr (!tappable<T> && has_parts(shape_of<T>))
    static_assert(dependent_false_v<T>, "devtap: attach<T>: a field or element of T cannot be tapped (each must be "
                                        "trivially copyable, a std::span<const U>, or a tuple, pair, array or "
                                        "aggregate of those)");
  else if constexpr (!tappable<T>)
    static_assert(dependent_false_v<T>, "devtap: attach<T>: T cannot be tapped: it is not trivially copyable (a "
                                        "std::string or std::vector owns memory elsewhere: tap a std::span<const "
                                        "char> or a std::array instead)");
  else if constexpr (!std::default_initializable<T>)
    static_assert(dependent_false_v<T>,
                  "devtap: attach<T>: T must be default constructible (the receiver decodes each record into a T)");
  else if constexpr (!std::move_constructible<T>)
    static_assert(dependent_false_v<T>, "devtap: attach<T>: T must be implicitly move or copy constructible (no explicit "
                                        "or deleted copy/move constructor): values are handed over by value");
  else if constexpr (field_names_check<T, true>::fault != field_names_fault::none)
    ;  // field_names_check's static_assert says what is wrong with devtap::field_names<T>
  else if constexpr (coroutine_factory<T, Fn>)
    ;  // a coroutine `consumer<T>(inbox<T>)`: its parameter type already names T
  else if constexpr (!loose_value_callable<T, Fn>)
    static_assert(dependent_false_v<T>,
                  "devtap: a consumer of T is a coroutine `devtap::consumer<T> f(devtap::inbox<T>)` or a callable "
                  "taking `const T&` (optionally followed by `const devtap::device&` or `const devtap::tap_info&`)");
  else if constexpr (!takes_exactly<T, Fn>)
    static_assert(dependent_false_v<T>,
                  "devtap: a consumer callable must take exactly `const T&` or `T`, optionally followed by `const "
                  "devtap::device&` or `const devtap::tap_info&` (no conversions: a consumer of another type than the "
                  "tap point's T is rejected)");
  return true;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
