// A device of one's own backend destroyed while a receiver still drains it: the receiver would call
// into freed memory (ASan saw a heap-use-after-free in close()). devtap logs why and aborts instead;
// this program passes when the abort comes with that line. (A separate program: it aborts.)
#include <devtap/receiver/receiver.hpp>
#include <devtap/ring/memory.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <functional>
#include <memory>
#include <string_view>

#include <unistd.h>

namespace {
std::atomic<bool> saw_line{false};

struct own_device final : devtap::device {
  own_device() : device(0, "own", "own:0", 0) {}
  std::unique_ptr<devtap::detail::ring_allocation> allocate_ring(std::uint64_t capacity) override {
    return std::make_unique<devtap::detail::host_ring_allocation>(capacity);
  }
  void after_pending_work(std::function<void()> fn) override { run_pending_work_callback(fn); }
};
}  // namespace

int main() {
  devtap::set_log_sink([](devtap::log_level, std::string_view line) {
    if (line.find("device 'own:0' destroyed while a receiver still drains it") != std::string_view::npos) saw_line = true;
  });
  std::signal(SIGABRT, [](int) { ::_exit(saw_line ? 0 : 1); });
  auto dev = std::make_unique<own_device>();
  devtap::receiver rx({.devices = {dev.get()}});
  dev.reset();  // the client's mistake: the device goes first
  std::puts("the device was destroyed under its receiver without an abort");
  return 1;
}
