#include <devtap/detail/reflect.hpp>
#include <devtap/detail/shape.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <complex>
#include <cstdint>
#include <span>
#include <tuple>
#include <type_traits>
#include <utility>

namespace dd = devtap::detail;
using dd::shape;
using dd::shape_of;
using dd::type_list;

namespace {

struct empty {};
struct c_array_then_float { std::int32_t a[3]; float b; };
// Braced, bare, braced, bare positions: the probe needs several runs.
struct alternating { std::complex<float> a; std::int32_t b[2]; std::complex<float> c; std::int32_t d[1]; };
struct bits { std::uint32_t lo : 4; std::uint32_t hi : 28; };
struct cv_fields { const std::int32_t c; volatile float v; };
struct fields32 {
  int f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15;
  int f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31;
};
struct fields33 {
  int f0, f1, f2, f3, f4, f5, f6, f7, f8, f9, f10, f11, f12, f13, f14, f15;
  int f16, f17, f18, f19, f20, f21, f22, f23, f24, f25, f26, f27, f28, f29, f30, f31, f32;
};
struct nested_arrays { fields32 head; int one[1]; std::int64_t many[40]; };  // 3 fields
struct with_base : empty { int x; };
union either { int i; float f; };
class private_members { int a_ = 0; public: int a() const { return a_; } };

}  // namespace

TEST_CASE("field types are the declared types, bit-fields and cv included", "[reflect]") {
  static_assert(std::is_same_v<dd::field_types_t<empty>, type_list<>>);
  static_assert(std::is_same_v<dd::field_types_t<c_array_then_float>, type_list<std::int32_t[3], float>>);
  static_assert(std::is_same_v<dd::field_types_t<alternating>,
                               type_list<std::complex<float>, std::int32_t[2], std::complex<float>, std::int32_t[1]>>);
  static_assert(std::is_same_v<dd::field_types_t<bits>, type_list<std::uint32_t, std::uint32_t>>);
  static_assert(std::is_same_v<dd::field_types_t<cv_fields>, type_list<const std::int32_t, volatile float>>);
  static_assert(dd::field_types_t<fields32>::size == 32);
  static_assert(dd::field_types_t<nested_arrays>::size == 3);
  CHECK(dd::field_types_t<alternating>::size == 4);
}

TEST_CASE("reflection stops at bases, unions, private members and 32 fields", "[reflect]") {
  static_assert(dd::reflectable_v<fields32>);
  static_assert(dd::reflectable_v<const fields32>);
  static_assert(!dd::reflectable_v<fields33>);
  static_assert(!dd::reflectable_v<with_base>);
  static_assert(!dd::reflectable_v<either>);
  static_assert(!dd::reflectable_v<private_members>);
  static_assert(!dd::reflectable_v<std::array<int, 3>>);
  static_assert(!dd::reflectable_v<int>);
  CHECK(dd::reflectable_v<bits>);
}

namespace {
struct sum_fields {
  long& sum;
  template <class... P>
  void operator()(P&... p) const {
    ((sum += static_cast<long>(p[0])), ...);
  }
};
struct set_fields {
  template <class... P>
  void operator()(P&... p) const {
    int i = 1;
    ((p = i++), ...);
  }
};
}  // namespace

TEST_CASE("with_fields visits every field in order, const or not", "[reflect]") {
  struct three { int a; long b; short c; } t{};
  dd::with_fields(t, set_fields{});
  CHECK(t.a == 1);
  CHECK(t.b == 2);
  CHECK(t.c == 3);

  const struct arrays { int a[2]; long b[1]; } arr{{5, 6}, {7}};
  long sum = 0;
  dd::with_fields(arr, sum_fields{sum});
  CHECK(sum == 12);
}

TEST_CASE("shape_of classifies once for the codec and the fingerprint", "[shape]") {
  static_assert(shape_of<int> == shape::scalar);
  static_assert(shape_of<const float*> == shape::scalar);
  static_assert(shape_of<int&> == shape::scalar);
  static_assert(shape_of<std::span<const float>> == shape::span);
  static_assert(shape_of<const std::span<const float>> == shape::span);
  static_assert(shape_of<int[3]> == shape::array);
  static_assert(shape_of<const int[3]> == shape::array);
  static_assert(shape_of<std::array<int, 3>> == shape::array);
  static_assert(shape_of<std::tuple<int, float>> == shape::tuple);
  static_assert(shape_of<std::pair<int, float>> == shape::tuple);
  static_assert(shape_of<c_array_then_float> == shape::aggregate);
  static_assert(shape_of<fields33> == shape::opaque);
  static_assert(shape_of<either> == shape::opaque);
  static_assert(shape_of<private_members> == shape::opaque);
  static_assert(shape_of<std::complex<float>> == shape::opaque);

  static_assert(std::is_same_v<dd::part_types_t<int[3]>, type_list<int>>);
  static_assert(std::is_same_v<dd::part_types_t<std::array<float, 2>>, type_list<float>>);
  static_assert(std::is_same_v<dd::part_types_t<std::pair<int, float>>, type_list<int, float>>);
  static_assert(std::is_same_v<dd::part_types_t<const c_array_then_float>, type_list<std::int32_t[3], float>>);
  static_assert(std::is_same_v<dd::part_types_t<std::span<const float>>, type_list<>>);
  static_assert(dd::array_of<int[3]>::size == 3 && dd::array_of<std::array<int, 4>>::size == 4);
  CHECK(dd::has_parts(shape_of<std::tuple<int>>));
  CHECK_FALSE(dd::has_parts(shape_of<std::span<const int>>));
}
