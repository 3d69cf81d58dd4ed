// The trace files' JSON writer (detail/json.hpp): its strings byte for byte against nlohmann-json's
// dump with error_handler_t::replace, its numbers and values parsed back by nlohmann.
#include <devtap/detail/json.hpp>
#include <devtap/tap/json_value.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>

namespace dd = devtap::detail;
using nlohmann::json;

namespace {

std::string reference(std::string_view s) {
  return json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string escaped(std::string_view s) {
  std::string out;
  dd::append_json_string(out, s);
  return out;
}

std::string hex(std::string_view s) {
  std::string h;
  for (unsigned char c : s) {
    h += "0123456789abcdef"[c >> 4];
    h += "0123456789abcdef"[c & 15];
    h += ' ';
  }
  return h;
}

// Compares many strings without one Catch assertion each; keeps the first difference to show.
struct comparison {
  std::size_t checked = 0, mismatches = 0;
  std::string first;
  void operator()(std::string_view s) {
    ++checked;
    const std::string mine = escaped(s), theirs = reference(s);
    if (mine != theirs && mismatches++ == 0) {
      first = "input " + hex(s) + "\n mine   " + hex(mine) + "\n nlohmann " + hex(theirs);
    }
  }
};

#define CHECK_NO_MISMATCH(cmp)    \
  do {                            \
    INFO((cmp).first);            \
    CHECK((cmp).checked > 0);     \
    CHECK((cmp).mismatches == 0); \
  } while (false)

std::string utf8(char32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// A byte biased towards what UTF-8 decoding cares about: leads, continuations, the edges of
// the second byte's ranges, and what needs escaping.
unsigned char biased_byte(std::mt19937_64& rng) {
  static constexpr unsigned char edges[] = {0x00, 0x1F, 0x20, 0x22, 0x5C, 0x7F, 0x80, 0x8F, 0x90,
                                            0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED,
                                            0xEF, 0xF0, 0xF4, 0xF5, 0xFF};
  switch (rng() % 8) {
    case 0: return static_cast<unsigned char>(0x20 + rng() % 0x5F);  // printable ASCII
    case 1: return edges[rng() % std::size(edges)];
    case 2: return static_cast<unsigned char>(rng() % 0x20);         // control
    case 3:
    case 4: return static_cast<unsigned char>(0x80 + rng() % 0x40);  // continuation
    case 5:
    case 6: return static_cast<unsigned char>(0xC0 + rng() % 0x38);  // lead (and C0/C1, F5..F7)
    default: return static_cast<unsigned char>(rng());
  }
}

}  // namespace

TEST_CASE("json strings: fixed expectations", "[json]") {
  CHECK(escaped("") == "\"\"");
  CHECK(escaped(std::string_view("a\0b", 3)) == "\"a\\u0000b\"");
  CHECK(escaped("\"\\/\b\f\n\r\t\x1f\x7f") == "\"\\\"\\\\/\\b\\f\\n\\r\\t\\u001f\x7f\"");
  CHECK(escaped("\xC3\xA9\xF0\x9F\x98\x80") == "\"\xC3\xA9\xF0\x9F\x98\x80\"");
  // One U+FFFD per maximal valid prefix, then decoding starts again at the byte that broke it.
  CHECK(escaped("\x80") == "\"\xEF\xBF\xBD\"");
  CHECK(escaped("\xE0\x80") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\"");  // E0 80 is overlong: two
  CHECK(escaped("\xE1\x80") == "\"\xEF\xBF\xBD\"");              // truncated at the end: one
  CHECK(escaped("\xF0\x90\x80" "A") == "\"\xEF\xBF\xBD" "A\"");
  CHECK(escaped("\xED\xA0\x80") == "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\"");  // a surrogate
  std::string out = "x";
  dd::append_json_string(out, "y");
  CHECK(out == "x\"y\"");  // appends
}

TEST_CASE("json strings: all 1- and 2-byte strings match nlohmann", "[json]") {
  comparison cmp;
  for (unsigned a = 0; a < 256; ++a) cmp(std::string(1, static_cast<char>(a)));
  for (unsigned a = 0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; ++b) {
      const char s[] = {static_cast<char>(a), static_cast<char>(b)};
      cmp(std::string_view(s, 2));
    }
  }
  CHECK_NO_MISMATCH(cmp);
}

// valid_utf8 (field names are checked with it at compile time) says yes exactly where the writer
// keeps the bytes as they are, U+FFFD itself aside.
TEST_CASE("json strings: valid_utf8 agrees with what the writer replaces", "[json]") {
  static_assert(dd::valid_utf8("") && dd::valid_utf8("plain") && dd::valid_utf8("\xC3\xA9t\xC3\xA9"));
  static_assert(!dd::valid_utf8("\xFF") && !dd::valid_utf8("a\xC3") && !dd::valid_utf8("\xED\xA0\x80"));
  const auto kept = [](std::string_view s) { return escaped(s).find("\xEF\xBF\xBD") == std::string::npos; };
  std::size_t checked = 0;
  std::string first_disagreement;
  for (unsigned a = 0; a < 256; ++a)
    for (unsigned b = 0; b < 256; ++b)
      for (unsigned char c : {0x41, 0x80, 0x9F, 0xA0, 0xBF, 0xC0}) {
        const char s[] = {static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)};
        for (std::size_t n = 1; n <= 3; ++n, ++checked) {
          const std::string_view v(s, n);
          if (dd::valid_utf8(v) != kept(v) && first_disagreement.empty())
            first_disagreement = std::to_string(a) + " " + std::to_string(b) + " " + std::to_string(c) + ", length " +
                                 std::to_string(n);
        }
      }
  CHECK(first_disagreement == "");
  CHECK(checked > 100000);
}

// Bytes at every boundary of UTF-8's classes (ASCII, continuation ranges, lead bytes).
constexpr unsigned char interesting_bytes[] = {0x00, 0x22, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0,
                                               0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xFF};

// Sizes kept so that the sanitized CI builds run this in seconds: the lead byte and the byte after
// it exhaustively, the third over the boundary bytes (which is what decides a third byte's fate).
TEST_CASE("json strings: 3-byte strings from every lead byte match nlohmann", "[json]") {
  comparison cmp;
  for (unsigned a = 0xC0; a < 256; ++a) {
    for (unsigned b = 0; b < 256; ++b) {
      for (unsigned char c : interesting_bytes) {
        const char s[] = {static_cast<char>(a), static_cast<char>(b), static_cast<char>(c)};
        cmp(std::string_view(s, 3));
      }
    }
  }
  CHECK(cmp.checked == 64u * 256 * std::size(interesting_bytes));
  CHECK_NO_MISMATCH(cmp);
}

TEST_CASE("json strings: 4-byte strings over the interesting bytes match nlohmann", "[json]") {
  constexpr auto& alphabet = interesting_bytes;
  constexpr std::size_t k = std::size(alphabet);
  comparison cmp;
  for (std::size_t len : {4u}) {
    std::size_t total = 1;
    for (std::size_t j = 0; j < len; ++j) total *= k;
    for (std::size_t code = 0; code < total; ++code) {
      char s[5];
      for (std::size_t j = 0, c = code; j < len; ++j, c /= k) s[j] = static_cast<char>(alphabet[c % k]);
      cmp(std::string_view(s, len));
    }
  }
  CHECK_NO_MISMATCH(cmp);
}

TEST_CASE("json strings: random byte strings match nlohmann", "[json]") {
  std::mt19937_64 rng(20240611);
  comparison cmp;
  std::string s;
  for (int n = 0; n < 200000; ++n) {
    s.resize(rng() % 13);
    for (char& c : s) c = static_cast<char>(biased_byte(rng));
    cmp(s);
  }
  // Long ones too: nlohmann flushes its 512-byte buffer mid-string, the writer appends in runs.
  for (int n = 0; n < 2000; ++n) {
    s.resize(rng() % 3000);
    const bool mostly_ascii = n % 2 == 0;
    for (char& c : s) {
      c = static_cast<char>(mostly_ascii && rng() % 16 != 0 ? 0x20 + rng() % 0x5F : biased_byte(rng));
    }
    cmp(s);
  }
  CHECK_NO_MISMATCH(cmp);
}

TEST_CASE("json strings: valid UTF-8 of every plane passes through", "[json]") {
  comparison cmp;
  std::size_t not_passed = 0;
  std::size_t compared = 0;
  for (char32_t cp = 0x20; cp <= 0x10FFFF; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == '"' || cp == '\\') continue;
    const std::string s = "a" + utf8(cp) + "b";
    if (cp < 0x800 || cp % 61 == 0 || (cp & 0xFFFF) < 2 || (cp & 0xFFFF) > 0xFFFD) {  // nlohmann: a sample
      cmp(s);
      ++compared;
    }
    if (escaped(s) != "\"" + s + "\"") ++not_passed;  // every code point passes through unchanged
  }
  CHECK(cmp.checked == compared);
  CHECK(not_passed == 0);
  CHECK_NO_MISMATCH(cmp);
}

namespace {

template <class F>
bool same_bits(F a, F b) {
  return std::bit_cast<std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>>(a) ==
         std::bit_cast<std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>>(b);
}

template <class T>
std::string number(T v) {
  std::string out;
  dd::append_json_number(out, v);
  return out;
}

// Writes v, parses it back with nlohmann; counts values that do not come back bit for bit.
template <class F>
struct round_trip {
  std::size_t checked = 0, mismatches = 0;
  std::string first;
  void operator()(F v) {
    ++checked;
    const std::string text = number(v);
    const json j = json::parse(text);
    const F back = static_cast<F>(j.get<double>());
    if ((!j.is_number_float() || !same_bits(back, v)) && mismatches++ == 0) {
      first = text + " read back as " + j.dump();
    }
  }
};

}  // namespace

TEST_CASE("json numbers: floating values parse back to the same bits", "[json]") {
  std::mt19937_64 rng(7);
  round_trip<double> doubles;
  round_trip<float> floats;
  using dl = std::numeric_limits<double>;
  using fl = std::numeric_limits<float>;
  for (double v : {0.0, -0.0, 1.0, -1.0, 0.1, 1e23, 1e300, dl::max(), dl::lowest(), dl::min(),
                   dl::denorm_min(), -dl::denorm_min(), dl::epsilon(), 9007199254740993.0}) {
    doubles(v);
  }
  for (float v : {0.0f, -0.0f, 1.0f, 0.1f, 3e38f, fl::max(), fl::lowest(), fl::min(), fl::denorm_min(),
                  -fl::denorm_min(), fl::epsilon(), 16777217.0f}) {
    floats(v);
  }
  for (int n = 0; n < 200000; ++n) {
    const auto d = std::bit_cast<double>(rng());
    if (std::isfinite(d)) doubles(d);
    // Subnormals are 1 in 2048 random patterns: draw some on purpose.
    doubles(std::bit_cast<double>(rng() & 0x800FFFFFFFFFFFFFull));
    const auto f = std::bit_cast<float>(static_cast<std::uint32_t>(rng()));
    if (std::isfinite(f)) floats(f);
    floats(std::bit_cast<float>(static_cast<std::uint32_t>(rng()) & 0x807FFFFFu));
  }
  {
    INFO(doubles.first);
    CHECK(doubles.mismatches == 0);
  }
  {
    INFO(floats.first);
    CHECK(floats.mismatches == 0);
  }
  CHECK(number(1.0) == "1.0");
  CHECK(number(-0.0) == "-0.0");
  CHECK(number(1e100) == "1e+100");
}

TEST_CASE("json numbers: integer limits, bool, NaN and infinities", "[json]") {
  using i64 = std::numeric_limits<std::int64_t>;
  using u64 = std::numeric_limits<std::uint64_t>;
  CHECK(json::parse(number(i64::min())).get<std::int64_t>() == i64::min());
  CHECK(json::parse(number(i64::max())).get<std::int64_t>() == i64::max());
  CHECK(json::parse(number(u64::max())).get<std::uint64_t>() == u64::max());
  CHECK(json::parse(number(u64::max())).is_number_unsigned());
  CHECK(number(std::int8_t{-128}) == "-128");
  CHECK(number(static_cast<unsigned char>(255)) == "255");
  CHECK(number('A') == "65");
  CHECK(number(u'\xFFFF') == "65535");
  CHECK(number(true) == "true");
  CHECK(number(false) == "false");
  for (double v : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                   -std::numeric_limits<double>::infinity()}) {
    CHECK(number(v) == "null");
    CHECK(number(static_cast<float>(v)) == "null");
    CHECK(json(v).dump() == "null");  // what nlohmann writes too
  }
}

#if defined(__SIZEOF_INT128__)
TEST_CASE("json numbers: 128-bit integers are written in full", "[json]") {
  // std::to_chars takes no 128-bit integer: they were cut to 64 bits (-std=gnu++20) or written as
  // null (-std=c++20). The writer is the same in both modes; this file checks the mode CI builds.
  const auto text = [](auto v) {
    std::string out;
    dd::append_json_value(out, v);
    return out;
  };
  const dd::uint128 max = ~dd::uint128{0};
  const dd::int128 min = static_cast<dd::int128>(dd::uint128{1} << 127);
  CHECK(text(max) == "340282366920938463463374607431768211455");
  CHECK(text(min) == "-170141183460469231731687303715884105728");
  CHECK(text(static_cast<dd::int128>(max >> 1)) == "170141183460469231731687303715884105727");
  CHECK(text(dd::uint128{1} << 100) == "1267650600228229401496703205376");
  CHECK(text((dd::uint128{1} << 64) + 5) == "18446744073709551621");
  CHECK(text(dd::int128{0}) == "0");
  CHECK(text(dd::int128{-1}) == "-1");
  CHECK(text(dd::uint128{9}) == "9");
  CHECK(text(dd::uint128{10}) == "10");
  enum class wide_enum : dd::uint128 { big = dd::uint128{1} << 100 };  // through its underlying type
  CHECK(text(wide_enum::big) == "1267650600228229401496703205376");
  std::string args;  // as a trace event's args: a field of a tapped tuple
  dd::append_json_args(args, std::tuple<dd::int128, int>{-(dd::int128{1} << 80), 2});
  CHECK(args == R"({"0":-1208925819614629174706176,"1":2})");
}
#endif

namespace {

enum class color : std::uint8_t { red = 1, green = 7 };
struct inner {
  std::int16_t a;
  double b;
};
struct event {
  int i;
  float f;
  std::span<const char> name;
  inner in;
  std::array<int, 3> arr;
  color c;
  std::span<const int> many;
};
struct labelled {
  char label[8];
  std::array<char, 3> tag;
  const int* ptr;
  bool flag;
};
class opaque {
  int a_ = 0, b_ = 0;

 public:
  int sum() const { return a_ + b_; }
};

template <class T>
json value(const T& v) {
  std::string out;
  dd::append_json_value(out, v);
  return json::parse(out);
}

template <class T>
json args(const T& v) {
  std::string out;
  dd::append_json_args(out, v);
  return json::parse(out);
}

}  // namespace

// Named fields (devtap::field_names): the specializations sit outside the anonymous namespace's
// types' scope, in devtap's, as a user writes them.
namespace named {
struct point {
  float x;
  float y;
};
struct step {
  int sequence;  // "sequence" is taken at the top level only: a nested type may use it
  point where;
};
struct sample {
  long step_no;
  step inner;
  std::array<point, 2> corners;
  std::pair<int, int> range;  // unnamed: an array
};
using span_pair = std::tuple<int, double>;
}  // namespace named

template <>
struct devtap::field_names<named::point> {
  static constexpr std::array names{"x", "y \"quoted\" \xC3\xA9"};  // escaped as any JSON string
};
template <>
struct devtap::field_names<named::step> {
  static constexpr std::string_view names[] = {"sequence", "where"};
};
template <>
struct devtap::field_names<named::sample> {
  static constexpr std::array names{"step_no", "inner", "corners", "range"};
};
template <>
struct devtap::field_names<named::span_pair> {
  static constexpr std::array names{"count", "mean"};
};

TEST_CASE("json values: devtap::field_names keys the args and nested objects", "[json]") {
  const named::sample v{7, {3, {1.5f, -2.0f}}, {{{0, 1}, {2, 3}}}, {4, 5}};
  const json j = args(v);
  INFO(j.dump());
  const json pt = {{"x", 1.5}, {"y \"quoted\" \xC3\xA9", -2.0}};
  CHECK(j == json{{"step_no", 7},
                  {"inner", {{"sequence", 3}, {"where", pt}}},
                  {"corners", json::array({json{{"x", 0.0}, {"y \"quoted\" \xC3\xA9", 1.0}},
                                           json{{"x", 2.0}, {"y \"quoted\" \xC3\xA9", 3.0}}})},
                  {"range", {4, 5}}});
  CHECK(args(named::span_pair{2, 0.25}) == json{{"count", 2}, {"mean", 0.25}});
  CHECK(value(named::span_pair{2, 0.25}) == json{{"count", 2}, {"mean", 0.25}});  // nested: an object too
  CHECK(args(std::make_tuple(1, 2)) == json{{"0", 1}, {"1", 2}});  // other tuples keep their positions
}

TEST_CASE("json values: an aggregate's args", "[json]") {
  std::array<int, 100> ints{};
  for (int k = 0; k < 100; ++k) ints[static_cast<std::size_t>(k)] = k * 3 - 50;
  const std::string_view text = "kernel \"x\"\n\xFF";
  const event e{-42, 0.1f, {text.data(), text.size()}, {-7, 2.5}, {1, 2, 3}, color::green, ints};

  const json j = args(e);
  REQUIRE(j.is_object());
  CHECK(j.size() == 7);
  CHECK(j["0"] == -42);
  CHECK(static_cast<float>(j["1"].get<double>()) == 0.1f);
  CHECK(j["2"] == "kernel \"x\"\n\xEF\xBF\xBD");
  CHECK(j["3"] == json::array({-7, 2.5}));
  CHECK(j["4"] == json::array({1, 2, 3}));
  CHECK(j["5"] == 7);
  const json& many = j["6"];
  REQUIRE(many.is_array());
  REQUIRE(many.size() == dd::json_span_limit + 1);
  for (std::size_t k = 0; k < dd::json_span_limit; ++k) CHECK(many[k] == ints[k]);
  CHECK(many.back() == "... 36 more");

  CHECK(value(e) == json::array({-42, j["1"], j["2"], j["3"], j["4"], 7, many}));
}

TEST_CASE("json values: spans, char arrays, tuples, scalars and opaque classes", "[json]") {
  std::array<double, 65> ds{};
  CHECK(value(std::span<const double>(ds.data(), 64)).size() == 64);  // no truncation element
  CHECK(value(std::span<const double>(ds)).back() == "... 1 more");
  CHECK(value(std::span<const double>()) == json::array());
  char chars[] = {'a', '\0', 'b'};
  CHECK(value(std::span<char>(chars)) == std::string("a\0b", 3));  // a span: all of it

  const labelled l{{'h', 'i', '\0', 'x'}, {'a', 'b', 'c'}, nullptr, true};
  CHECK(value(l) == json::array({"hi", "abc", nullptr, true}));  // char arrays: up to the NUL

  CHECK(value(std::make_tuple(1, 2.5, 'A')) == json::array({1, 2.5, 65}));
  CHECK(args(std::make_pair(color::red, false)) == json{{"0", 1}, {"1", false}});
  CHECK(value(std::array<std::pair<int, int>, 2>{{{1, 2}, {3, 4}}}) == json::parse("[[1,2],[3,4]]"));
  CHECK(args(5) == json{{"value", 5}});
  CHECK(args(std::array<int, 2>{8, 9}) == json{{"value", {8, 9}}});
  CHECK(args(std::numeric_limits<float>::quiet_NaN()) == json{{"value", nullptr}});
  CHECK(value(opaque{}) == "<8 bytes>");
  CHECK(args(opaque{}) == json{{"value", "<8 bytes>"}});
  int x = 0;
  CHECK(value(&x) == nullptr);
}
