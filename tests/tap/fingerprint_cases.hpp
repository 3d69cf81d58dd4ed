#pragma once
// Pinned fingerprints, shared by tests/outfeed/fingerprint.cpp (g++, clang) and
// tests/cuda/fingerprint_nvcc.cu (nvcc's device pass): the same literals must hold everywhere.
// A change here is a wire-format change: bump detail::fingerprint_version, never just re-pin.
#include <devtap/tap/fingerprint.hpp>

#include <array>
#include <complex>
#include <cstdint>
#include <span>
#include <tuple>
#include <utility>

namespace fp_cases {

enum class small_enum : std::uint8_t { a, b };
struct int_float { std::int32_t a; float b; };
struct float_int { float a; std::int32_t b; };
struct with_c_array { std::int32_t a[3]; float b; };
struct nested { int_float x; double y; };
struct with_span { std::int32_t id; std::span<const float> xs; };
struct with_complex { std::int32_t a; std::complex<float> c; double d; };  // bare-run position
struct alignas(16) over_aligned { float x, y, z; };
struct bits { std::uint32_t lo : 4; std::uint32_t hi : 28; };
class opaque {  // not an aggregate: size and alignment only
 public:
  std::int64_t sum() const { return a_ + b_; }
 private:
  std::int64_t a_ = 0;
  std::int32_t b_ = 0;
};
struct progress { std::uint32_t step; float loss; std::uint64_t tag; };  // a 16-byte record

using tuple_if = std::tuple<std::int32_t, float>;
using pair_if = std::pair<std::int32_t, float>;
using array_i3 = std::array<std::int32_t, 3>;
using c_array_i3 = std::int32_t[3];
using span_f = std::span<const float>;
using tuple_span = std::tuple<std::int32_t, std::span<const double>>;
using ptr_f = const float*;

}  // namespace fp_cases

// X(type, expected fingerprint)
#define DEVTAP_FINGERPRINT_CASES(X)                \
  X(bool, 0x0448043f652ac5ebull)                   \
  X(char, 0x59bccb8ae3e727bcull)                   \
  X(signed char, 0x979575e315d98afeull)            \
  X(unsigned char, 0x1be42132b1f4c47aull)          \
  X(std::int16_t, 0x789aaeda0aea40ddull)           \
  X(std::uint16_t, 0xfce95a29a7057a59ull)          \
  X(std::int32_t, 0x3aa520c7f50bac9bull)           \
  X(std::uint32_t, 0xb6ca045fe8a1371full)          \
  X(std::int64_t, 0xbeba04a3c94e8417ull)           \
  X(std::uint64_t, 0x4308aff36569bd93ull)          \
  X(float, 0x1bb8cb9bdc127afaull)                  \
  X(double, 0x9fcdaf77b0555276ull)                 \
  X(fp_cases::small_enum, 0x1be42132b1f4c47aull)   \
  X(fp_cases::ptr_f, 0xecf4209cd22f41dcull)        \
  X(fp_cases::c_array_i3, 0x6c0de43c11c2082full)   \
  X(fp_cases::array_i3, 0x6c0de43c11c2082full)     \
  X(fp_cases::span_f, 0xd8e9d9bc764fd46dull)       \
  X(fp_cases::tuple_if, 0x72e1f25026bf9248ull)     \
  X(fp_cases::pair_if, 0x72e1f25026bf9248ull)      \
  X(fp_cases::tuple_span, 0x671f80730ac2e5b1ull)   \
  X(fp_cases::int_float, 0x9ea9f25a3f1ae62dull)    \
  X(fp_cases::float_int, 0x9a5ffeb97a82efc9ull)    \
  X(fp_cases::with_c_array, 0x3c0206594eb67539ull) \
  X(fp_cases::nested, 0x86ada0a94451b69full)       \
  X(fp_cases::with_span, 0xbfcbcea1176800e2ull)    \
  X(fp_cases::with_complex, 0x523366a5bb5742bdull) \
  X(fp_cases::over_aligned, 0x6c447128eac269c3ull) \
  X(fp_cases::bits, 0xf6a14ffe034f09ffull)         \
  X(fp_cases::opaque, 0xb0718926adf9fb61ull)       \
  X(fp_cases::progress, 0x9d20a7a5829c7626ull)
