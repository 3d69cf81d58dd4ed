// Lists devtap's backends, their devices, and why any backend could not start.
//   ./build/examples/list_backends          (DEVTAP_LOG=debug for the registry's own lines)
#include <devtap/backend.hpp>

#include <fmt/core.h>

#include <exception>

int main() try {
  const auto usable = devtap::backends();  // starts every backend (once)
  fmt::print("default backend: {}\n", devtap::default_backend());
  for (devtap::client* c : usable) {
    fmt::print("backend {} (process {}): {} device(s)\n", c->platform(), c->process_index(), c->device_count());
    for (devtap::device* d : c->local_devices()) fmt::print("  [{}] {}\n", d->id(), d->name());
  }
  for (const auto& [name, reason] : devtap::backend_errors()) fmt::print("backend {} unavailable: {}\n", name, reason);

  // A cpu device runs work on its own thread and hands back the result.
  devtap::cpu_device& cpu0 = *devtap::cpu_devices()[0];
  const int answer = cpu0.run([](devtap::cpu_context& ctx) { return 40 + ctx.device().id() + 2; });
  fmt::print("work on {} returned {}\n", cpu0.name(), answer);
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "list_backends: {}\n", e.what());
  return 1;
}
