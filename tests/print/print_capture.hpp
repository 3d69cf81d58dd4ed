#pragma once
// What the print tests share: a callable sink that keeps every line, and a run of one cpu device
// printing into it.
#include <devtap/backend/cpu.hpp>
#include <devtap/print.hpp>
#include <devtap/receiver/receiver.hpp>

#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace devtap_test {

inline std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

// A callable sink that keeps every line, in order and per device.
struct captured {
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> by_device;
  std::vector<std::string> lines;
  devtap::print_sink sink() {
    return [this](std::string_view line, const devtap::device& dev) {
      std::lock_guard lock(mutex);  // the printer serialises calls; this guards the test's own reads
      by_device[dev.name()].emplace_back(line);
      lines.emplace_back(line);
    };
  }
};

struct printed {
  std::vector<std::string> lines;
  devtap::print_stats stats;
};

// Runs `fn(printer)` on one cpu device (a 64 KiB ring) with a printer into a captured sink; returns,
// once the receiver closed, the lines and the printer's counters.
template <class Fn>
printed print_on_one_device(Fn fn, devtap::print_prefix prefix = devtap::print_prefix::none) {
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16, .name = "print-test"});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink(), .prefix = prefix});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { fn(devtap::printer(ctx, ch)); });
  rx.close();
  return {std::move(cap.lines), ch.stats()};
}

}  // namespace devtap_test
