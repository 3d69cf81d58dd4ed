#pragma once
// Why a print is rejected (fmt-free, device-safe): one list of reasons, each with its one message.
// The same message is the compile-time error of devtap::print (print_reject) and the host's error
// line for a format a CUDA device defined (print_check_text), so the two never drift apart.
#include <devtap/config.hpp>

#include <cstdint>

// X(code, message), one row per reason. Expanded only below, then undefined.
#define DEVTAP_PRINT_REJECTIONS(X)                                                                              \
  X(unterminated_format, "the format is a char array without a terminating NUL, or padded with NULs after its " \
                         "text (the line would lose its last character, or print the NULs)")                  \
  X(unmatched_close, "unmatched '}' in the format (write '}}' for a literal brace)")                           \
  X(unclosed_field, "'{' without its closing '}' in the format (write '{{' for a literal brace)")              \
  X(named_argument, "named arguments are not supported (use {} or {0})")                                       \
  X(mixed_indexing, "automatic ({}) and manual ({0}) argument indexing cannot be mixed")                       \
  X(missing_argument, "the format has more replacement fields than arguments (or an index past the last one)") \
  X(unused_argument, "more arguments than the format uses (an argument no replacement field refers to)")       \
  X(bad_spec, "invalid format spec")                                                                           \
  X(spec_type, "a presentation type that does not suit its argument (e.g. {:f} for an integer, {:x} for a "    \
               "floating-point value, {:d} for a string)")                                                     \
  X(spec_sign, "a sign (+, -, space) in a spec needs a signed number")                                         \
  X(spec_alt, "'#' in a spec does not suit its argument")                                                      \
  X(spec_zero, "'0' padding in a spec does not suit its argument")                                             \
  X(spec_precision, "a precision in a spec for an argument that takes none (only floating point and strings "  \
                    "do)")                                                                                     \
  X(spec_locale, "'L' in a spec does not suit its argument")                                                   \
  X(width_not_integer, "a dynamic width or precision ({}) must refer to an integer argument")                  \
  X(too_many_arguments, "too many arguments (at most 64)")                                                     \
  X(char_pointer, "a char pointer cannot be sent (the host cannot read device memory): pass a "                \
                  "std::string_view (its characters are sent), or cast to const void* to print the address")  \
  X(long_double, "long double is not supported: cast to double")                                               \
  X(wide_char, "wchar_t, char8_t, char16_t and char32_t are not supported: cast to an integer")                \
  X(nested_array, "arrays of arrays are not supported: pass each row, or a flat std::span")                    \
  X(empty_array, "an empty array argument")                                                                    \
  X(too_long, "a record too large for the stack it is built on: fixed-size arguments over 64 KiB in all; in "  \
              "device code, they and the format's text over 2 KiB. Pass large arrays as a std::span")        \
  X(volatile_elements, "arrays and spans of volatile elements are not supported: copy them first")             \
  X(null_elements, "arrays and spans of std::nullptr_t are not supported (every element is null)")             \
  X(unsupported_type, "unsupported argument type (supported: bool, char, integers up to 64 bits, float, "      \
                      "double, enums, pointers, fixed-size arrays, std::array and std::span of those, "        \
                      "std::string_view; a std::string: pass std::string_view(s), a vector: std::span(v))")    \
  X(function_argument, "a function cannot be sent: call it and print its result, or print its address as &f")

DEVTAP_BEGIN_NAMESPACE
namespace detail {

#define DEVTAP_PRINT_REJECTION_CODE(code, message) code,
// What the checks of a print found: ok, or why it is rejected (the format or an argument type).
enum class print_check : unsigned { ok, DEVTAP_PRINT_REJECTIONS(DEVTAP_PRINT_REJECTION_CODE) };
#undef DEVTAP_PRINT_REJECTION_CODE

// The verdict of the format checker, with where it applies.
struct print_check_result {
  print_check code = print_check::ok;
  std::uint32_t offset = 0;    // where in the format
  std::uint32_t argument = 0;  // which argument, where one is concerned
  std::uint64_t width_arguments = 0;  // of an accepted format: bit a set when argument a is a dynamic width or precision
};

#define DEVTAP_PRINT_REJECTION_TEXT(code, message) \
  case print_check::code: return message;
// The message of a verdict (the host's error lines, tests).
DEVTAP_HOST_DEVICE constexpr const char* print_check_text(print_check c) {
  switch (c) {
    case print_check::ok: return "ok";
    DEVTAP_PRINT_REJECTIONS(DEVTAP_PRINT_REJECTION_TEXT)
  }
  return "?";
}
#undef DEVTAP_PRINT_REJECTION_TEXT

#define DEVTAP_PRINT_REJECTION_ASSERT(code, message) \
  static_assert(C != print_check::code, "devtap::print: " message);
// The compile-time error of a rejected print: instantiated with its verdict, it fails with that
//  verdict's message (a static_assert message must be a literal, hence one assert per row).
template <print_check C>
DEVTAP_HOST_DEVICE constexpr void print_reject() {
  DEVTAP_PRINT_REJECTIONS(DEVTAP_PRINT_REJECTION_ASSERT)
}
#undef DEVTAP_PRINT_REJECTION_ASSERT

}  // namespace detail
DEVTAP_END_NAMESPACE

#undef DEVTAP_PRINT_REJECTIONS
