#pragma once
// Tapped values as JSON, by their shape (the one classifier, detail/shape.hpp): the arguments of a
// trace file's events. Strings and numbers are detail/json.hpp's.
#include <devtap/config.hpp>
#include <devtap/detail/json.hpp>
#include <devtap/detail/shape.hpp>
#include <devtap/tap/codec.hpp>

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

// for_each_part visitor: the parts as JSON array elements, or with keys "0", "1", ... as members.
struct json_parts {
  std::string& out;
  bool keyed;
  std::size_t i = 0;
  template <class P>
  void operator()(const P& part) {
    if (i != 0) out.push_back(',');
    if (keyed) {
      out.push_back('"');
      append_json_number(out, i);
      out += "\":";
    }
    ++i;
    append_json_value(out, part);
  }
};

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
    if constexpr (std::is_arithmetic_v<U>) {
      append_json_number(out, v);
    } else if constexpr (std::is_enum_v<U>) {
      append_json_number(out, static_cast<std::underlying_type_t<U>>(v));
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

// A trace event's "args" object: tuples and aggregates one member per part, keyed by position
// (field names are not known); anything else as {"value": ...}.
template <class T>
void append_json_args(std::string& out, const T& v) {
  constexpr shape s = shape_of<T>;
  if constexpr (s == shape::tuple || s == shape::aggregate) {
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
