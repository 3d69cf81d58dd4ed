#pragma once
// Tapped values as JSON, by their shape (the one classifier, detail/shape.hpp): the arguments of a
// trace file's events. Strings and numbers are detail/json.hpp's; field names are the user's
// (tap/field_names.hpp).
#include <devtap/config.hpp>
#include <devtap/detail/json.hpp>
#include <devtap/detail/shape.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/field_names.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A span shows this many elements, then "... N more": trace viewers choke on huge args.
inline constexpr std::size_t json_span_limit = 64;

template <class T>
void append_json_value(std::string& out, const T& v);

// for_each_part visitor: the parts as JSON array elements, or as members keyed by `name` (the
// user's field names) or else by position ("0", "1", ...).
struct json_parts {
  std::string& out;
  bool keyed;
  std::string_view (*name)(std::size_t) = nullptr;
  std::size_t i = 0;
  template <class P>
  void operator()(const P& part) {
    if (i != 0) out.push_back(',');
    if (keyed && name != nullptr) {
      append_json_string(out, name(i));
      out.push_back(':');
    } else if (keyed) {
      out.push_back('"');
      append_json_number(out, i);
      out += "\":";
    }
    ++i;
    append_json_value(out, part);
  }
};

// What is wrong with U's field_names, if anything (U without cv). `top`: U is the tapped type
// itself, whose members sit beside the trace's own "sequence".
enum class field_names_fault { none, no_names, not_composite, count, empty, not_utf8, duplicate, reserved };

template <class U>
consteval field_names_fault check_field_names(bool top) {
  if constexpr (!gives_field_names<U>) {
    return field_names_fault::none;
  } else if constexpr (!named_fields<U>) {
    return field_names_fault::no_names;
  } else if constexpr (shape_of<U> != shape::tuple && shape_of<U> != shape::aggregate) {
    return field_names_fault::not_composite;
  } else {
    constexpr std::size_t n = std::size(field_names<U>::names);
    if (n != part_types_t<U>::size) return field_names_fault::count;
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view a = field_name<U>(i);
      if (a.empty()) return field_names_fault::empty;
      if (!valid_utf8(a)) return field_names_fault::not_utf8;  // the trace would write U+FFFD: two could become one key
      if (top && a == "sequence") return field_names_fault::reserved;
      for (std::size_t j = 0; j < i; ++j)
        if (a == field_name<U>(j)) return field_names_fault::duplicate;
    }
    return field_names_fault::none;
  }
}

// The one place a bad field_names is reported, when the class is instantiated (each message
// names the rule it breaks).
template <class U, bool Top>
struct field_names_check {
  static constexpr field_names_fault fault = check_field_names<U>(Top);
  static_assert(fault != field_names_fault::no_names,
                "devtap::field_names<T>: the specialization needs `static constexpr std::array names{\"...\", ...}` "
                "(an array of strings, one per field of T)");
  static_assert(fault != field_names_fault::not_composite,
                "devtap::field_names<T>: T must be an aggregate or a tuple (only their fields have names)");
  static_assert(fault != field_names_fault::count, "devtap::field_names<T>: give exactly one name per field of T");
  static_assert(fault != field_names_fault::empty, "devtap::field_names<T>: a field name is empty");
  static_assert(fault != field_names_fault::not_utf8, "devtap::field_names<T>: a field name is not valid UTF-8");
  static_assert(fault != field_names_fault::duplicate, "devtap::field_names<T>: two fields have the same name");
  static_assert(fault != field_names_fault::reserved,
                "devtap::field_names<T>: \"sequence\" is taken (the trace file's key for the record's sequence number)");
};

// The parts of a composite U as a JSON object keyed by its field names (`top`: see above).
template <class U, bool Top>
void append_json_named(std::string& out, const U& v) {
  if constexpr (field_names_check<U, Top>::fault == field_names_fault::none) {  // else: reported, no more errors
    json_parts parts{out, true, &field_name<U>};
    out.push_back('{');
    for_each_part(v, parts);
    out.push_back('}');
  }
}

// Spans and arrays of char are text: written as JSON strings, not arrays of numbers.
template <class U>
constexpr bool holds_chars() {
  if constexpr (shape_of<U> == shape::span) {
    return std::is_same_v<std::remove_cv_t<typename U::element_type>, char>;
  } else if constexpr (shape_of<U> == shape::array) {
    return std::is_same_v<std::remove_cv_t<typename array_of<U>::element>, char>;
  } else {
    return false;
  }
}


template <class T>
void append_json_value(std::string& out, const T& v) {
  using U = std::remove_cv_t<T>;
  constexpr shape s = shape_of<U>;
  if constexpr (s == shape::scalar) {
    if constexpr (is_int128_v<U>) {
      append_int128(out, v);
    } else if constexpr (std::is_arithmetic_v<U>) {
      append_json_number(out, v);
    } else if constexpr (std::is_enum_v<U>) {
      append_json_value(out, static_cast<std::underlying_type_t<U>>(v));  // (one over a 128-bit integer too)
    } else {
      out += "null";  // pointers, nullptr_t: their value means nothing in a trace
    }
  } else if constexpr (s == shape::span && holds_chars<U>()) {
    append_json_string(out, std::string_view(v.data(), v.size()));
  } else if constexpr (s == shape::span) {
    out.push_back('[');
    const std::size_t shown = std::min(v.size(), json_span_limit);
    for (std::size_t i = 0; i < shown; ++i) {
      if (i != 0) out.push_back(',');
      append_json_value(out, v[i]);
    }
    if (shown < v.size()) {
      out += ",\"... ";
      append_json_number(out, v.size() - shown);
      out += " more\"";
    }
    out.push_back(']');
  } else if constexpr (s == shape::array && holds_chars<U>()) {
    const std::string_view text(std::data(v), array_of<U>::size);
    append_json_string(out, text.substr(0, text.find('\0')));  // a C string in a fixed buffer
  } else if constexpr (gives_field_names<U>) {
    append_json_named<U, false>(out, v);
  } else if constexpr (has_parts(s)) {
    json_parts parts{out, false};
    out.push_back('[');
    for_each_part(v, parts);
    out.push_back(']');
  } else {
    out += "\"<";
    append_json_number(out, sizeof(U));
    out += " bytes>\"";
  }
}

// A trace event's "args" object: tuples and aggregates one member per part, keyed by the user's
// field names or else by position; anything else as {"value": ...}.
template <class T>
void append_json_args(std::string& out, const T& v) {
  using U = std::remove_cv_t<T>;
  constexpr shape s = shape_of<U>;
  if constexpr (gives_field_names<U>) {
    append_json_named<U, true>(out, v);
  } else if constexpr (s == shape::tuple || s == shape::aggregate) {
    json_parts parts{out, true};
    out.push_back('{');
    for_each_part(v, parts);
    out.push_back('}');
  } else {
    out += "{\"value\":";
    append_json_value(out, v);
    out.push_back('}');
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
