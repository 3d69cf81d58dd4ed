// What it costs to pick up a receiver: open + close with the default budget on N cpu devices, as
// time (median and p90 of many rounds) and resident memory (RSS growth over the process's own).
// A program, not a timed test: `devtap-bench-open [devices] [rounds]`; prints one line per figure
// and a CSV row (`--csv`).
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace {
double rss_mib() {  // resident set size, from /proc/self/statm (pages)
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  long size = 0, resident = 0;
  if (f != nullptr) {
    if (std::fscanf(f, "%ld %ld", &size, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}
}  // namespace

int main(int argc, char** argv) {
  const int devices = argc > 1 ? std::atoi(argv[1]) : 4;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 50;
  const bool csv = argc > 3 && std::strcmp(argv[3], "--csv") == 0;
  devtap::cpu_client cpus(devices);
  std::vector<devtap::device*> devs{cpus.local_devices().begin(), cpus.local_devices().end()};
  const double rss_before = rss_mib();
  double rss_peak_open = 0;
  std::vector<double> open_ms, close_ms;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    devtap::receiver rx({.devices = devs, .name = "open-bench"});  // the default budget: 256 MiB
    const auto t1 = std::chrono::steady_clock::now();
    rss_peak_open = std::max(rss_peak_open, rss_mib() - rss_before);
    rx.close();
    const auto t2 = std::chrono::steady_clock::now();
    open_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    close_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  // A run that never has more than 1 MiB in flight: RSS after it, against before.
  {
    devtap::receiver rx({.devices = devs, .name = "open-bench-run"});
    auto point = rx.attach<std::array<char, 1000>>([](const std::array<char, 1000>&) {});
    for (int k = 0; k < 20; ++k) {
      for (auto* dev : cpus.cpu_devices())
        dev->run([&](devtap::cpu_context& ctx) {
          for (int i = 0; i < 1000; ++i) ctx.tap(point, std::array<char, 1000>{});  // 1 MB per device
        });
      rx.flush();
    }
    rx.close();
  }
  const double rss_after_run = rss_mib() - rss_before;
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  auto p90 = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() * 9 / 10];
  };
  if (csv) {
    fmt::print("devices,rounds,open_ms_median,open_ms_p90,close_ms_median,rss_growth_open_mib,rss_growth_after_run_mib\n");
    fmt::print("{},{},{:.3f},{:.3f},{:.3f},{:.1f},{:.1f}\n", devices, rounds, median(open_ms), p90(open_ms),
               median(close_ms), rss_peak_open, rss_after_run);
    return 0;
  }
  fmt::print("open a receiver (256 MiB default budget, {} cpu devices, {} rounds):\n", devices, rounds);
  fmt::print("  open  median {:.3f} ms, p90 {:.3f} ms\n", median(open_ms), p90(open_ms));
  fmt::print("  close median {:.3f} ms\n", median(close_ms));
  fmt::print("  RSS growth while open: {:.1f} MiB; after a run with <= 1 MiB in flight: {:.1f} MiB\n", rss_peak_open,
             rss_after_run);
}
