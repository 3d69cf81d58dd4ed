// nvcc's side of devtap::print. Compile time: the device pass computes the format ids pinned for
// g++/clang (tests/print/print_ids.hpp), and kernels print every argument kind (spans need
// --expt-relaxed-constexpr, given here). Run time, only with a GPU (else exit 77 = SKIP): a kernel's
// lines arrive formatted, and one kernel prints far more than 1 MB (CUDA printf's default FIFO,
// which overwrites the oldest output) with every line counted, whole and in order per thread.
#include <devtap/devtap.hpp>
#include <devtap/print.hpp>

#include <cuda_runtime.h>

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "print_ids.hpp"

#define DEVTAP_PIN_PRINT_ID(F, ID, ...)                                       \
  static_assert(devtap::detail::print_signature<F, __VA_ARGS__>::id == ID, \
                "the format id of " F " differs from the value pinned for g++/clang");
#ifdef __CUDA_ARCH__
DEVTAP_PRINT_ID_CASES(DEVTAP_PIN_PRINT_ID)  // the device pass: the point of this file
#else
DEVTAP_PRINT_ID_CASES(DEVTAP_PIN_PRINT_ID)
#endif

// The fixed-size arguments of one print: 2 KiB in device code (a kernel's stack frame is reserved
// for every resident thread), 64 KiB on the host; the verdict differs between nvcc's two passes.
#ifdef __CUDA_ARCH__
static_assert(devtap::detail::print_args_check<std::array<char, 2048>>() == devtap::detail::print_check::ok);
static_assert(devtap::detail::print_args_check<std::array<char, 2049>>() == devtap::detail::print_check::too_long);
#else
static_assert(devtap::detail::print_args_check<std::array<char, 2049>>() == devtap::detail::print_check::ok);
static_assert(devtap::detail::print_args_check<std::array<char, 65537>>() == devtap::detail::print_check::too_long);
#endif

namespace {

enum class phase : int { warmup = 1, run = 2 };

__global__ void every_kind(devtap::printer out, const float* data, int n) {
  const unsigned t = threadIdx.x;
  const int ints[3] = {1, 2, static_cast<int>(t)};
  const bool flags[2] = {true, t % 2 == 0};
  devtap::print<"thread {} of {} data {:.2f} {} {}">(out, t, blockDim.x, data[t % n], ints, flags);
  devtap::print<"char {} bool {} i8 {} u64 {:#x} double {:e} enum {} ptr {}">(
      out, 'k', t == 0, static_cast<signed char>(-1), 0xffull, 1.0 / (t + 1), phase::run, static_cast<const void*>(data));
  // With its length: std::string_view("sv") calls strlen, which device code lacks (docs/print.md).
  devtap::print<"span {::.1f} text {} literal {}">(out, std::span<const float>(data, n), std::string_view("sv", 2), "lit");
}

constexpr int lines_per_thread = 16;

__global__ void many_lines(devtap::printer out) {
  const unsigned b = blockIdx.x, t = threadIdx.x;
  for (int i = 0; i < lines_per_thread; ++i)
    devtap::print<"block {} thread {} line {} check {}">(out, b, t, i, (b * 7919u + t * 31u + static_cast<unsigned>(i)) % 10007u);
}

bool check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
  return false;
}

}  // namespace

int main() {
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("%s: compiled only (%s)\n", gpu.reason.c_str(), gpu.nothing_to_run_on() ? "skip" : "FAILED");
    return gpu.nothing_to_run_on() ? 77 : 1;
  }
  devtap::set_log_level(devtap::log_level::warn);
  int failures = 0;
  devtap::device* gpu = devtap::devices("cuda")[0];

  {  // every argument kind, formatted on the host
    std::vector<std::string> lines;
    devtap::receiver rx({.devices = {gpu}, .budget_bytes = 1 << 20, .name = "kinds"});
    auto prints = devtap::attach_print(rx, {.sink = [&](std::string_view l) { lines.emplace_back(l); }});
    float* data = nullptr;
    const float host[4] = {0.5f, 1.5f, 2.5f, 3.5f};
    if (!check(cudaMalloc(&data, sizeof host), "cudaMalloc") ||
        !check(cudaMemcpy(data, host, sizeof host, cudaMemcpyHostToDevice), "cudaMemcpy"))
      return 1;
    every_kind<<<1, 4>>>(prints.on(rx.outfeed(*gpu)), data, 4);
    if (!check(cudaDeviceSynchronize(), "every_kind")) return 1;
    rx.close();
    cudaFree(data);
    int found = 0;
    for (const auto& l : lines) {
      std::printf("  %s\n", l.c_str());
      if (l == "thread 2 of 4 data 2.50 [1, 2, 2] [true, true]") ++found;
      if (l.starts_with("char k bool false i8 -1 u64 0xff double 3.333333e-01 enum 2 ptr 0x")) ++found;
      if (l == "span [0.5, 1.5, 2.5, 3.5] text sv literal lit") ++found;
    }
    if (lines.size() != 12 || found != 6) {
      std::fprintf(stderr, "every_kind: %zu lines, %d as expected (want 12 and 6)\n", lines.size(), found);
      ++failures;
    }
  }

  {  // far more than 1 MB from one kernel: every line, whole, in order per thread
    const unsigned blocks = 512, threads = 256;
    std::vector<int> next(blocks * threads, 0);
    std::uint64_t lines = 0, bytes = 0, bad = 0;
    devtap::receiver rx({.devices = {gpu}, .budget_bytes = 4 << 20, .name = "volume"});  // small: back-pressure
    auto prints = devtap::attach_print(rx, {.sink = [&](std::string_view l) {
      ++lines;
      bytes += l.size() + 1;
      unsigned b = 0, t = 0, i = 0, c = 0;
      const int n = std::sscanf(std::string(l).c_str(), "block %u thread %u line %u check %u", &b, &t, &i, &c);
      if (n != 4 || b >= blocks || t >= threads || static_cast<int>(i) != next[b * threads + t] ||
          c != (b * 7919u + t * 31u + i) % 10007u)
        ++bad;
      else
        ++next[b * threads + t];
    }});
    many_lines<<<blocks, threads>>>(prints.on(rx.outfeed(*gpu)));
    if (!check(cudaDeviceSynchronize(), "many_lines")) return 1;
    rx.close();
    const std::uint64_t want = std::uint64_t{blocks} * threads * lines_per_thread;
    std::printf("one kernel printed %llu lines (%.1f MB), %llu out of place; %llu dropped\n",
                static_cast<unsigned long long>(lines), bytes / 1e6, static_cast<unsigned long long>(bad),
                static_cast<unsigned long long>(rx.stats().total().dropped_records));
    if (lines != want || bad != 0 || bytes <= (1u << 20) || rx.stats().total().dropped_records != 0) ++failures;
  }
  return failures == 0 ? 0 : 1;
}
