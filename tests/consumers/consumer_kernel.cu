// The consumption test's CUDA program, built by nvcc with `pkg-config --cflags --libs devtap-cuda`
// and nothing else: the .pc flags must work unchanged with nvcc. cpu devices tap as in consumer.cpp
// (that part runs anywhere); with a GPU a kernel taps too and every record must arrive in order.
// Without a GPU driver or device the kernel part is skipped (reported); any other CUDA error fails
// (devtap::probe_cuda tells the two apart).
#include <devtap/devtap.hpp>

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

struct sample {
  std::int32_t step;
  double value;
};

constexpr int steps = 1000;

__global__ void tap_samples(devtap::outfeed out, devtap::tap_point<sample> point) {
  for (int i = 0; i < steps; ++i) out.tap(point, sample{i, 0.5 * i});
}

// Counts the samples of one device and checks their order; false when anything is off.
bool run(devtap::device& dev, bool kernel) {
  int count = 0;
  bool in_order = true;
  devtap::receiver rx({.devices = {&dev}, .budget_bytes = 1 << 16, .name = "consumer_kernel"});
  auto point = rx.attach<sample>([&](const sample& s) {
    in_order = in_order && s.step == count;
    ++count;
  });
  if (kernel) {
    tap_samples<<<1, 1>>>(rx.outfeed(dev), point);
    if (cudaGetLastError() != cudaSuccess) return false;
  } else {
    devtap::as_cpu_device(dev).submit([=](devtap::cpu_context& ctx) {
      for (int i = 0; i < steps; ++i) ctx.tap(point, sample{i, 0.5 * i});
    });
  }
  rx.close();
  std::printf("%s: %d samples, in order: %s\n", dev.name().c_str(), count, in_order ? "yes" : "no");
  return count == steps && in_order;
}

}  // namespace

int main() {
  static_assert(devtap::default_registry::contains("cuda"), "devtap-cuda.pc must pass DEVTAP_WITH_CUDA=1");
  if (!run(*devtap::devices("cpu")[0], false)) return 1;
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("consumer_kernel: no usable GPU (%s): the kernel part is %s\n", gpu.reason.c_str(),
                gpu.nothing_to_run_on() ? "skipped" : "FAILED");
    return gpu.nothing_to_run_on() ? 0 : 1;
  }
  return run(*devtap::devices("cuda")[0], true) ? 0 : 1;
}
