#pragma once
/** Compile-time side of devtap::print (fmt-free, device-safe): the format string as a template
 * argument, the argument descriptors every print record is decoded with, and a constexpr checker of
 * {fmt}'s format-string grammar against those descriptors.
 *
 * The checker mirrors what {fmt} 9.1 rejects at run time for the argument kinds devtap::print sends
 * (tests/print/check.cpp compares it with {fmt} spec by spec); it never rejects what {fmt} formats.
 * The same function validates, at run time on the host, the formats that CUDA devices define. */
#include <devtap/config.hpp>
#include <devtap/tap/fingerprint.hpp>

#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE

/** A string literal as a template argument: `devtap::print<"step {} loss {:.3f}">(out, i, loss)`.
 *  Being a constant, it gives each format a compile-time id and compile-time checks. */
template <std::size_t N>
struct fixed_string {
  char chars[N]{};
  DEVTAP_HOST_DEVICE constexpr fixed_string(const char (&s)[N]) {  // NOLINT: implicit on purpose
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  /** Characters before the terminating NUL. */
  DEVTAP_HOST_DEVICE static constexpr std::size_t size() { return N - 1; }
  DEVTAP_HOST_DEVICE constexpr const char* data() const { return chars; }
};

namespace detail {

/** The scalar kinds a print argument can have (the wire tag; never renumber). */
enum class print_kind : std::uint8_t {
  invalid = 0,
  boolean = 1,
  character = 2,
  i8 = 3, i16 = 4, i32 = 5, i64 = 6,
  u8 = 7, u16 = 8, u32 = 9, u64 = 10,
  f32 = 11, f64 = 12,
  pointer = 13,
};
inline constexpr std::uint8_t print_kind_count = 14;

/** How an argument is sent: one value, a fixed-size array (in the record), or a span (after it). */
enum class print_form : std::uint8_t { scalar = 0, array = 1, span = 2 };

/** Largest fixed-size array argument (elements); larger data goes in a std::span. */
inline constexpr std::uint32_t print_max_extent = (1u << 22) - 1;
/** Most arguments one print takes. */
inline constexpr std::size_t print_max_args = 64;

/** An argument descriptor: kind | form << 8 | extent << 10 (extent: arrays only). */
DEVTAP_HOST_DEVICE constexpr std::uint32_t print_desc(print_kind k, print_form f, std::uint32_t extent = 0) {
  return static_cast<std::uint32_t>(k) | (static_cast<std::uint32_t>(f) << 8) | (extent << 10);
}
DEVTAP_HOST_DEVICE constexpr print_kind desc_kind(std::uint32_t d) { return static_cast<print_kind>(d & 0xffu); }
DEVTAP_HOST_DEVICE constexpr print_form desc_form(std::uint32_t d) { return static_cast<print_form>((d >> 8) & 3u); }
DEVTAP_HOST_DEVICE constexpr std::uint32_t desc_extent(std::uint32_t d) { return d >> 10; }

/** Bytes (and alignment) of one element of a kind. */
DEVTAP_HOST_DEVICE constexpr std::uint32_t print_kind_size(print_kind k) {
  switch (k) {
    case print_kind::boolean: case print_kind::character: case print_kind::i8: case print_kind::u8: return 1;
    case print_kind::i16: case print_kind::u16: return 2;
    case print_kind::i32: case print_kind::u32: case print_kind::f32: return 4;
    case print_kind::i64: case print_kind::u64: case print_kind::f64: case print_kind::pointer: return 8;
    default: return 0;
  }
}

/** A descriptor a well-formed record can carry. */
DEVTAP_HOST_DEVICE constexpr bool print_desc_valid(std::uint32_t d) {
  const auto k = static_cast<std::uint32_t>(desc_kind(d));
  if (k == 0 || k >= print_kind_count) return false;
  switch (desc_form(d)) {
    case print_form::scalar: case print_form::span: return desc_extent(d) == 0;
    case print_form::array: return desc_extent(d) >= 1;
  }
  return false;
}

/** Text arguments: char arrays, char spans and std::string_view print as strings, not as ranges. */
DEVTAP_HOST_DEVICE constexpr bool desc_is_string(std::uint32_t d) {
  return desc_kind(d) == print_kind::character && desc_form(d) != print_form::scalar;
}

// ---- the format checker ---------------------------------------------------------------------

/** What the checker found; each code has its own static_assert message in print.hpp. */
enum class print_check : std::uint8_t {
  ok,
  unmatched_close,     ///< a '}' that is not '}}' and closes nothing
  unclosed_field,      ///< a '{' without its '}'
  named_argument,      ///< {name}: not supported
  mixed_indexing,      ///< {} and {0} in one format
  missing_argument,    ///< more fields than arguments, or an index past the last
  unused_argument,     ///< an argument no field refers to
  bad_spec,            ///< the spec does not parse
  spec_type,           ///< the presentation type does not suit the argument
  spec_sign,           ///< + - or space for an argument without sign
  spec_alt,            ///< '#' for an argument that has no alternate form
  spec_zero,           ///< '0' padding for an argument that is not a number
  spec_precision,      ///< precision for an argument that takes none
  spec_locale,         ///< 'L' for an argument that has no locale form
  width_not_integer,   ///< a {} width or precision that refers to a non-integer argument
  too_many_arguments,  ///< more than print_max_args
};

struct print_check_result {
  print_check code = print_check::ok;
  std::uint32_t offset = 0;    ///< where in the format
  std::uint32_t argument = 0;  ///< which argument, where one is concerned
};

/** How {fmt} treats an argument's spec. */
enum class spec_class : std::uint8_t { sint, uint, chr, boolean, flt, ptr, str, range };

DEVTAP_HOST_DEVICE constexpr spec_class scalar_spec_class(print_kind k) {
  switch (k) {
    case print_kind::boolean: return spec_class::boolean;
    case print_kind::character: return spec_class::chr;
    case print_kind::i8: case print_kind::i16: case print_kind::i32: case print_kind::i64: return spec_class::sint;
    case print_kind::u8: case print_kind::u16: case print_kind::u32: case print_kind::u64: return spec_class::uint;
    case print_kind::f32: case print_kind::f64: return spec_class::flt;
    default: return spec_class::ptr;
  }
}

DEVTAP_HOST_DEVICE constexpr spec_class desc_spec_class(std::uint32_t d) {
  if (desc_form(d) == print_form::scalar) return scalar_spec_class(desc_kind(d));
  return desc_is_string(d) ? spec_class::str : spec_class::range;
}

DEVTAP_HOST_DEVICE constexpr bool print_is_digit(char c) { return c >= '0' && c <= '9'; }
DEVTAP_HOST_DEVICE constexpr bool print_is_align(char c) { return c == '<' || c == '>' || c == '^'; }
DEVTAP_HOST_DEVICE constexpr bool print_is_int_kind(print_kind k) {
  return k >= print_kind::i8 && k <= print_kind::u64;
}
DEVTAP_HOST_DEVICE constexpr bool print_one_of(char c, const char* set) {
  for (; *set != '\0'; ++set)
    if (*set == c) return true;
  return false;
}

/** Walks a format string the way {fmt} does, against the descriptors of its arguments. */
class print_checker {
public:
  DEVTAP_HOST_DEVICE constexpr print_checker(const char* s, std::size_t n, const std::uint32_t* descs, std::size_t nargs)
      : s_(s), n_(n), descs_(descs), nargs_(nargs) {}

  DEVTAP_HOST_DEVICE constexpr print_check_result run() {
    if (nargs_ > print_max_args) return {print_check::too_many_arguments, 0, 0};
    std::size_t i = 0;
    while (i < n_) {
      const char c = s_[i];
      if (c == '}') {
        if (i + 1 < n_ && s_[i + 1] == '}') {
          i += 2;
          continue;
        }
        fail(print_check::unmatched_close, i);
        return result_;
      }
      if (c != '{') {
        ++i;
        continue;
      }
      if (i + 1 < n_ && s_[i + 1] == '{') {
        i += 2;
        continue;
      }
      ++i;
      if (!field(i)) return result_;
    }
    for (std::size_t a = 0; a < nargs_; ++a)
      if ((used_ & (std::uint64_t{1} << a)) == 0) return {print_check::unused_argument, static_cast<std::uint32_t>(n_), static_cast<std::uint32_t>(a)};
    return {};
  }

private:
  DEVTAP_HOST_DEVICE constexpr bool fail(print_check code, std::size_t at, std::size_t arg = 0) {
    result_ = {code, static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(arg)};
    return false;
  }

  // An argument reference at s_[i]: digits (manual) or nothing (automatic). Sets `arg`.
  DEVTAP_HOST_DEVICE constexpr bool arg_ref(std::size_t& i, std::size_t& arg) {
    if (i < n_ && print_is_digit(s_[i])) {
      if (automatic_) return fail(print_check::mixed_indexing, i);
      manual_ = true;
      std::size_t v = 0;
      const std::size_t start = i;
      while (i < n_ && print_is_digit(s_[i])) {
        v = v * 10 + static_cast<std::size_t>(s_[i] - '0');
        if (v > 1000000) return fail(print_check::missing_argument, start);
        ++i;
      }
      if (s_[start] == '0' && i - start > 1) return fail(print_check::bad_spec, start);  // {fmt}: no leading zeros
      arg = v;
    } else {
      if (manual_) return fail(print_check::mixed_indexing, i);
      automatic_ = true;
      arg = next_++;
    }
    if (arg >= nargs_) return fail(print_check::missing_argument, i);
    used_ |= std::uint64_t{1} << arg;
    return true;
  }

  // A replacement field; i is just past its '{'.
  DEVTAP_HOST_DEVICE constexpr bool field(std::size_t& i) {
    if (i >= n_) return fail(print_check::unclosed_field, i);
    const char c = s_[i];
    if (!print_is_digit(c) && c != ':' && c != '}') {
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') return fail(print_check::named_argument, i);
      return fail(print_check::bad_spec, i);
    }
    std::size_t arg = 0;
    if (!arg_ref(i, arg)) return false;
    if (i >= n_) return fail(print_check::unclosed_field, i);
    if (s_[i] == '}') {
      ++i;
      return true;
    }
    if (s_[i] != ':') return fail(print_check::bad_spec, i);
    ++i;
    const std::uint32_t d = descs_[arg];
    const spec_class cls = desc_spec_class(d);
    if (cls == spec_class::range) {
      if (!range_spec(i, arg, scalar_spec_class(desc_kind(d)))) return false;
    } else if (!scalar_spec(i, arg, cls)) {
      return false;
    }
    if (i >= n_) return fail(print_check::unclosed_field, i);
    if (s_[i] != '}') return fail(print_check::bad_spec, i);
    ++i;
    return true;
  }

  // {fmt} 9 ranges: "" | "n" | ["n"] ":" element-spec.
  DEVTAP_HOST_DEVICE constexpr bool range_spec(std::size_t& i, std::size_t arg, spec_class element) {
    if (i < n_ && s_[i] == 'n') ++i;
    if (i >= n_ || s_[i] == '}') return true;
    if (s_[i] != ':') return fail(print_check::bad_spec, i, arg);
    ++i;
    return scalar_spec(i, arg, element);
  }

  // A dynamic width or precision: '{' [index] '}'.
  DEVTAP_HOST_DEVICE constexpr bool dynamic(std::size_t& i) {
    ++i;  // '{'
    std::size_t ref = 0;
    if (!arg_ref(i, ref)) return false;
    if (i >= n_ || s_[i] != '}') return fail(print_check::bad_spec, i);
    ++i;
    const std::uint32_t d = descs_[ref];
    if (desc_form(d) != print_form::scalar || !print_is_int_kind(desc_kind(d)))
      return fail(print_check::width_not_integer, i, ref);
    return true;
  }

  // [[fill]align][sign]["#"]["0"][width]["." precision]["L"][type], checked against `cls` as {fmt} 9.1 does.
  DEVTAP_HOST_DEVICE constexpr bool scalar_spec(std::size_t& i, std::size_t arg, spec_class cls) {
    const std::size_t start = i;
    auto at = [&](std::size_t k) -> char { return k < n_ ? s_[k] : '\0'; };
    // fill (one character, UTF-8 too) and alignment
    std::size_t fill_len = 1;
    const auto lead = static_cast<unsigned char>(at(i));
    if (lead >= 0xf0) fill_len = 4;
    else if (lead >= 0xe0) fill_len = 3;
    else if (lead >= 0xc0) fill_len = 2;
    bool align = true;
    if (i < n_ && at(i) != '{' && at(i) != '}' && print_is_align(at(i + fill_len))) i += fill_len + 1;
    else if (print_is_align(at(i))) i += 1;
    else align = false;
    bool sign = false, alt = false, zero = false, precision = false, locale = false;
    if (at(i) == '+' || at(i) == '-' || at(i) == ' ') {
      sign = true;
      ++i;
    }
    if (at(i) == '#') {
      alt = true;
      ++i;
    }
    if (at(i) == '0') {
      zero = true;
      ++i;
    }
    if (print_is_digit(at(i))) {
      while (print_is_digit(at(i))) ++i;
    } else if (at(i) == '{') {
      if (!dynamic(i)) return false;
    }
    if (at(i) == '.') {
      ++i;
      precision = true;
      if (print_is_digit(at(i))) {
        while (print_is_digit(at(i))) ++i;
      } else if (at(i) == '{') {
        if (!dynamic(i)) return false;
      } else {
        return fail(print_check::bad_spec, i, arg);
      }
    }
    if (at(i) == 'L') {
      locale = true;
      ++i;
    }
    char type = '\0';
    if (i < n_ && at(i) != '}') type = at(i++);
    if (i < n_ && at(i) != '}') return fail(print_check::bad_spec, i, arg);

    const char* types = "";
    switch (cls) {
      case spec_class::sint: case spec_class::uint: types = "dxXbBoc"; break;
      case spec_class::chr: types = "c?dxXbBo"; break;
      case spec_class::boolean: types = "sdxXbBoc"; break;
      case spec_class::flt: types = "eEfFgGaA"; break;
      case spec_class::ptr: types = "p"; break;
      case spec_class::str: types = "s?"; break;
      case spec_class::range: break;
    }
    if (type != '\0' && !print_one_of(type, types)) return fail(print_check::spec_type, start, arg);
    // char with an integer presentation is formatted as an integer
    const bool char_as_int = cls == spec_class::chr && type != '\0' && print_one_of(type, "dxXbBo");
    const bool sign_ok = cls == spec_class::sint || cls == spec_class::flt || char_as_int;
    const bool alt_ok = cls == spec_class::sint || cls == spec_class::uint || cls == spec_class::boolean ||
                        cls == spec_class::flt || char_as_int;
    const bool zero_ok = alt_ok || (cls == spec_class::chr && align);  // with an alignment, '0' is only padding
    const bool precision_ok = cls == spec_class::flt || cls == spec_class::str;
    const bool locale_ok = cls != spec_class::ptr && cls != spec_class::str;
    if (sign && !sign_ok) return fail(print_check::spec_sign, start, arg);
    if (alt && !alt_ok) return fail(print_check::spec_alt, start, arg);
    if (zero && !zero_ok) return fail(print_check::spec_zero, start, arg);
    if (precision && !precision_ok) return fail(print_check::spec_precision, start, arg);
    if (locale && !locale_ok) return fail(print_check::spec_locale, start, arg);
    return true;
  }

  const char* s_;
  std::size_t n_;
  const std::uint32_t* descs_;
  std::size_t nargs_;
  bool automatic_ = false, manual_ = false;
  std::size_t next_ = 0;
  std::uint64_t used_ = 0;
  print_check_result result_{};
};

/** Checks format `s` (n characters) against `nargs` argument descriptors. */
DEVTAP_HOST_DEVICE constexpr print_check_result check_print_format(const char* s, std::size_t n, const std::uint32_t* descs,
                                                                   std::size_t nargs) {
  return print_checker(s, n, descs, nargs).run();
}

/** A sentence for a checker result (host messages and tests). */
DEVTAP_HOST_DEVICE constexpr const char* print_check_text(print_check c) {
  switch (c) {
    case print_check::ok: return "ok";
    case print_check::unmatched_close: return "unmatched '}' (write '}}' for a literal brace)";
    case print_check::unclosed_field: return "'{' without its closing '}' (write '{{' for a literal brace)";
    case print_check::named_argument: return "named arguments are not supported (use {} or {0})";
    case print_check::mixed_indexing: return "automatic ({}) and manual ({0}) argument indexing mixed";
    case print_check::missing_argument: return "more replacement fields than arguments, or an index past the last argument";
    case print_check::unused_argument: return "an argument that no replacement field uses";
    case print_check::bad_spec: return "invalid format spec";
    case print_check::spec_type: return "presentation type does not suit the argument";
    case print_check::spec_sign: return "a sign (+, -, space) needs a signed number";
    case print_check::spec_alt: return "'#' does not suit the argument";
    case print_check::spec_zero: return "'0' padding does not suit the argument";
    case print_check::spec_precision: return "precision does not suit the argument (floating point and strings only)";
    case print_check::spec_locale: return "'L' does not suit the argument";
    case print_check::width_not_integer: return "a dynamic width or precision must refer to an integer argument";
    case print_check::too_many_arguments: return "too many arguments (at most 64)";
  }
  return "?";
}

// ---- ids ------------------------------------------------------------------------------------

/** FNV-1a 64 of the format's text and its argument descriptors: a format's id on every compiler. */
DEVTAP_HOST_DEVICE constexpr std::uint64_t print_format_id(const char* s, std::size_t n, const std::uint32_t* descs,
                                                           std::size_t nargs) {
  fnv1a64 f;
  f.byte('p').byte(1);  // a version: changing the wire format changes every id
  for (std::size_t i = 0; i < n; ++i) f.byte(static_cast<unsigned char>(s[i]));
  f.byte(0);
  for (std::size_t a = 0; a < nargs; ++a)
    for (int b = 0; b < 4; ++b) f.byte(static_cast<unsigned char>(descs[a] >> (8 * b)));
  return f.h == 0 ? 1 : f.h;  // 0 is never an id
}

}  // namespace detail
DEVTAP_END_NAMESPACE
