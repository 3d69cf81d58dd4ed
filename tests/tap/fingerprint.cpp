#include <devtap/tap/fingerprint.hpp>

#include "fingerprint_cases.hpp"

#include <catch2/catch.hpp>

#include <complex>
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <tuple>
#include <vector>

using devtap::type_fingerprint_v;

namespace {

struct if_a { std::int32_t a; float b; };
struct if_b { std::int32_t x; float y; };  // same shape, other names
struct fi { float a; std::int32_t b; };
struct ifd { std::int32_t a; float b; double c; };
struct nested_ifd { if_a x; double c; };
struct arr3 { std::int32_t a[3]; };
struct arr4 { std::int32_t a[4]; };
struct three_ints { std::int32_t a, b, c; };
struct alignas(16) if_a16 { std::int32_t a; float b; };
struct span_like { const std::int32_t* p; std::size_t n; };
struct has_span { std::span<const std::int32_t> s; };
struct has_span_f { std::span<const float> s; };
struct complex_then_int { std::complex<float> c; std::int32_t i; };
struct complex_then_float { std::complex<float> c; float f; };
enum class e32 : std::int32_t { x };
enum class eu32 : std::uint32_t { x };
class opaque8a { std::int64_t v_ = 0; public: std::int64_t get() const { return v_; } };
class opaque8b { double v_ = 0; public: double get() const { return v_; } };

}  // namespace

TEST_CASE("fingerprints equal the pinned literals (shared with the nvcc test)", "[fingerprint]") {
#define DEVTAP_PINNED(T, C)                         \
  static_assert(devtap::type_fingerprint_v<T> == C); \
  CHECK(devtap::type_fingerprint_v<T> == C);
  DEVTAP_FINGERPRINT_CASES(DEVTAP_PINNED)
#undef DEVTAP_PINNED
}

TEST_CASE("fingerprints tell apart types of different shape", "[fingerprint]") {
  const std::vector<std::uint64_t> fps = {
      type_fingerprint_v<std::int32_t>,
      type_fingerprint_v<std::uint32_t>,
      type_fingerprint_v<float>,
      type_fingerprint_v<std::int64_t>,
      type_fingerprint_v<std::uint64_t>,
      type_fingerprint_v<double>,
      type_fingerprint_v<bool>,
      type_fingerprint_v<char>,
      type_fingerprint_v<signed char>,
      type_fingerprint_v<unsigned char>,
      type_fingerprint_v<std::int16_t>,
      type_fingerprint_v<char16_t>,
      type_fingerprint_v<const float*>,
      type_fingerprint_v<if_a>,
      type_fingerprint_v<fi>,
      type_fingerprint_v<ifd>,
      type_fingerprint_v<nested_ifd>,
      type_fingerprint_v<arr3>,
      type_fingerprint_v<arr4>,
      type_fingerprint_v<three_ints>,
      type_fingerprint_v<std::int32_t[3]>,
      type_fingerprint_v<std::int32_t[4]>,
      type_fingerprint_v<float[3]>,
      type_fingerprint_v<if_a16>,
      type_fingerprint_v<span_like>,
      type_fingerprint_v<has_span>,
      type_fingerprint_v<has_span_f>,
      type_fingerprint_v<std::span<const std::int32_t>>,
      type_fingerprint_v<std::span<const float>>,
      type_fingerprint_v<std::span<const std::uint8_t>>,
      type_fingerprint_v<std::span<std::int32_t>>,
      type_fingerprint_v<std::span<const std::int32_t, 3>>,
      type_fingerprint_v<std::tuple<std::int32_t, float>>,
      type_fingerprint_v<std::tuple<float, std::int32_t>>,
      type_fingerprint_v<std::tuple<std::int32_t, float, double>>,
      type_fingerprint_v<std::tuple<>>,
      type_fingerprint_v<complex_then_int>,
      type_fingerprint_v<complex_then_float>,
      type_fingerprint_v<opaque8a>,
  };
  const std::set<std::uint64_t> unique(fps.begin(), fps.end());
  CHECK(unique.size() == fps.size());
  CHECK(type_fingerprint_v<std::int32_t> != type_fingerprint_v<std::uint32_t>);
  CHECK(type_fingerprint_v<std::int32_t> != type_fingerprint_v<float>);
  CHECK(type_fingerprint_v<if_a> != type_fingerprint_v<fi>);
  // A span sends its elements: it is not the pointer-and-size struct it is made of.
  CHECK(type_fingerprint_v<std::span<const std::int32_t>> != type_fingerprint_v<span_like>);
}

TEST_CASE("fingerprints are structural", "[fingerprint]") {
  // cv-qualifiers do not change what is sent.
  STATIC_REQUIRE(type_fingerprint_v<const std::int32_t> == type_fingerprint_v<std::int32_t>);
  STATIC_REQUIRE(type_fingerprint_v<const volatile if_a> == type_fingerprint_v<if_a>);
  // Enums are their underlying type.
  STATIC_REQUIRE(type_fingerprint_v<e32> == type_fingerprint_v<std::int32_t>);
  STATIC_REQUIRE(type_fingerprint_v<eu32> == type_fingerprint_v<std::uint32_t>);
  STATIC_REQUIRE(type_fingerprint_v<std::byte> == type_fingerprint_v<unsigned char>);
  // Same bytes, same fingerprint.
  STATIC_REQUIRE(type_fingerprint_v<std::int32_t[3]> ==
                 type_fingerprint_v<std::array<std::int32_t, 3>>);
  STATIC_REQUIRE(type_fingerprint_v<std::pair<std::int32_t, float>> ==
                 type_fingerprint_v<std::tuple<std::int32_t, float>>);
  // Names do not matter, layout does.
  STATIC_REQUIRE(type_fingerprint_v<if_a> == type_fingerprint_v<if_b>);
  // Opaque classes are known by size and alignment only (documented limitation).
  STATIC_REQUIRE(type_fingerprint_v<opaque8a> == type_fingerprint_v<opaque8b>);
  // The function form gives the same value, at compile time.
  STATIC_REQUIRE(devtap::type_fingerprint<ifd>() == type_fingerprint_v<ifd>);
}

namespace {

// Opaque classes of each kind the documentation names (docs/guide.md, section 3; the comment at
// the top of fingerprint.hpp): each 8 bytes, 4-aligned, holding an int32 then a float.
class private_if { std::int32_t a_ = 0; float b_ = 0; public: float sum() const { return a_ + b_; } };
class private_fi { float a_ = 0; std::int32_t b_ = 0; public: float sum() const { return a_ + b_; } };
struct ctor_if { ctor_if() = default; std::int32_t a; float b; };  // a user-declared constructor
struct base_i { std::int32_t a; };
struct derived_if : base_i { float b; };                            // a base class
union union_if { std::int32_t a; float b[2]; };
class private_d { double v_ = 0; public: double get() const { return v_; } };      // 8 bytes, 8-aligned
class private_i3 { std::int32_t v_[3] = {}; public: int get() const { return v_[0]; } };  // 12 bytes

}  // namespace

TEST_CASE("opaque classes are fingerprinted by size and alignment only (documented limitation)",
          "[fingerprint]") {
  using devtap::detail::shape;
  using devtap::detail::shape_of;
  // What is opaque: private members, a user-declared constructor, a base class, a union.
  STATIC_REQUIRE(shape_of<private_if> == shape::opaque);
  STATIC_REQUIRE(shape_of<ctor_if> == shape::opaque);
  STATIC_REQUIRE(shape_of<derived_if> == shape::opaque);
  STATIC_REQUIRE(shape_of<union_if> == shape::opaque);
  STATIC_REQUIRE(shape_of<if_a> == shape::aggregate);
  // Same size and alignment: the same fingerprint, whatever the members (their order and types).
  STATIC_REQUIRE(type_fingerprint_v<private_if> == type_fingerprint_v<private_fi>);
  STATIC_REQUIRE(type_fingerprint_v<private_if> == type_fingerprint_v<ctor_if>);
  STATIC_REQUIRE(type_fingerprint_v<private_if> == type_fingerprint_v<derived_if>);
  STATIC_REQUIRE(type_fingerprint_v<private_if> == type_fingerprint_v<union_if>);
  STATIC_REQUIRE(type_fingerprint_v<opaque8a> == type_fingerprint_v<opaque8b>);  // int64 vs double
  // Another size or alignment: another fingerprint.
  STATIC_REQUIRE(type_fingerprint_v<private_if> != type_fingerprint_v<private_d>);   // alignment 4 vs 8
  STATIC_REQUIRE(type_fingerprint_v<private_if> != type_fingerprint_v<private_i3>);  // size 8 vs 12
  // Never the fingerprint of a reflected aggregate, tuple or array with the same bytes.
  STATIC_REQUIRE(type_fingerprint_v<ctor_if> != type_fingerprint_v<if_a>);
  STATIC_REQUIRE(type_fingerprint_v<private_if> != type_fingerprint_v<std::tuple<std::int32_t, float>>);
  STATIC_REQUIRE(type_fingerprint_v<private_i3> != type_fingerprint_v<std::int32_t[3]>);
  STATIC_REQUIRE(type_fingerprint_v<opaque8a> != type_fingerprint_v<std::int64_t>);
}
