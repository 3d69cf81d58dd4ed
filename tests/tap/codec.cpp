#include <devtap/tap/codec.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

using devtap::has_spans_v;
using devtap::tappable;
using devtap::detail::decode;
using devtap::detail::encode;
using devtap::detail::encoded_size;

namespace {

struct progress { std::uint32_t step; float loss; std::uint64_t tag; };
struct with_c_array { std::int32_t a[3]; float b; bool c; };
struct alignas(16) over_aligned { float x, y, z; };
enum class color : std::uint8_t { red = 1, blue = 7 };

struct record {
  std::int32_t id;
  std::span<const float> xs;
  double w;
  std::span<const char> name;
};
struct inner { std::uint8_t tag; std::span<const std::int16_t> v; };
struct outer {
  inner a;
  std::array<std::span<const std::int32_t>, 2> pair_of_spans;
  std::tuple<std::uint16_t, std::span<const double>> t;
  std::span<const std::uint8_t> c_array_of_spans[2];
  progress p;
};
struct complex_and_span { std::complex<float> c; std::span<const std::int32_t> s; char z; };
struct const_field_and_span { const std::int32_t id; std::span<const float> s; };
struct alignas(16) big_align_elem { float v[4]; };
struct bitfields { std::uint32_t lo : 4; std::uint32_t hi : 28; };

// Buffer of exactly `size` bytes (so ASan catches any read past it), 8-byte aligned.
struct exact_buffer {
  std::unique_ptr<std::byte[]> p;
  explicit exact_buffer(std::size_t size) : p(new std::byte[size]) {}
  std::byte* data() { return p.get(); }
};

// Encodes v, checks nothing past encoded_size was touched, returns the payload bytes.
template <class T>
std::vector<std::byte> encode_checked(const T& v) {
  const std::size_t n = encoded_size(v);
  std::vector<std::uint64_t> storage(n / 8 + 2, 0xcdcdcdcdcdcdcdcdull);
  auto* buf = reinterpret_cast<std::byte*>(storage.data());
  encode(v, buf);
  for (std::size_t i = n; i < storage.size() * 8; ++i) REQUIRE(buf[i] == std::byte{0xcd});
  return {buf, buf + n};
}

// Encodes into a fresh aligned buffer that `out`'s spans can keep viewing.
template <class T>
struct roundtrip {
  std::vector<std::uint64_t> storage;
  std::size_t size = 0;
  T out{};
  bool ok = false;
  explicit roundtrip(const T& v) {
    const auto bytes = encode_checked(v);
    size = bytes.size();
    storage.assign(size / 8 + 1, 0);
    std::memcpy(storage.data(), bytes.data(), size);
    ok = decode(data(), size, out);
  }
  const std::byte* data() const { return reinterpret_cast<const std::byte*>(storage.data()); }
  template <class E>
  bool inside(std::span<const E> s) const {
    const auto* b = reinterpret_cast<const std::byte*>(s.data());
    return b >= data() && b + s.size_bytes() <= data() + size;
  }
};

template <class T>
void check_raw(const T& v) {
  STATIC_REQUIRE(!has_spans_v<T>);
  STATIC_REQUIRE(encoded_size(T{}) == sizeof(T));
  roundtrip<T> r(v);
  REQUIRE(r.ok);
  CHECK(r.size == sizeof(T));
  CHECK(std::memcmp(&r.out, &v, sizeof(T)) == 0);
}

template <class E>
bool same(std::span<const E> a, const std::vector<E>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
}

constexpr std::size_t pad8(std::size_t n) { return (n + 7) / 8 * 8; }

}  // namespace

// ---- what is tappable ----------------------------------------------------------------------

static_assert(tappable<int> && tappable<double> && tappable<progress> && tappable<color>);
static_assert(tappable<with_c_array> && tappable<std::array<float, 4>> && tappable<int[3]>);
static_assert(tappable<const float*>);
static_assert(tappable<std::span<const float>> && tappable<std::span<const progress>>);
static_assert(tappable<record> && tappable<outer> && tappable<complex_and_span>);
static_assert(tappable<std::tuple<int, std::span<const int>>>);
static_assert(tappable<std::pair<std::span<const char>, double>>);
static_assert(!tappable<std::span<int>>, "a mutable span would send a bare pointer");
static_assert(!tappable<std::span<const int, 3>>, "only dynamic extent");
static_assert(!tappable<std::string> && !tappable<std::vector<int>>);
static_assert(!tappable<int&>);
static_assert(!tappable<std::tuple<int, std::string>>);
struct holds_mutable_span { int a; std::span<int> s; };
static_assert(!tappable<holds_mutable_span>);

static_assert(!has_spans_v<progress> && !has_spans_v<std::tuple<int, float>>);
static_assert(has_spans_v<record> && has_spans_v<outer> && has_spans_v<std::span<const int>>);
static_assert(has_spans_v<std::tuple<int, std::span<const int>>>);
static_assert(has_spans_v<std::span<const int>[2]>);

// ---- raw (hot) path ------------------------------------------------------------------------

TEST_CASE("scalars round-trip as their raw bytes", "[codec]") {
  check_raw<std::int8_t>(-5);
  check_raw<std::uint8_t>(250);
  check_raw<std::int16_t>(-30000);
  check_raw<std::uint16_t>(65000);
  check_raw<std::int32_t>(-123456789);
  check_raw<std::uint32_t>(4000000000u);
  check_raw<std::int64_t>(std::numeric_limits<std::int64_t>::min());
  check_raw<std::uint64_t>(std::numeric_limits<std::uint64_t>::max());
  check_raw<float>(3.25f);
  check_raw<double>(-1e300);
  check_raw<bool>(true);
  check_raw<char>('x');
  check_raw<color>(color::blue);
  static const int target = 1;
  check_raw<const int*>(&target);
}

TEST_CASE("trivially copyable structs and arrays round-trip as raw bytes", "[codec]") {
  check_raw(progress{42, 0.125f, 0xdeadbeefcafef00dull});
  STATIC_REQUIRE(encoded_size(progress{}) == 16);
  check_raw(with_c_array{{1, -2, 3}, 4.5f, true});
  check_raw(std::array<double, 4>{1.0, 2.0, -3.0, 4.5});
  check_raw(over_aligned{1.f, 2.f, 3.f});
  check_raw(bitfields{5, 123456});
  check_raw(std::array<progress, 3>{progress{1, 1.f, 1}, progress{2, 2.f, 2}, progress{3, 3.f, 3}});
}

TEST_CASE("raw decode accepts exactly sizeof(T) bytes", "[codec]") {
  alignas(8) std::byte buf[32] = {};
  progress p{};
  CHECK(decode(buf, 16, p));
  for (std::size_t n : {0, 1, 8, 15, 17, 24, 32}) CHECK_FALSE(decode(buf, n, p));
}

// ---- spans ---------------------------------------------------------------------------------

TEMPLATE_TEST_CASE("spans round-trip in place with padding to 8 bytes", "[codec]", std::uint8_t,
                   char, std::int16_t, std::int32_t, float, double, std::uint64_t, progress) {
  using E = TestType;
  for (std::size_t n : {0, 1, 2, 3, 5, 7, 8, 9, 16, 17, 100}) {
    std::vector<E> v(n);
    for (std::size_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<E, progress>) {
        v[i] = progress{static_cast<std::uint32_t>(i), 0.5f * static_cast<float>(i), i * 3};
      } else {
        v[i] = static_cast<E>(i * 7 + 1);
      }
    }
    const std::span<const E> s(v);
    CHECK(encoded_size(s) == 8 + pad8(n * sizeof(E)));
    roundtrip<std::span<const E>> r(s);
    REQUIRE(r.ok);
    CHECK(r.size == 8 + pad8(n * sizeof(E)));
    CHECK(same(r.out, v));
    CHECK(r.inside(r.out));  // a view into the payload, not a copy
    if (n != 0) CHECK(reinterpret_cast<const std::byte*>(r.out.data()) == r.data() + 8);
    std::uint64_t count = 0;
    std::memcpy(&count, r.data(), 8);
    CHECK(count == n);
    // Padding after the elements is zeroed: records are deterministic.
    for (std::size_t i = 8 + n * sizeof(E); i < r.size; ++i) CHECK(r.data()[i] == std::byte{0});
  }
}

TEST_CASE("empty and default spans round-trip", "[codec]") {
  roundtrip<std::span<const double>> r(std::span<const double>{});
  REQUIRE(r.ok);
  CHECK(r.size == 8);
  CHECK(r.out.empty());
}

// ---- tuples and aggregates -----------------------------------------------------------------

TEST_CASE("tuples without spans use the structured layout", "[codec]") {
  // std::tuple is not trivially copyable: parts at min(alignof, 8).
  using T = std::tuple<std::uint8_t, double, std::int16_t>;
  const T t{7, 2.5, -3};
  CHECK(encoded_size(t) == 18);  // u8 @0, double @8, i16 @16
  roundtrip<T> r(t);
  REQUIRE(r.ok);
  CHECK(r.size == 18);
  CHECK(r.out == t);
  const std::pair<std::int32_t, float> p{3, 4.5f};
  roundtrip<std::pair<std::int32_t, float>> rp(p);
  REQUIRE(rp.ok);
  CHECK(rp.size == 8);
  CHECK(rp.out == p);
}

TEST_CASE("tuples mixing values and spans", "[codec]") {
  const std::vector<std::int32_t> ints = {1, 2, 3};
  const std::string text = "hello";
  using T = std::tuple<std::uint8_t, std::span<const std::int32_t>, double, std::span<const char>>;
  const T t{9, ints, -0.5, std::span<const char>(text)};
  // u8 @0 | count @8 | 3 ints @16..28 pad to 32 | double @32 | count @40 | 5 chars @48 pad to 56
  CHECK(encoded_size(t) == 56);
  roundtrip<T> r(t);
  REQUIRE(r.ok);
  CHECK(r.size == 56);
  CHECK(std::get<0>(r.out) == 9);
  CHECK(same(std::get<1>(r.out), ints));
  CHECK(std::get<2>(r.out) == -0.5);
  CHECK(std::string(std::get<3>(r.out).begin(), std::get<3>(r.out).end()) == text);
  CHECK(r.inside(std::get<1>(r.out)));
  CHECK(r.inside(std::get<3>(r.out)));

  const std::pair<std::span<const char>, std::int64_t> p{std::span<const char>(text), -7};
  roundtrip<std::pair<std::span<const char>, std::int64_t>> rp(p);
  REQUIRE(rp.ok);
  CHECK(rp.size == 8 + 8 + 8);
  CHECK(rp.out.second == -7);
}

TEST_CASE("aggregates mixing values and spans: exact layout", "[codec]") {
  const std::vector<float> xs = {1.f, 2.f, 3.f};
  const record v{7, xs, 2.5, std::span<const char>("hello", 5)};
  const auto bytes = encode_checked(v);
  // id @0 | pad | count @8 | 3 floats @16 pad to 32 | w @32 | count @40 | "hello" @48 pad to 56
  REQUIRE(bytes.size() == 56);
  std::int32_t id = 0;
  std::uint64_t n1 = 0, n2 = 0;
  double w = 0;
  std::memcpy(&id, bytes.data(), 4);
  std::memcpy(&n1, bytes.data() + 8, 8);
  std::memcpy(&w, bytes.data() + 32, 8);
  std::memcpy(&n2, bytes.data() + 40, 8);
  CHECK(id == 7);
  CHECK(n1 == 3);
  CHECK(w == 2.5);
  CHECK(n2 == 5);
  CHECK(std::memcmp(bytes.data() + 48, "hello", 5) == 0);
  for (std::size_t i : {4, 5, 6, 7, 28, 29, 30, 31, 53, 54, 55}) CHECK(bytes[i] == std::byte{0});

  roundtrip<record> r(v);
  REQUIRE(r.ok);
  CHECK(r.out.id == 7);
  CHECK(same(r.out.xs, xs));
  CHECK(r.out.w == 2.5);
  CHECK(std::string(r.out.name.begin(), r.out.name.end()) == "hello");
  CHECK(r.inside(r.out.xs));
}

TEST_CASE("nested aggregates, arrays of spans and tuples inside aggregates", "[codec]") {
  const std::vector<std::int16_t> v16 = {-1, 2, -3};
  const std::vector<std::int32_t> a = {10, 20}, b = {};
  const std::vector<double> d = {0.25, 0.5};
  const std::vector<std::uint8_t> c0 = {1}, c1 = {2, 3, 4, 5, 6, 7, 8, 9, 10};
  const outer o{inner{5, v16}, {std::span<const std::int32_t>(a), std::span<const std::int32_t>(b)},
                {77, d}, {std::span<const std::uint8_t>(c0), std::span<const std::uint8_t>(c1)},
                progress{1, 2.f, 3}};
  roundtrip<outer> r(o);
  REQUIRE(r.ok);
  CHECK(r.size == encoded_size(o));
  CHECK(r.out.a.tag == 5);
  CHECK(same(r.out.a.v, v16));
  CHECK(same(r.out.pair_of_spans[0], a));
  CHECK(same(r.out.pair_of_spans[1], b));
  CHECK(std::get<0>(r.out.t) == 77);
  CHECK(same(std::get<1>(r.out.t), d));
  CHECK(same(r.out.c_array_of_spans[0], c0));
  CHECK(same(r.out.c_array_of_spans[1], c1));
  CHECK(r.out.p.step == 1);
  CHECK(r.out.p.tag == 3);
  CHECK(r.inside(std::get<1>(r.out.t)));
}

TEST_CASE("classes with several constructors inside aggregates with spans", "[codec]") {
  const std::vector<std::int32_t> s = {4, 5};
  const complex_and_span v{{1.5f, -2.f}, s, 'q'};
  roundtrip<complex_and_span> r(v);
  REQUIRE(r.ok);
  CHECK(r.size == 8 + 8 + 8 + 1);
  CHECK(r.out.c == std::complex<float>(1.5f, -2.f));
  CHECK(same(r.out.s, s));
  CHECK(r.out.z == 'q');
}

// ---- rejection -----------------------------------------------------------------------------

TEST_CASE("decode rejects sizes that do not match the encoding", "[codec]") {
  const std::vector<float> xs = {1.f, 2.f, 3.f};
  const record v{7, xs, 2.5, std::span<const char>("hello", 5)};
  const auto bytes = encode_checked(v);
  const std::size_t n = bytes.size();
  for (std::size_t size = 0; size <= n + 16; ++size) {
    exact_buffer buf(size);
    std::memcpy(buf.data(), bytes.data(), std::min(size, n));
    if (size > n) std::memset(buf.data() + n, 0, size - n);
    record out{};
    CHECK(decode(buf.data(), size, out) == (size == n));
  }
}

TEST_CASE("decode rejects span counts that do not fit", "[codec]") {
  const std::vector<std::int32_t> ints = {1, 2, 3, 4};
  const auto bytes = encode_checked(std::span<const std::int32_t>(ints));
  REQUIRE(bytes.size() == 24);
  for (std::uint64_t count : {std::uint64_t{3}, std::uint64_t{5}, std::uint64_t{6},
                              std::uint64_t{1} << 61, std::uint64_t{1} << 62,
                              (std::uint64_t{1} << 62) + 4, std::uint64_t{1} << 63,
                              std::numeric_limits<std::uint64_t>::max()}) {
    exact_buffer buf(bytes.size());
    std::memcpy(buf.data(), bytes.data(), bytes.size());
    std::memcpy(buf.data(), &count, 8);
    std::span<const std::int32_t> out;
    // 3 ints still pad to 16 bytes of elements: the count is consistent with the size.
    CHECK(decode(buf.data(), bytes.size(), out) == (count == 3));
  }
}

// A bool byte other than 0 or 1 is undefined behaviour once read: bytes from a damaged recording
// must be refused before a consumer sees them, wherever the bool sits.
namespace {
struct flagged { std::int32_t n; bool on; };
struct flags_in_span { std::uint8_t tag; std::span<const flagged> items; };
class hidden_bool {  // opaque: its fields are private, so its bool cannot be found
public:
  int pad() const { return b_ ? pad_ : 0; }

private:
  bool b_ = false;
  int pad_ = 0;
};

// Encodes v, overwrites the byte at `at` with each value 0..255, and says for which values decode
// still accepts the bytes.
template <class T>
std::vector<int> accepted_bytes(const T& v, std::size_t at) {
  const auto bytes = encode_checked(v);
  REQUIRE(at < bytes.size());
  std::vector<int> accepted;
  for (int b = 0; b < 256; ++b) {
    exact_buffer buf(bytes.size());
    std::memcpy(buf.data(), bytes.data(), bytes.size());
    buf.data()[at] = static_cast<std::byte>(b);
    T out{};
    if (decode(buf.data(), bytes.size(), out)) accepted.push_back(b);
  }
  return accepted;
}
const std::vector<int> zero_or_one = {0, 1};
}  // namespace

static_assert(devtap::detail::has_bools_v<bool> && devtap::detail::has_bools_v<const bool>);
static_assert(devtap::detail::has_bools_v<with_c_array> && devtap::detail::has_bools_v<std::array<bool, 3>>);
static_assert(devtap::detail::has_bools_v<std::span<const bool>> && devtap::detail::has_bools_v<flags_in_span>);
static_assert(devtap::detail::has_bools_v<std::tuple<int, std::tuple<char, bool>>>);
static_assert(!devtap::detail::has_bools_v<progress> && !devtap::detail::has_bools_v<record>);
static_assert(!devtap::detail::has_bools_v<hidden_bool>, "opaque classes are not looked into");
namespace {
enum class switch_state : bool { off, on };
struct with_switch {
  std::uint32_t id;
  switch_state state;
};
}  // namespace
static_assert(devtap::detail::has_bools_v<switch_state> && devtap::detail::has_bools_v<with_switch>);
static_assert(!devtap::detail::has_bools_v<std::byte>, "an enum over another type holds no bool");

TEST_CASE("decode refuses a bool that is neither 0 nor 1, wherever it is", "[codec]") {
  CHECK(accepted_bytes(true, 0) == zero_or_one);
  CHECK(accepted_bytes(with_c_array{{1, 2, 3}, 4.f, true}, offsetof(with_c_array, c)) == zero_or_one);
  CHECK(accepted_bytes(std::array<bool, 5>{true, false, true, false, true}, 3) == zero_or_one);
  // Nested tuples (structured layout): int32 at 0, char at 4, bool at 5.
  CHECK(accepted_bytes(std::tuple<std::int32_t, std::tuple<char, bool>>{7, {'x', true}}, 5) == zero_or_one);

  const bool flags[3] = {true, false, true};
  // The count at 0, the elements from 8.
  CHECK(accepted_bytes(std::span<const bool>(flags), 8 + 2) == zero_or_one);
  const std::tuple<bool, std::span<const bool>> pair{false, std::span<const bool>(flags)};
  CHECK(accepted_bytes(pair, 0) == zero_or_one);       // the first bool
  CHECK(accepted_bytes(pair, 8 + 8 + 1) == zero_or_one);  // an element of the span
  const flagged items[2] = {{1, true}, {2, false}};
  // tag at 0, the span's count at 8, its elements from 16: items[1].on at 16 + 8 + 4.
  CHECK(accepted_bytes(flags_in_span{9, std::span<const flagged>(items)}, 16 + sizeof(flagged) + offsetof(flagged, on)) ==
        zero_or_one);
  // An enum over bool is loaded as a bool too (a hostile tester replayed one holding 2).
  CHECK(accepted_bytes(switch_state::on, 0) == zero_or_one);
  CHECK(accepted_bytes(with_switch{3, switch_state::on}, offsetof(with_switch, state)) == zero_or_one);
  // Bytes that are not bools are not checked: every value of the int beside them decodes.
  CHECK(accepted_bytes(with_c_array{{1, 2, 3}, 4.f, true}, 1).size() == 256);
  // Nor are an opaque class's (documented: its bools cannot be found).
  CHECK(accepted_bytes(hidden_bool{}, 0).size() == 256);
}

TEST_CASE("random sizes and bytes never make decode read out of bounds", "[codec]") {
  std::mt19937_64 rng(12345);
  const std::vector<float> xs = {1.f, 2.f, 3.f};
  const std::vector<std::int16_t> v16 = {1, 2, 3, 4, 5};
  const std::vector<std::int32_t> a = {1, 2};
  const std::vector<double> d = {0.5};
  const std::vector<std::uint8_t> c = {1, 2, 3};
  // Each run starts from a valid encoding, then truncates or extends it, rewrites a word that may
  // be a span count (small or huge), or randomises it all. exact_buffer lets ASan see overreads.
  const auto fuzz = [&](const auto& sample) {
    using T = std::remove_cvref_t<decltype(sample)>;
    const auto valid = encode_checked(sample);
    int accepted = 0;
    for (int iter = 0; iter < 4000; ++iter) {
      std::size_t size = valid.size();
      const int mode = static_cast<int>(rng() % 4);
      if (mode != 0) size = rng() % (valid.size() + 24);
      exact_buffer buf(size);
      for (std::size_t i = 0; i < size; ++i)
        buf.data()[i] = mode == 3 ? static_cast<std::byte>(rng()) : i < valid.size() ? valid[i] : std::byte{0};
      if (mode == 2 && size >= 8) {
        const std::uint64_t counts[] = {rng() % 24, rng(), std::uint64_t{1} << (rng() % 64),
                                        std::numeric_limits<std::uint64_t>::max() - rng() % 8};
        const std::uint64_t count = counts[rng() % 4];
        std::memcpy(buf.data() + 8 * (rng() % (size / 8)), &count, 8);
      }
      T out{};
      if (decode(buf.data(), size, out)) {
        ++accepted;
        CHECK(encoded_size(out) == size);  // accepted only when consistent
      }
    }
    CHECK(accepted > 0);
  };
  fuzz(std::span<const std::uint8_t>(c));
  fuzz(std::span<const double>(d));
  fuzz(record{7, xs, 2.5, std::span<const char>("hi", 2)});
  fuzz(outer{inner{5, v16}, {std::span<const std::int32_t>(a), std::span<const std::int32_t>()},
             {77, d}, {std::span<const std::uint8_t>(c), std::span<const std::uint8_t>(c)},
             progress{1, 2.f, 3}});
  fuzz(std::tuple<std::uint8_t, std::span<const std::int16_t>, std::span<const char>>(
      1, v16, std::span<const char>("abc", 3)));
  fuzz(progress{1, 2.f, 3});
}

TEST_CASE("encoded sizes", "[codec]") {
  STATIC_REQUIRE(encoded_size(std::int8_t{}) == 1);
  STATIC_REQUIRE(encoded_size(progress{}) == 16);
  STATIC_REQUIRE(encoded_size(over_aligned{}) == 16);
  STATIC_REQUIRE(encoded_size(std::tuple<std::uint8_t, std::uint32_t>{}) == 8);
  STATIC_REQUIRE(encoded_size(std::tuple<std::uint8_t, over_aligned>{}) == 8 + 16);
  const std::vector<char> three(3);
  CHECK(encoded_size(std::span<const char>(three)) == 16);
  CHECK(encoded_size(std::tuple<std::span<const char>, std::uint8_t>(three, 1)) == 17);
  CHECK(encoded_size(std::tuple<std::uint8_t, std::span<const char>>(1, three)) == 24);
}
