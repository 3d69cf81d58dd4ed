// The backend headers compiled by nvcc: they must build without {fmt}, and the registry seen from a
// .cu file is the same as from a .cpp file (DEVTAP_WITH_CUDA, not __CUDACC__, decides).
#include <devtap/backend.hpp>

#include <cstdio>

#if !defined(DEVTAP_WITH_CUDA)
#error "DEVTAP_WITH_CUDA must reach .cu files through devtap_dep"
#endif
static_assert(devtap::default_registry::contains("cuda") && devtap::default_registry::contains("cpu"));
static_assert(devtap::default_registry::names[0] == "cuda");

__global__ void noop() {}

int main() {
  devtap::set_log_level(devtap::log_level::error);
  const auto all = devtap::backends();
  const int on_cpu = devtap::cpu_devices()[0]->run([](devtap::cpu_context& ctx) { return ctx.device().id() + 1; });
  std::printf("default backend: %.*s, %zu usable backend(s), cpu work -> %d\n",
              static_cast<int>(devtap::default_backend().size()), devtap::default_backend().data(), all.size(), on_cpu);
  return on_cpu == 1 && !all.empty() ? 0 : 1;
}
