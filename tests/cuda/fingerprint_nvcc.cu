// nvcc's proof for the codec and fingerprints (docs/outfeed.md, type fingerprints):
//  - compile time: in the device pass the fingerprints equal the literals that
//    tests/outfeed/fingerprint.cpp pins for g++ and clang, and encode() compiles in device code;
//  - run time (only with a GPU, else exit 77 = skip): fingerprints computed by device code and
//    records encoded by device code decode on the host.
#include <devtap/tap/codec.hpp>
#include <devtap/tap/fingerprint.hpp>

#include "tap/fingerprint_cases.hpp"

#include <devtap/cuda/probe.hpp>

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#define DEVTAP_PINNED(T, C)                      \
  static_assert(devtap::type_fingerprint_v<T> == C, \
                "fingerprint of " #T " differs from the value pinned for g++/clang");

#ifdef __CUDA_ARCH__
// The device pass: the point of this file.
DEVTAP_FINGERPRINT_CASES(DEVTAP_PINNED)
#else
// nvcc's host pass agrees too.
DEVTAP_FINGERPRINT_CASES(DEVTAP_PINNED)
#endif

namespace {

#define DEVTAP_FP_VALUE(T, C) devtap::type_fingerprint<T>(),
#define DEVTAP_FP_EXPECTED(T, C) C,
constexpr std::uint64_t expected_fps[] = {DEVTAP_FINGERPRINT_CASES(DEVTAP_FP_EXPECTED)};
constexpr int n_fps = sizeof(expected_fps) / sizeof(expected_fps[0]);

__global__ void fingerprints_kernel(std::uint64_t* out) {
#ifdef __CUDA_ARCH__
  static_assert(devtap::type_fingerprint<fp_cases::progress>() == 0x9d20a7a5829c7626ull);
#endif
  const std::uint64_t fps[] = {DEVTAP_FINGERPRINT_CASES(DEVTAP_FP_VALUE)};
  for (int i = 0; i < n_fps; ++i) out[i] = fps[i];
}

// The hot path: a 16-byte trivially copyable record, raw bytes. Needs no nvcc flag.
__global__ void encode_raw_kernel(std::byte* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const fp_cases::progress p{static_cast<std::uint32_t>(i), 0.5f * static_cast<float>(i),
                             0xabcdull + static_cast<std::uint64_t>(i)};
  static_assert(devtap::detail::encoded_size(fp_cases::progress{}) == 16);
  devtap::detail::encode(p, out + 16 * i);
}

#if defined(__CUDACC_RELAXED_CONSTEXPR__)
// Spans and tuples call std:: constexpr members, which device code may use only with
// --expt-relaxed-constexpr (nvcc defines __CUDACC_RELAXED_CONSTEXPR__ then).
struct span_record {
  std::int32_t id;
  std::span<const float> xs;
  std::tuple<std::uint8_t, double> t;
};

__global__ void encode_span_kernel(std::byte* out, const float* xs, int n, std::size_t* size) {
  const span_record r{7, std::span<const float>(xs, static_cast<std::size_t>(n)),
                      std::tuple<std::uint8_t, double>{3, 2.5}};
  *size = devtap::detail::encoded_size(r);
  devtap::detail::encode(r, out);
}
#endif

int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::printf("FAILED: %s\n", what);
    ++failures;
  }
}
bool cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::printf("FAILED: %s: %s\n", what, cudaGetErrorString(e));
  failures += e != cudaSuccess;
  return e == cudaSuccess;
}

}  // namespace

int main() {
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("%s: compile-time checks passed, run-time checks %s\n", gpu.reason.c_str(),
                gpu.nothing_to_run_on() ? "skipped" : "FAILED");
    return gpu.nothing_to_run_on() ? 77 : 1;
  }

  std::uint64_t* fps = nullptr;
  std::byte* raw = nullptr;
  constexpr int n_raw = 256;
  if (!cuda_ok(cudaMalloc(&fps, sizeof(expected_fps)), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&raw, 16 * n_raw), "cudaMalloc"))
    return 1;
  fingerprints_kernel<<<1, 1>>>(fps);
  encode_raw_kernel<<<(n_raw + 127) / 128, 128>>>(raw, n_raw);
  if (!cuda_ok(cudaDeviceSynchronize(), "kernels")) return 1;

  std::uint64_t got_fps[n_fps] = {};
  cuda_ok(cudaMemcpy(got_fps, fps, sizeof(got_fps), cudaMemcpyDeviceToHost), "copy fps");
  for (int i = 0; i < n_fps; ++i) check(got_fps[i] == expected_fps[i], "device fingerprint");

  alignas(8) std::byte host_raw[16 * n_raw];
  cuda_ok(cudaMemcpy(host_raw, raw, sizeof(host_raw), cudaMemcpyDeviceToHost), "copy raw");
  for (int i = 0; i < n_raw; ++i) {
    fp_cases::progress p{};
    const bool ok = devtap::detail::decode(host_raw + 16 * i, 16, p);
    check(ok && p.step == static_cast<std::uint32_t>(i) && p.loss == 0.5f * static_cast<float>(i) &&
              p.tag == 0xabcdull + static_cast<std::uint64_t>(i),
          "raw record decodes");
  }

#if defined(__CUDACC_RELAXED_CONSTEXPR__)
  const std::vector<float> xs = {1.f, 2.f, 3.f, 4.f, 5.f};
  float* dxs = nullptr;
  std::byte* out = nullptr;
  std::size_t* dsize = nullptr;
  cuda_ok(cudaMalloc(&dxs, xs.size() * sizeof(float)), "cudaMalloc");
  cuda_ok(cudaMalloc(&out, 256), "cudaMalloc");
  cuda_ok(cudaMalloc(&dsize, sizeof(std::size_t)), "cudaMalloc");
  cuda_ok(cudaMemcpy(dxs, xs.data(), xs.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
  encode_span_kernel<<<1, 1>>>(out, dxs, static_cast<int>(xs.size()), dsize);
  cuda_ok(cudaDeviceSynchronize(), "span kernel");
  alignas(8) std::byte host_out[256];
  std::size_t size = 0;
  cuda_ok(cudaMemcpy(host_out, out, sizeof(host_out), cudaMemcpyDeviceToHost), "copy");
  cuda_ok(cudaMemcpy(&size, dsize, sizeof(size), cudaMemcpyDeviceToHost), "copy");
  // id 4 | pad 4 | count 8 | 5 floats 20 + pad 4 | u8 1 | pad 7 | double 8  = 56
  check(size == 56, "span record size");
  span_record r{};
  check(devtap::detail::decode(host_out, size, r), "span record decodes");
  check(r.id == 7 && r.xs.size() == 5 && r.xs[4] == 5.f && std::get<0>(r.t) == 3 &&
            std::get<1>(r.t) == 2.5,
        "span record values");
  cudaFree(dxs);
  cudaFree(out);
  cudaFree(dsize);
#endif
  cudaFree(fps);
  cudaFree(raw);
  std::printf("%s\n", failures == 0 ? "all checks passed" : "checks FAILED");
  return failures == 0 ? 0 : 1;
}
