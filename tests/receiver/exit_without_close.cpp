// A program that calls std::exit with a receiver open: the receiver is closed at exit, its
// consumers see every record and their end of stream. (A separate program: it exits.)
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace {
constexpr long taps = 100000;
std::atomic<long> delivered{0};
std::atomic<bool> ended{false};

devtap::consumer<long> count(devtap::inbox<long> in) {
  while (auto value = co_await in.next()) delivered.fetch_add(1, std::memory_order_relaxed);
  ended = true;
}
}  // namespace

int main() {
  // Registered before the receiver's exit handler, so it runs after it (handlers run in reverse).
  std::atexit([] {
    const bool ok = delivered.load() == taps && ended.load();
    std::printf("delivered %ld of %ld, end of stream %s\n", delivered.load(), taps, ended.load() ? "seen" : "not seen");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  auto* cpus = new devtap::cpu_client(1);  // never destroyed: std::exit destroys no local either
  auto* rx = new devtap::receiver({.devices = {cpus->local_devices()[0]}, .name = "at-exit"});
  auto point = rx->attach<long>(count);
  (void)cpus->cpu_devices()[0]->submit([point](devtap::cpu_context& ctx) {
    for (long i = 0; i < taps; ++i) ctx.tap(point, i);
  });
  std::exit(0);  // no close(), no flush(): the exit handler must drain
}
