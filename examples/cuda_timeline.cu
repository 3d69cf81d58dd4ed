// A kernel on one timeline with the host: every block marks its phases as scopes (load, solve,
// store) and taps its residual after each solve step; the receiver stamps every record with the
// GPU's %globaltimer mapped onto the host's clock (calibrated at open, within the bound it prints),
// writes a trace file (ui.perfetto.dev) and a recording, and the recording is replayed afterwards.
//
//   cuda_timeline [--as-test] [OUTPUT_DIR]
//   ./build/devtap-recording summary OUTPUT_DIR/cuda_timeline.devtap
//
// Without a GPU it says so and exits 0 (77 with --as-test, which meson reports as SKIP).
#include <devtap/devtap.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

struct residual {
  std::uint32_t block;
  std::uint32_t step;
  float value;
};

enum : std::uint32_t { load_scope = 1, solve_scope = 2, store_scope = 3 };

__global__ void solve(devtap::outfeed out, devtap::tap_point<residual> point, float* result, int steps) {
  __shared__ float x;
  const bool first = threadIdx.x == 0;
  if (first) out.scope_begin(load_scope);
  if (first) x = 1.0f + static_cast<float>(blockIdx.x);
  __syncthreads();
  if (first) out.scope_end(load_scope);
  if (first) out.scope_begin(solve_scope);
  const float target = 2.0f + static_cast<float>(blockIdx.x);
  for (int s = 0; s < steps; ++s) {
    if (first) {
      x -= 0.5f * (x * x - target) / (2.0f * x);  // a damped Newton step
      out.tap(point, residual{blockIdx.x, static_cast<std::uint32_t>(s), fabsf(x * x - target)});
    }
    __syncthreads();
  }
  if (first) out.scope_end(solve_scope);
  if (first) out.scope_begin(store_scope);
  if (first) result[blockIdx.x] = x;
  if (first) out.scope_end(store_scope);
}

}  // namespace

int main(int argc, char** argv) {
  const bool as_test = argc > 1 && std::strcmp(argv[1], "--as-test") == 0;
  const std::string dir = argc > (as_test ? 2 : 1) ? argv[as_test ? 2 : 1] : ".";
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("cuda_timeline: no usable GPU (%s): nothing to show here; examples/cpu_timeline is the CPU version\n",
                gpu.reason.c_str());
    if (!gpu.nothing_to_run_on()) return 1;  // a driver is there and CUDA still fails: an error
    return as_test ? 77 : 0;
  }
  devtap::device& gpu = *devtap::devices("cuda")[0];
  constexpr unsigned blocks = 32;
  constexpr int steps = 50;
  const std::string trace = dir + "/cuda_timeline.json", recording = dir + "/cuda_timeline.devtap";

  std::uint64_t live = 0, unstamped = 0;
  std::uint64_t clock_error = 0;
  {
    devtap::receiver rx({.devices = {&gpu}, .budget_bytes = 4u << 20, .name = "cuda_timeline", .timestamps = true,
                         .trace_file = trace, .record_file = recording});
    rx.name_scope(load_scope, "load");
    rx.name_scope(solve_scope, "solve");
    rx.name_scope(store_scope, "store");
    auto point = rx.attach<residual>(
        [&](const residual&, const devtap::tap_info& info) {
          ++live;
          unstamped += !info.stamped;
        },
        "residual");
    float* result = nullptr;
    if (cudaMallocManaged(&result, blocks * sizeof(float)) != cudaSuccess) {
      std::printf("cudaMallocManaged failed\n");
      return 1;
    }
    solve<<<blocks, 64>>>(rx.outfeed(gpu), point, result, steps);
    if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
      std::printf("launch failed: %s\n", cudaGetErrorString(e));
      return 1;
    }
    const cudaError_t synced = cudaDeviceSynchronize();
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
    clock_error = rx.stats().devices[0].clock_error_ns;
    cudaFree(result);
  }
  devtap::replay rp(recording);
  std::uint64_t replayed = 0;
  rp.attach<residual>("residual", [&](const residual&, const devtap::tap_info& info) { replayed += info.stamped; });
  const devtap::replay_stats stats = rp.run();
  std::printf("cuda_timeline: %s, %llu stamped taps (GPU clock within +-%llu ns of the host's), %llu scope ends; "
              "replayed %llu; trace %s\n",
              gpu.name().c_str(), static_cast<unsigned long long>(live), static_cast<unsigned long long>(clock_error),
              static_cast<unsigned long long>(stats.records - live), static_cast<unsigned long long>(replayed),
              trace.c_str());
  if (as_test) {
    const bool ok = live == blocks * steps && unstamped == 0 && replayed == live &&
                    stats.records - live == blocks * 6 && clock_error < 1000000;
    std::printf("%s\n", ok ? "ok" : "FAILED: expected every tap stamped and replayed, 6 scope ends per block");
    return ok ? 0 : 1;
  }
  return 0;
}
