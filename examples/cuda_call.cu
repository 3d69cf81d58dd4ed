// A kernel that asks the host mid-run and changes course on the answer: every block runs an
// iterative solve (Newton's method for the square root of its own number), and after each step
// its first thread asks the host whether the block may stop, and with what damping to go on.
// The host answers from a handler that keeps its own statistics; no kernel boundary, no cudaMemcpy.
//
//   cuda_call [--as-test]
//
// Without a GPU it says so and exits 0 (77 with --as-test, which meson reports as SKIP).
#include <devtap/devtap.hpp>

#include <cuda_runtime.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

struct query {
  std::uint32_t block;
  std::uint32_t step;
  float residual;
};
struct answer {
  float damping;  // how far to move this step
  bool stop;      // the host says: converged
};

__global__ void solve(devtap::outfeed out, devtap::call_point<query, answer> ask, float* roots,
                      std::uint32_t* steps_taken, std::uint32_t* failed_calls) {
  __shared__ float x;
  __shared__ bool stop;
  const float target = 2.0f + static_cast<float>(blockIdx.x);
  if (threadIdx.x == 0) x = target;  // start far from sqrt(target)
  __syncthreads();
  for (std::uint32_t step = 0; step < 200; ++step) {
    if (threadIdx.x == 0) {
      const float residual = fabsf(x * x - target);
      const devtap::call_result<answer> r = out.call(ask, query{blockIdx.x, step, residual});
      if (!r.ok()) {  // the receiver closed, or the handler threw: stop, and say so
        atomicAdd(failed_calls, 1u);
        stop = true;
      } else {
        stop = r->stop;
        if (!stop) x -= r->damping * (x * x - target) / (2.0f * x);  // a damped Newton step
      }
      steps_taken[blockIdx.x] = step;
    }
    __syncthreads();
    if (stop) break;
  }
  if (threadIdx.x == 0) roots[blockIdx.x] = x;
}

}  // namespace

int main(int argc, char** argv) {
  const bool as_test = argc > 1 && std::strcmp(argv[1], "--as-test") == 0;
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("cuda_call: no usable GPU (%s): nothing to show here; examples/cpu_call is the CPU version\n",
                gpu.reason.c_str());
    if (!gpu.nothing_to_run_on()) return 1;  // a driver is there and CUDA still fails: an error
    return as_test ? 77 : 0;
  }
  devtap::device& gpu = *devtap::devices("cuda")[0];
  constexpr unsigned blocks = 64, threads = 128;

  devtap::receiver rx({.devices = {&gpu}, .budget_bytes = 1u << 20, .name = "cuda_call"});
  std::atomic<unsigned> asked{0};
  // The handler: damping grows with the step (a trust region that widens); stop below 1e-5.
  auto ask = rx.serve<query, answer>([&](const query& q) {
    asked.fetch_add(1, std::memory_order_relaxed);
    return answer{std::fmin(1.0f, 0.25f + 0.05f * static_cast<float>(q.step)), q.residual < 1e-5f * (2.0f + q.block)};
  });

  float* roots = nullptr;
  std::uint32_t *steps = nullptr, *failed = nullptr;
  if (cudaMallocManaged(&roots, blocks * sizeof(float)) != cudaSuccess ||
      cudaMallocManaged(&steps, blocks * sizeof(std::uint32_t)) != cudaSuccess ||
      cudaMallocManaged(&failed, sizeof(std::uint32_t)) != cudaSuccess) {
    std::printf("cudaMallocManaged failed\n");
    return 1;
  }
  *failed = 0;
  solve<<<blocks, threads>>>(rx.outfeed(gpu), ask, roots, steps, failed);
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    std::printf("launch failed: %s\n", cudaGetErrorString(e));
    return 1;
  }
  const cudaError_t synced = cudaDeviceSynchronize();  // the handler answers meanwhile, on the receiver's thread
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
  double worst = 0;
  unsigned total_steps = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    worst = std::fmax(worst, std::fabs(static_cast<double>(roots[b]) - std::sqrt(2.0 + b)));
    total_steps += steps[b] + 1;
  }
  std::printf("cuda_call: %s, %u blocks asked the host %u times (%u steps); worst root error %.2e; %u failed calls\n",
              gpu.name().c_str(), blocks, asked.load(), total_steps, worst, *failed);
  if (as_test) {
    const bool ok = *failed == 0 && asked.load() == total_steps && worst < 1e-3;
    std::printf("%s\n", ok ? "ok" : "FAILED: expected every call answered and every root within 1e-3");
    return ok ? 0 : 1;
  }
  return 0;
}
