#pragma once
// Building a print's record and tapping it (fmt-free, device-safe): the head, the definition when
// asked, the fixed-size arguments, and the span arguments after them (wire.hpp has the layout).
#include <devtap/config.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/tap_point.hpp>
#include <devtap/print/arg_traits.hpp>
#include <devtap/print/descriptor.hpp>
#include <devtap/print/printer.hpp>
#include <devtap/print/wire.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A print record without span arguments: head and body (definition, fixed-size arguments). Not
//  an aggregate on purpose: the codec sends it as raw bytes without reflecting on it.
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
    copy_bytes(at, static_cast<E>(v));  // (read once, as a plain value: `v` may be volatile)
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

// The tuple built from its parts: nvcc 13 compiles the default constructor of a tuple holding a
// print_record and a span as unreachable in device code (the kernel then ran off its end: an
// illegal instruction, or prints that vanished, on an H200), where this constructor compiles.
template <class Value, class Record, std::size_t... I>
DEVTAP_HOST_DEVICE inline Value print_value_from(const Record& rec, std::index_sequence<I...>) {
  return Value(rec, std::tuple_element_t<I + 1, Value>{}...);
}

// (`v` may be a volatile scalar, which these skip: [[maybe_unused]] rather than (void)v, which would
// read it.)
template <class Sig, std::size_t I, class Value, class T>
DEVTAP_HOST_DEVICE inline void print_put_span([[maybe_unused]] Value& value, [[maybe_unused]] const T& v) {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (A::form == print_form::span) {
    constexpr std::size_t part = 1 + Sig::layout.offsets[I];
    std::get<part>(value) = std::span<const typename A::element>(v.data(), v.size());
  }
}

template <class Sig, class Value, class... Args, std::size_t... I>
DEVTAP_HOST_DEVICE inline void print_put_spans(Value& value, std::index_sequence<I...>, const Args&... args) {
  (print_put_span<Sig, I>(value, args), ...);
}

template <class T>
DEVTAP_HOST_DEVICE inline std::size_t print_span_bytes([[maybe_unused]] const T& v) {
  using A = print_arg<std::remove_cv_t<T>>;
  if constexpr (A::form == print_form::span) {
    return 8 + align8(v.size() * sizeof(typename A::element));
  } else {
    return 0;
  }
}

// Builds the record of one print and taps it. `Define`: carry the format's definition.
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
    p.out().tap(tap_point<record>{point.id, point.fingerprint, point.receiver}, rec);
  } else {
    rec.head.count = sizeof(record) - 8 + (print_span_bytes(args) + ... + 0);
    using value_type = typename print_with_spans<std::tuple<record>, Args...>::type;
    value_type value =
        print_value_from<value_type>(rec, std::make_index_sequence<std::tuple_size_v<value_type> - 1>{});
    print_put_spans<Sig>(value, std::index_sequence_for<Args...>{}, args...);
    p.out().tap(tap_point<value_type>{point.id, point.fingerprint, point.receiver}, value);
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
