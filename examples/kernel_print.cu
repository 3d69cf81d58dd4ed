// devtap::print from a CUDA kernel: every thread prints fmt-style lines while the kernel runs;
// the host formats them with {fmt} and writes whole lines, in order per device. Unlike printf,
// nothing is overwritten (printf keeps 1 MB, then drops the oldest) and lines show up before the
// kernel ends.
//
// A .cu file cannot include {fmt}: this file includes only <devtap/print.hpp> (fmt-free), and the
// formatter is compiled in kernel_print_host.cpp, whose whole content is
// `#include <devtap/print_host.hpp>`. attach_print works from here all the same; without that file
// the program would not link (docs/print.md).
//
//   ./build/examples/kernel_print        (needs a GPU; says so and exits without one)
//   ./build/examples/kernel_print --as-test   (the test: checks the line count; exit 77 without a GPU)
#include <devtap/devtap.hpp>
#include <devtap/print.hpp>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

__global__ void simulate(devtap::printer out, int steps) {
  const unsigned tid = blockIdx.x * blockDim.x + threadIdx.x;
  float energy = 1.0f + 0.01f * static_cast<float>(tid);
  for (int step = 0; step < steps; ++step) {
    energy *= 0.9f;
    if (step % 4 == 0)
      devtap::print<"block {:2} thread {:3} step {:2} energy {:.5f}">(out, blockIdx.x, threadIdx.x, step, energy);
  }
  if (threadIdx.x == 0) devtap::print<"block {} done">(out, blockIdx.x);
}

int main(int argc, char** argv) {
  const bool as_test = argc > 1 && std::strcmp(argv[1], "--as-test") == 0;
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("kernel_print: no usable GPU (%s); nothing to print\n", gpu.reason.c_str());
    if (!gpu.nothing_to_run_on()) return 1;  // a driver is there and CUDA still fails: an error
    return as_test ? 77 : 0;
  }
  devtap::device* gpu = devtap::devices("cuda")[0];
  devtap::receiver rx({.devices = {gpu}, .name = "kernel_print"});
  auto prints = devtap::attach_print(rx, {.prefix = devtap::print_prefix::elapsed});
  const unsigned blocks = 4, threads = 64;
  const int steps = 16;
  simulate<<<blocks, threads>>>(prints.on(rx.outfeed(*gpu)), steps);
  if (cudaError_t e = cudaDeviceSynchronize(); e != cudaSuccess) {
    std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(e));
    return 1;
  }
  rx.close();
  const unsigned long long lines = prints.stats().lines;
  const unsigned long long expected = blocks * threads * (steps / 4) + blocks;
  std::printf("%llu lines from the kernel\n", lines);
  return !as_test || lines == expected ? 0 : 1;
}
