// The compile-time side of devtap::print: the format checker agrees with {fmt} 9 spec by spec, the
// argument descriptors, format ids (pinned: tests/print/print_nvcc.cu pins the same values for
// nvcc's device pass) and the record layout.
#include <devtap/print.hpp>
#include <devtap/print/record_view.hpp>  // parse_print_record: the host's side, tested here too

#include <catch2/catch.hpp>
#include <fmt/args.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "print_ids.hpp"

namespace {
using namespace devtap::detail;

constexpr print_check check(std::string_view f, std::initializer_list<std::uint32_t> descs) {
  return check_print_format(f.data(), f.size(), descs.begin(), descs.size()).code;
}
// The arguments an accepted format uses as a dynamic width or precision (bit a: argument a).
constexpr std::uint64_t width_arguments(std::string_view f, std::initializer_list<std::uint32_t> descs) {
  return check_print_format(f.data(), f.size(), descs.begin(), descs.size()).width_arguments;
}

constexpr std::uint32_t i32 = print_desc(print_kind::i32, print_form::scalar);
constexpr std::uint32_t f64 = print_desc(print_kind::f64, print_form::scalar);
constexpr std::uint32_t str = print_desc(print_kind::character, print_form::span);

// A value of each kind as {fmt} sees it, pushed into a store; its descriptor for the checker.
struct sample {
  const char* name;
  std::uint32_t desc;
  void (*push)(fmt::dynamic_format_arg_store<fmt::format_context>&);
};

const int range_ints[3] = {1, 2, 3};
const double range_doubles[2] = {1.5, 2.5};
const bool range_bools[2] = {true, false};

const sample samples[] = {
    {"int", print_desc(print_kind::i32, print_form::scalar), [](auto& s) { s.push_back(-42); }},
    {"i8", print_desc(print_kind::i8, print_form::scalar), [](auto& s) { s.push_back(static_cast<signed char>(-3)); }},
    {"i64", print_desc(print_kind::i64, print_form::scalar), [](auto& s) { s.push_back(-4200000000LL); }},
    {"unsigned", print_desc(print_kind::u32, print_form::scalar), [](auto& s) { s.push_back(42u); }},
    {"u8", print_desc(print_kind::u8, print_form::scalar), [](auto& s) { s.push_back(static_cast<unsigned char>(200)); }},
    {"u16", print_desc(print_kind::u16, print_form::scalar), [](auto& s) { s.push_back(static_cast<std::uint16_t>(7)); }},
    {"char", print_desc(print_kind::character, print_form::scalar), [](auto& s) { s.push_back('a'); }},
    {"bool", print_desc(print_kind::boolean, print_form::scalar), [](auto& s) { s.push_back(true); }},
    {"float", print_desc(print_kind::f32, print_form::scalar), [](auto& s) { s.push_back(1.5f); }},
    {"double", print_desc(print_kind::f64, print_form::scalar), [](auto& s) { s.push_back(-2.25); }},
    {"pointer", print_desc(print_kind::pointer, print_form::scalar), [](auto& s) { s.push_back(static_cast<const void*>(&range_ints)); }},
    {"string", str, [](auto& s) { s.push_back(fmt::string_view("abc")); }},
    {"char array", print_desc(print_kind::character, print_form::array, 4), [](auto& s) { s.push_back(fmt::string_view("abc")); }},
    {"int range", print_desc(print_kind::i32, print_form::array, 3), [](auto& s) { s.push_back(std::span<const int>(range_ints)); }},
    {"double range", print_desc(print_kind::f64, print_form::span), [](auto& s) { s.push_back(std::span<const double>(range_doubles)); }},
    {"bool range", print_desc(print_kind::boolean, print_form::span), [](auto& s) { s.push_back(std::span<const bool>(range_bools)); }},
};

const char* const specs[] = {
    "", "d", "x", "X", "b", "B", "o", "c", "s", "p", "e", "E", "f", "F", "g", "G", "a", "A", "?", "L", "Ld", "Lf", "Ls", "Lp",
    "+", "-", " ", "#", "0", "08", "+08", "#x", "#o", "#b", "#s", "#p", "5", "<5", ">5", "^5", "*^9", "x<", "q<5", "0<5d", "<05",
    ".3", ".0", ".3f", "8.3f", "+.3e", ".2s", "10s", "0s", "+s", "#c", "+c", "0c", "5c", "+d", "#d", "0p", "+p", ".3p", "10p",
    "{}", ".{}", "{}.{}f", "{}.{}", "{1}", "%", "z", "dd", "L.3", "<", ".", ".f", "+d5", "é<5", "é^7s",
    // ranges
    "n", ":x", "n:x", ":#x", ":.2f", ":>6", "n:>6", "::", ":{}", "nx", ":d", ":s", ":+", "x:",
    // '}' as a fill (fmt refuses only '{'), lead bytes fmt reads as one-byte fills, numbers past INT_MAX
    "}<5", "}^7", "}>", "\xf8<5", "\xff>5", "\xf8", "2147483648", ".2147483648f", "99999999999", ":2147483648",
    "\xe2<", "\xf0<5", "000000000005", ".00000000001f", "0000000005", ".0000000001f",
};
}  // namespace

TEST_CASE("the checker agrees with fmt on every spec for every argument kind") {
  int mismatches = 0;
  for (const sample& smp : samples) {
    for (const char* spec : specs) {
      const std::string f = std::string("{:") + spec + "}";
      // Arguments 1 and 2 are integers for a dynamic width and precision.
      const std::uint32_t descs[] = {smp.desc, i32, i32};
      const print_check verdict = check_print_format(f.data(), f.size(), descs, 3).code;
      const bool ours = verdict == print_check::ok || verdict == print_check::unused_argument;
      fmt::dynamic_format_arg_store<fmt::format_context> store;
      smp.push(store);
      store.push_back(7);
      store.push_back(2);
      bool theirs = true;
      std::string out;
      try {
        out = fmt::vformat(f, store);
      } catch (const fmt::format_error& e) {
        theirs = false;
        out = e.what();
      }
      if (ours != theirs) {
        ++mismatches;
        UNSCOPED_INFO(smp.name << " " << f << ": checker says " << print_check_text(verdict) << ", fmt says "
                               << (theirs ? "ok: " : "error: ") << out);
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("format-level errors") {
  STATIC_REQUIRE(check("{} {}", {i32, f64}) == print_check::ok);
  STATIC_REQUIRE(check("no fields", {}) == print_check::ok);
  STATIC_REQUIRE(check("{{}} {{", {}) == print_check::ok);
  STATIC_REQUIRE(check("{{{}}}", {i32}) == print_check::ok);
  STATIC_REQUIRE(check("{1} {0} {1}", {i32, f64}) == print_check::ok);
  STATIC_REQUIRE(check("{}", {}) == print_check::missing_argument);
  STATIC_REQUIRE(check("{} {} {}", {i32, i32}) == print_check::missing_argument);
  STATIC_REQUIRE(check("{2}", {i32, i32}) == print_check::missing_argument);
  STATIC_REQUIRE(check("{}", {i32, i32}) == print_check::unused_argument);
  STATIC_REQUIRE(check("{1}", {i32, i32}) == print_check::unused_argument);
  STATIC_REQUIRE(check("a } b", {}) == print_check::unmatched_close);
  STATIC_REQUIRE(check("a { b", {}) == print_check::bad_spec);
  STATIC_REQUIRE(check("{", {}) == print_check::unclosed_field);
  STATIC_REQUIRE(check("{:", {i32}) == print_check::unclosed_field);
  STATIC_REQUIRE(check("{0", {i32}) == print_check::unclosed_field);
  STATIC_REQUIRE(check("{x}", {i32}) == print_check::named_argument);
  STATIC_REQUIRE(check("{} {0}", {i32}) == print_check::mixed_indexing);
  STATIC_REQUIRE(check("{0} {}", {i32}) == print_check::mixed_indexing);
  STATIC_REQUIRE(check("{:{}}", {i32, f64}) == print_check::width_not_integer);
  STATIC_REQUIRE(check("{:{}}", {i32, str}) == print_check::width_not_integer);
  STATIC_REQUIRE(check("{:.{}f}", {f64, i32}) == print_check::ok);
  STATIC_REQUIRE(check("{:.3}", {i32}) == print_check::spec_precision);
  STATIC_REQUIRE(check("{:x}", {f64}) == print_check::spec_type);
  STATIC_REQUIRE(check("{:d}", {str}) == print_check::spec_type);
  STATIC_REQUIRE(check("{:+}", {str}) == print_check::spec_sign);
  STATIC_REQUIRE(check("{::{}}", {print_desc(print_kind::i32, print_form::span), i32}) == print_check::ok);
  STATIC_REQUIRE(check("{::{}}", {print_desc(print_kind::i32, print_form::span), f64}) == print_check::width_not_integer);
  // Stricter than fmt, on purpose (print.md): '}' as the fill of a range's element spec, which the
  // host's range printer ends at the first '}'. As a scalar's fill it is fmt's.
  STATIC_REQUIRE(check("{::}<5}", {print_desc(print_kind::i32, print_form::span)}) != print_check::ok);
  STATIC_REQUIRE(check("{:n:}>4}", {print_desc(print_kind::i32, print_form::span)}) != print_check::ok);
  STATIC_REQUIRE(check("{:}<5}", {i32}) == print_check::ok);
}

TEST_CASE("the checker names the arguments used as a dynamic width or precision") {
  STATIC_REQUIRE(width_arguments("{} {:5.2f}", {i32, f64}) == 0);
  STATIC_REQUIRE(width_arguments("{:{}}", {i32, i32}) == 0b10);
  STATIC_REQUIRE(width_arguments("{:{}.{}f}", {f64, i32, i32}) == 0b110);
  STATIC_REQUIRE(width_arguments("{1:{0}} {1:{2}}", {i32, i32, i32}) == 0b101);
  STATIC_REQUIRE(width_arguments("{::{}}", {print_desc(print_kind::i32, print_form::span), i32}) == 0b10);
  STATIC_REQUIRE(width_arguments("{{:{}}} {}", {i32}) == 0);  // escaped braces are text
}

TEST_CASE("format-level cases agree with fmt too") {
  struct c {
    const char* f;
    int nargs;
  };
  for (c x : {c{"{} {}", 2}, c{"{{}} {{", 0}, c{"{1} {0}", 2}, c{"{}", 0}, c{"{2}", 2}, c{"a } b", 0}, c{"{", 0},
              c{"{:", 1}, c{"{0", 1}, c{"{x}", 1}, c{"{} {0}", 1}, c{"{0} {}", 1}, c{"{00}", 1}, c{"{01}", 2},
              c{"{ }", 1}, c{"{0 }", 1}, c{"{-1}", 1}, c{"}}{{", 0}, c{"{}}", 1},
              // fmt reads the '}' after "{:" as a fill when an alignment follows: a field, not text
              c{"{:}<br>", 1}, c{"{:}^_^", 1}, c{"{:}>5}", 1}, c{"[{:}<3}]", 1}, c{"{:}", 1}, c{"{:}}", 1}}) {
    const std::string f = x.f;
    std::vector<std::uint32_t> descs(static_cast<std::size_t>(x.nargs), i32);
    const print_check verdict = check_print_format(f.data(), f.size(), descs.data(), descs.size()).code;
    fmt::dynamic_format_arg_store<fmt::format_context> store;
    for (int i = 0; i < x.nargs; ++i) store.push_back(i);
    bool theirs = true;
    try {
      (void)fmt::vformat(f, store);
    } catch (const fmt::format_error&) {
      theirs = false;
    }
    INFO(f << ": checker says " << print_check_text(verdict));
    // fmt ignores unused arguments; devtap::print refuses them (a likely mistake), nothing else.
    CHECK((verdict == print_check::ok || verdict == print_check::unused_argument) == theirs);
  }
}

TEST_CASE("argument descriptors") {
  enum class small : std::int16_t { a };
  STATIC_REQUIRE(print_arg_desc<int>() == print_desc(print_kind::i32, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<long>() == print_desc(print_kind::i64, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<unsigned long long>() == print_desc(print_kind::u64, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<signed char>() == print_desc(print_kind::i8, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<char>() == print_desc(print_kind::character, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<bool>() == print_desc(print_kind::boolean, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<small>() == print_desc(print_kind::i16, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<const float*>() == print_desc(print_kind::pointer, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<std::nullptr_t>() == print_desc(print_kind::pointer, print_form::scalar));
  STATIC_REQUIRE(print_arg_desc<double[5]>() == print_desc(print_kind::f64, print_form::array, 5));
  STATIC_REQUIRE(print_arg_desc<std::array<std::uint8_t, 16>>() == print_desc(print_kind::u8, print_form::array, 16));
  STATIC_REQUIRE(print_arg_desc<std::span<float>>() == print_desc(print_kind::f32, print_form::span));
  STATIC_REQUIRE(print_arg_desc<std::span<const int, 4>>() == print_desc(print_kind::i32, print_form::span));
  STATIC_REQUIRE(print_arg_desc<std::string_view>() == print_desc(print_kind::character, print_form::span));
  STATIC_REQUIRE(print_arg_check<const char*>() == print_check::char_pointer);
  STATIC_REQUIRE(print_arg_check<long double>() == print_check::long_double);
  STATIC_REQUIRE(print_arg_check<char8_t>() == print_check::wide_char);
  STATIC_REQUIRE(print_arg_check<int[2][2]>() == print_check::nested_array);
  STATIC_REQUIRE(print_arg_check<std::string>() == print_check::unsupported_type);
  STATIC_REQUIRE(print_arg_check<std::vector<int>>() == print_check::unsupported_type);
  STATIC_REQUIRE(print_arg_check<int()>() == print_check::function_argument);  // a function's name
  STATIC_REQUIRE(print_arg_check<int (*)()>() == print_check::ok);             // its address
  // volatile: a scalar is read once as a plain value; arrays and spans travel as raw bytes
  STATIC_REQUIRE(print_arg_check<volatile int>() == print_check::ok);
  STATIC_REQUIRE(print_arg_check<volatile int[2]>() == print_check::volatile_elements);
  STATIC_REQUIRE(print_arg_check<std::array<volatile int, 2>>() == print_check::volatile_elements);
  STATIC_REQUIRE(print_arg_check<volatile std::array<int, 2>>() == print_check::volatile_elements);
  STATIC_REQUIRE(print_arg_check<std::span<volatile int>>() == print_check::volatile_elements);
  STATIC_REQUIRE(print_arg_check<volatile std::string_view>() == print_check::volatile_elements);
  // every std::nullptr_t is null: arrays and spans of them would send whatever bytes they hold
  STATIC_REQUIRE(print_arg_check<std::nullptr_t>() == print_check::ok);
  STATIC_REQUIRE(print_arg_check<std::nullptr_t[2]>() == print_check::null_elements);
  STATIC_REQUIRE(print_arg_check<std::array<std::nullptr_t, 2>>() == print_check::null_elements);
  STATIC_REQUIRE(print_arg_check<std::span<const std::nullptr_t>>() == print_check::null_elements);
  // the record is built on the stack: 64 KiB of fixed-size arguments in all
  STATIC_REQUIRE(print_arg_check<std::array<char, 1u << 16>>() == print_check::ok);
  STATIC_REQUIRE(print_arg_check<std::array<char, (1u << 16) + 1>>() == print_check::too_long);
  STATIC_REQUIRE(print_args_check<std::array<char, (1u << 16) - 16>, int, double>() == print_check::ok);
  STATIC_REQUIRE(print_args_check<std::array<char, (1u << 16) - 15>, int, double>() == print_check::too_long);
}

constexpr char padded_format[12] = "step {}";  // NULs after the text
constexpr char exact_format[8] = "step {}";
TEST_CASE("a char-array format must end with its NUL right after its text") {
  STATIC_REQUIRE(print_signature<padded_format, int>::check.code == print_check::unterminated_format);
  STATIC_REQUIRE(print_signature<exact_format, int>::check.code == print_check::ok);
  STATIC_REQUIRE(print_signature<"", int>::check.code != print_check::unterminated_format);  // (empty: unused_argument)
}

TEST_CASE("every verdict has its own message (the compile error and the host's error line)") {
  std::vector<std::string> seen;
  for (unsigned c = 1; c <= static_cast<unsigned>(print_check::function_argument); ++c) {
    const std::string text = print_check_text(static_cast<print_check>(c));
    INFO(c << ": " << text);
    CHECK(text != "?");
    CHECK(std::find(seen.begin(), seen.end(), text) == seen.end());
    seen.push_back(text);
  }
  CHECK(seen.size() == 26);
}

TEST_CASE("format ids are pinned (nvcc's device pass computes the same)") {
#define DEVTAP_CHECK_PRINT_ID(F, ID, ...) STATIC_REQUIRE(print_signature<F, __VA_ARGS__>::id == ID);
  DEVTAP_PRINT_ID_CASES(DEVTAP_CHECK_PRINT_ID)
  // different argument types make a different id: the host decodes by them
  STATIC_REQUIRE(print_signature<"{}", int>::id != print_signature<"{}", unsigned>::id);
  STATIC_REQUIRE(print_signature<"{}", int>::id != print_signature<"{} ", int>::id);
}

TEST_CASE("record layout: fixed-size arguments at their alignment, spans counted apart") {
  using sig = print_signature<"{} {} {} {} {}", char, double, std::span<const int>, std::uint16_t, std::array<char, 3>>;
  STATIC_REQUIRE(sig::layout.offsets[0] == 0);
  STATIC_REQUIRE(sig::layout.offsets[1] == 8);
  STATIC_REQUIRE(sig::layout.offsets[2] == 0);  // the first span
  STATIC_REQUIRE(sig::layout.offsets[3] == 16);
  STATIC_REQUIRE(sig::layout.offsets[4] == 18);
  STATIC_REQUIRE(sig::arg_bytes == 24);
  STATIC_REQUIRE(sig::span_count == 1);
  STATIC_REQUIRE(sig::def_bytes == print_def_bytes(14, 5));
  STATIC_REQUIRE(sizeof(print_record<0>) == 32);
  STATIC_REQUIRE(std::is_trivially_copyable_v<print_record<24>>);
  STATIC_REQUIRE(!std::is_aggregate_v<print_record<24>>);  // sent raw, never reflected on
  STATIC_REQUIRE(std::is_trivially_copyable_v<devtap::printer>);
  STATIC_REQUIRE(std::is_trivially_copyable_v<devtap::print_point>);
}

TEST_CASE("a print record decodes as the std::span<const std::byte> the printer's consumer takes") {
  // The device side builds the record as a raw struct (or a tuple with spans); the receiver decodes
  // the payload as std::span<const std::byte>: the two encodings must be the same bytes.
  print_record<8> rec;
  rec.head.count = sizeof(rec) - 8;
  rec.head.id = 99;
  rec.head.arg_bytes = 8;
  alignas(8) std::byte buf[64]{};
  devtap::detail::encode(rec, buf);
  std::span<const std::byte> view;
  REQUIRE(devtap::detail::decode(buf, devtap::detail::encoded_size(rec), view));
  CHECK(view.size() == sizeof(rec) - 8);
  CHECK(view.data() == buf + 8);

  const int xs[3] = {1, 2, 3};
  std::tuple<print_record<0>, std::span<const int>> with_span;
  std::get<0>(with_span).head.count = 32 - 8 + 8 + 16;
  std::get<1>(with_span) = std::span<const int>(xs);
  const std::size_t n = devtap::detail::encoded_size(with_span);
  CHECK(n == 32 + 8 + 16);
  devtap::detail::encode(with_span, buf);
  REQUIRE(devtap::detail::decode(buf, n, view));
  CHECK(view.size() == n - 8);
}

TEST_CASE("parse_print_record refuses what does not add up, never reading past the end") {
  alignas(8) std::byte buf[128]{};
  CHECK(parse_print_record(buf, 8).error != nullptr);  // shorter than the head
  auto put32 = [&](std::size_t at, std::uint32_t v) { std::memcpy(buf + at, &v, 4); };
  put32(8, 0);
  put32(12, 0);
  put32(16, 16);  // arg bytes past the end of a 32-byte view
  CHECK(parse_print_record(buf, 32).error != nullptr);
  put32(16, 8);
  CHECK(parse_print_record(buf, 32).error == nullptr);
  put32(8, 4);  // an unknown flag
  CHECK(parse_print_record(buf, 32).error != nullptr);
  put32(8, print_has_definition);  // a definition flag without a definition
  CHECK(parse_print_record(buf, 32).error != nullptr);
  put32(12, 16);  // a definition whose sizes do not add up
  put32(16, 0);
  put32(24, 100);
  put32(28, 1);
  CHECK(parse_print_record(buf, 40).error != nullptr);
  put32(24, 3);  // text 3 bytes, one argument: 8 + 4 + 3 -> 16
  CHECK(parse_print_record(buf, 40).error == nullptr);
  CHECK(parse_print_record(buf, 40).def_nargs == 1);
}
