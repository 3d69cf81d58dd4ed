#pragma once
// The format checker (fmt-free, device-safe): a constexpr walk of {fmt}'s format-string grammar
// against the argument descriptors. It mirrors what {fmt} 9.1 rejects at run time for the argument
// kinds devtap::print sends (tests/print/check.cpp compares it with {fmt} spec by spec) and never
// rejects what {fmt} formats. devtap::print runs it at compile time; the host runs it again on
// the formats CUDA devices define.
#include <devtap/config.hpp>
#include <devtap/print/descriptor.hpp>
#include <devtap/print/rejection.hpp>

#include <cstddef>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// How {fmt} treats an argument's spec.
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

// Walks a format string the way {fmt} does, against the descriptors of its arguments.
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
    return {print_check::ok, 0, 0, width_arguments_};
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
      in_range_ = true;
      const bool ok = range_spec(i, arg, scalar_spec_class(desc_kind(d)));
      in_range_ = false;
      if (!ok) return false;
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

  // A width or precision: at most 10 digits and INT_MAX, as {fmt} 9 requires ("number is too big").
  DEVTAP_HOST_DEVICE constexpr bool number(std::size_t& i, std::size_t arg) {
    const std::size_t start = i;
    std::uint64_t v = 0;
    while (i < n_ && print_is_digit(s_[i])) {
      v = v * 10 + static_cast<std::uint64_t>(s_[i++] - '0');
      if (v > 2147483647u || i - start > 10) return fail(print_check::bad_spec, start, arg);
    }
    return true;
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
    width_arguments_ |= std::uint64_t{1} << ref;
    return true;
  }

  // [[fill]align][sign]["#"]["0"][width]["." precision]["L"][type], checked against `cls` as {fmt} 9.1 does.
  DEVTAP_HOST_DEVICE constexpr bool scalar_spec(std::size_t& i, std::size_t arg, spec_class cls) {
    const std::size_t start = i;
    auto at = [&](std::size_t k) -> char { return k < n_ ? s_[k] : '\0'; };
    // fill (one character, UTF-8 too) and alignment
    // {fmt} 9's code_point_length: F8..FF (and continuation bytes) count as one byte
    std::size_t fill_len = 1;
    const auto lead = static_cast<unsigned char>(at(i));
    if (lead >= 0xf0 && lead < 0xf8) fill_len = 4;
    else if (lead >= 0xe0 && lead < 0xf0) fill_len = 3;
    else if (lead >= 0xc0 && lead < 0xe0) fill_len = 2;
    const bool fill_fits = i + fill_len < n_;  // else fmt looks for an alignment alone
    bool align = true;
    // {fmt} 9 refuses only '{' as a fill; '}' is a fill ("{:}<5}"), except in a range's element
    // spec, whose end print_range's parse finds at the first '}'
    if (fill_fits && at(i) != '{' && (at(i) != '}' || !in_range_) && print_is_align(at(i + fill_len))) i += fill_len + 1;
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
      if (!number(i, arg)) return false;
    } else if (at(i) == '{') {
      if (!dynamic(i)) return false;
    }
    if (at(i) == '.') {
      ++i;
      precision = true;
      if (print_is_digit(at(i))) {
        if (!number(i, arg)) return false;
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
  bool automatic_ = false, manual_ = false, in_range_ = false;
  std::size_t next_ = 0;
  std::uint64_t used_ = 0;
  std::uint64_t width_arguments_ = 0;
  print_check_result result_{};
};

// Checks format `s` (n characters) against `nargs` argument descriptors.
DEVTAP_HOST_DEVICE constexpr print_check_result check_print_format(const char* s, std::size_t n, const std::uint32_t* descs,
                                                                   std::size_t nargs) {
  return print_checker(s, n, descs, nargs).run();
}

}  // namespace detail
DEVTAP_END_NAMESPACE
