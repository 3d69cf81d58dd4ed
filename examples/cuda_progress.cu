// A kernel that runs for seconds — a Monte Carlo estimate of pi over every SM — and a host that
// shows a live progress bar and running statistics from its taps *while it runs*.
//
//   cuda_progress [--seconds S] [--as-test]
//
// Each block taps a `progress` record about every 10 ms of its run (from inside the kernel: no
// kernel boundary, no cudaMemcpy, no printf); one consumer coroutine folds them into the bar.
// Without a GPU it says so and exits 0 (77 with --as-test, which meson reports as SKIP).
#include <devtap/devtap.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct progress {
  std::uint32_t block;
  std::uint32_t step;
  std::uint64_t elapsed_ns;  // since this block started (the GPU's global timer)
  std::uint64_t samples;     // since the previous tap of this block
  std::uint64_t hits;        // of them, inside the quarter circle
};

__device__ inline std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ inline std::uint64_t next_random(std::uint64_t& s) {  // xorshift64*
  s ^= s >> 12;
  s ^= s << 25;
  s ^= s >> 27;
  return s * 0x2545f4914f6cdd1dull;
}

constexpr std::uint64_t tap_every_ns = 10'000'000;  // 10 ms

__global__ void monte_carlo(devtap::outfeed out, devtap::tap_point<progress> point, std::uint64_t duration_ns) {
  __shared__ unsigned long long block_hits;
  __shared__ bool stop;
  const std::uint64_t start = global_ns();
  std::uint64_t state = 0x9e3779b97f4a7c15ull * (blockIdx.x * blockDim.x + threadIdx.x + 1);
  std::uint64_t next_tap = tap_every_ns, samples = 0, hits = 0;
  constexpr int per_round = 256;
  for (std::uint32_t step = 0;; ++step) {
    if (threadIdx.x == 0) block_hits = 0;
    __syncthreads();
    unsigned mine = 0;
    for (int i = 0; i < per_round; ++i) {
      const std::uint64_t r = next_random(state);
      const float x = static_cast<float>(r >> 40) * 0x1p-24f, y = static_cast<float>((r >> 16) & 0xffffff) * 0x1p-24f;
      mine += x * x + y * y <= 1.0f;
    }
    atomicAdd(&block_hits, static_cast<unsigned long long>(mine));
    __syncthreads();
    if (threadIdx.x == 0) {
      samples += std::uint64_t{per_round} * blockDim.x;
      hits += block_hits;
      const std::uint64_t elapsed = global_ns() - start;
      stop = elapsed >= duration_ns;
      if (elapsed >= next_tap || stop) {  // one thread per block taps: the hot loop stays untouched
        out.tap(point, progress{blockIdx.x, step, elapsed, samples, hits});
        samples = hits = 0;
        next_tap = elapsed + tap_every_ns;
      }
    }
    __syncthreads();
    if (stop) return;
  }
}

struct options {
  double seconds = 3.0;
  bool as_test = false;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--as-test") == 0) {
      o.as_test = true;
      o.seconds = 1.0;
    } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
      o.seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--as-test]\n", argv[0]);
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const options opt = parse(argc, argv);
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("cuda_progress: no usable GPU (%s): nothing to show here; examples/cpu_progress is the CPU version\n",
                gpu.reason.c_str());
    if (!gpu.nothing_to_run_on()) return 1;  // a driver is there and CUDA still fails: an error
    return opt.as_test ? 77 : 0;
  }
  devtap::device& gpu = *devtap::devices("cuda")[0];
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const unsigned blocks = 2u * static_cast<unsigned>(sms), threads = 256;
  const auto duration_ns = static_cast<std::uint64_t>(opt.seconds * 1e9);

  std::atomic<bool> kernel_done{false};
  std::uint64_t taps = 0, taps_while_running = 0;
  double final_pi = 0;

  devtap::receiver rx({.devices = {&gpu}, .budget_bytes = 16u << 20, .name = "cuda_progress"});
  auto point = rx.attach<progress>([&](devtap::inbox<progress> in) -> devtap::consumer<progress> {
    std::vector<std::uint64_t> block_elapsed(blocks, 0);
    std::uint64_t samples = 0, hits = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto last_draw = t0 - std::chrono::seconds(1);
    auto draw = [&](bool final) {
      std::uint64_t slowest = ~std::uint64_t{0};
      for (auto e : block_elapsed) slowest = e < slowest ? e : slowest;
      const double frac = std::fmin(1.0, static_cast<double>(slowest) / static_cast<double>(duration_ns));
      const double p = samples ? static_cast<double>(hits) / static_cast<double>(samples) : 0.0;
      const double pi = 4 * p, err = samples ? 4 * std::sqrt(p * (1 - p) / static_cast<double>(samples)) : 0.0;
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      char bar[31];
      const int filled = static_cast<int>(frac * 30);
      for (int i = 0; i < 30; ++i) bar[i] = i < filled ? '#' : '.';
      bar[30] = '\0';
      std::fprintf(stderr, "\r[%s] %3.0f%%  pi ~ %.7f +- %.1e  %.3g samples (%.3g/s)  %llu taps%s", bar, 100 * frac,
                   pi, err, static_cast<double>(samples), secs > 0 ? static_cast<double>(samples) / secs : 0.0,
                   static_cast<unsigned long long>(taps), final ? "\n" : "");
      final_pi = pi;
    };
    while (auto p = co_await in.next()) {
      ++taps;
      if (!kernel_done.load(std::memory_order_relaxed)) ++taps_while_running;
      if (p->block < blocks) block_elapsed[p->block] = p->elapsed_ns;
      samples += p->samples;
      hits += p->hits;
      if (const auto now = std::chrono::steady_clock::now(); now - last_draw > std::chrono::milliseconds(100)) {
        draw(false);
        last_draw = now;
      }
    }
    draw(true);
  });

  std::printf("cuda_progress: %s, %u blocks x %u threads, %.1f s of Monte Carlo; taps every ~10 ms per block\n",
              gpu.name().c_str(), blocks, threads, opt.seconds);
  monte_carlo<<<blocks, threads>>>(rx.outfeed(gpu), point, duration_ns);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    std::printf("launch failed: %s\n", cudaGetErrorString(e));
    return 1;
  }
  const cudaError_t synced = cudaDeviceSynchronize();  // the bar moves meanwhile: the receiver's thread draws it
  kernel_done = true;
  try {
    rx.close();
  } catch (const std::exception& e) {
    std::printf("close: %s\n", e.what());
    return 1;
  }
  if (synced != cudaSuccess) {
    std::printf("kernel failed: %s\n", cudaGetErrorString(synced));
    return 1;
  }
  const auto st = rx.stats().total();
  std::printf("%llu taps, %llu of them consumed while the kernel was still running; dropped %llu; pi ~ %.7f\n",
              static_cast<unsigned long long>(taps), static_cast<unsigned long long>(taps_while_running),
              static_cast<unsigned long long>(st.dropped_records), final_pi);
  if (opt.as_test) {
    const bool ok = taps_while_running > 0 && st.dropped_records == 0 && std::fabs(final_pi - M_PI) < 1e-2;
    std::printf("%s\n", ok ? "ok" : "FAILED: expected taps during the run, none dropped, pi within 1e-2");
    return ok ? 0 : 1;
  }
  return 0;
}
