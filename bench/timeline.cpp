// What the timeline costs (docs/timeline.md, docs/performance.md): N cpu devices (default 4) each tap 16 B
// records into one receiver, read by one consumer shared by all devices, with and without
// receiver_options::timestamps, merged (devtap::merged: one consumer in tap-time order), recorded
// (record_file) and traced (trace_file: every record one JSON event). Runs interleaved; records/s
// over all devices, median of the reps; the ratios are paired: median [q1-q3] of each rep's ratio. The
// files go to DIR (default /tmp) and are removed. --only runs the modes named (by the names printed,
// comma-separated: to profile one), and the ratios of those that ran.
//
//   devtap-bench-timeline [--reps N] [--records N] [--devices N] [--dir DIR] [--only MODE,...] [--smoke]
#include "common.hpp"

#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <unistd.h>

namespace {

using value = std::array<std::uint64_t, 2>;  // 16 B

enum class mode { plain, stamped, merged, recorded, traced };
constexpr mode modes[] = {mode::plain, mode::stamped, mode::merged, mode::recorded, mode::traced};
const char* name_of(mode m) {
  switch (m) {
    case mode::plain: return "shared";
    case mode::stamped: return "shared+timestamps";
    case mode::merged: return "merged";
    case mode::recorded: return "stamped+record_file";
    case mode::traced: return "stamped+trace_file";
  }
  return "?";
}

std::string dir = "/tmp";

// --only's list: the modes named run, the others not; false for a name that is no mode.
bool only(const std::string& list, bool (&runs)[std::size(modes)]) {
  std::fill(std::begin(runs), std::end(runs), false);
  for (std::size_t at = 0; at <= list.size();) {
    const std::size_t end = std::min(list.find(',', at), list.size());
    const std::string name = list.substr(at, end - at);
    const auto* m = std::find_if(std::begin(modes), std::end(modes), [&](mode k) { return name == name_of(k); });
    if (m == std::end(modes)) return false;
    runs[m - std::begin(modes)] = true;
    at = end + 1;
  }
  return true;
}

double run(devtap::cpu_client& cpus, mode m, std::uint64_t per_device) {
  const auto devices = cpus.cpu_devices();
  devtap::receiver_options o;
  o.devices.assign(devices.begin(), devices.end());
  o.budget_bytes = devices.size() << 20;
  o.timestamps = m != mode::plain;
  o.name = "bench-timeline";
  const std::string file = dir + "/devtap-bench-timeline." + std::to_string(::getpid());
  if (m == mode::recorded) o.record_file = file;
  if (m == mode::traced) o.trace_file = file;
  devtap::receiver rx(o);
  std::atomic<std::uint64_t> sum{0};
  std::uint64_t local = 0;
  auto fn = [&local](const value& v) { local += v[0]; };
  const devtap::tap_point<value> point =
      m == mode::merged ? rx.attach<value>(fn, devtap::merged) : rx.attach<value>(fn, devtap::shared);
  bench::start_gate gate;
  std::vector<std::future<void>> works;
  for (auto* d : devices)
    works.push_back(d->submit([&, per_device](devtap::cpu_context& ctx) {
      gate.wait();
      for (std::uint64_t i = 0; i < per_device; ++i) ctx.tap(point, value{i, 0});
    }));
  const std::uint64_t t0 = gate.open();
  for (auto& w : works) w.get();
  rx.close();  // every record delivered (merged: all held ones too), the files written and closed
  const double s = static_cast<double>(bench::now_ns() - t0) * 1e-9;
  std::remove(file.c_str());
  sum += local;
  const std::uint64_t expected = devices.size() * (per_device * (per_device - 1) / 2);
  if (sum.load() != expected) throw std::runtime_error(std::string(name_of(m)) + ": a record was lost or duplicated");
  return static_cast<double>(devices.size() * per_device) / s;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  int device_count = 4;
  std::uint64_t per_device = 500000;
  bool runs[std::size(modes)];
  std::fill(std::begin(runs), std::end(runs), true);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--records" && i + 1 < argc) per_device = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--devices" && i + 1 < argc) device_count = std::atoi(argv[++i]);
    else if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--smoke") reps = 1, per_device = 2000;
    else if (a == "--only" && i + 1 < argc && only(argv[++i], runs)) {
    } else {
      std::fprintf(stderr, "usage: %s [--reps N] [--records N] [--devices N] [--dir DIR] [--only MODE,...] [--smoke]\n"
                   "  modes: shared shared+timestamps merged stamped+record_file stamped+trace_file\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1 || per_device < 1 || device_count < 1 || device_count > 64) {
    std::fprintf(stderr, "%s: --reps and --records take a number of at least 1, --devices 1 to 64\n", argv[0]);
    return 2;
  }
  std::error_code not_a_dir;
  if (!std::filesystem::is_directory(dir, not_a_dir)) {  // the files go there: say so now, not as an exception later
    std::fprintf(stderr, "%s: --dir %s is not a directory\n", argv[0], dir.c_str());
    return 2;
  }
  devtap::cpu_client cpus(static_cast<std::size_t>(device_count));
  constexpr int n = static_cast<int>(std::size(modes));
  std::vector<double> rates[n];
  for (int r = 0; r < reps; ++r)
    for (int k = 0; k < n; ++k)
      if (runs[k]) rates[k].push_back(run(cpus, modes[k], per_device));
  std::printf("devtap timeline: %d cpu device(s), 16 B records, %llu per device, one consumer; %d rep(s)\n",
              device_count, static_cast<unsigned long long>(per_device), reps);
  for (int k = 0; k < n; ++k) {
    if (!runs[k]) continue;
    const bench::summary s = bench::summarize(rates[k]);
    std::printf("%-20s %10.2f M records/s  [%.2f - %.2f]", name_of(modes[k]), s.median * 1e-6, s.min * 1e-6, s.max * 1e-6);
    if (runs[0]) std::printf("  x shared %.2f", s.median / bench::summarize(rates[0]).median);
    std::printf("\n");
  }
  // Paired: each rep's ratio of two modes that ran one after the other, so the machine's drift
  // between reps cancels; the median of those counts against a target (docs/performance.md).
  auto paired = [&](int over, int under) {
    std::vector<double> ratios;
    for (int r = 0; r < reps; ++r) ratios.push_back(rates[over][r] / rates[under][r]);
    return bench::quartiles_of(ratios);
  };
  if (runs[2] && runs[1]) {
    const bench::quartiles merged = paired(2, 1);
    std::printf("merged x unmerged (both with timestamps, %d device(s)): %.2f [%.2f-%.2f] paired (issue 16 target >= 0.5 over 4)\n",
                device_count, merged.median, merged.q1, merged.q3);
  }
  if (runs[3] && runs[1]) {
    const bench::quartiles recorded = paired(3, 1);
    std::printf("recording x without (both with timestamps): %.2f [%.2f-%.2f] paired (issue 16 target >= 0.8)\n",
                recorded.median, recorded.q1, recorded.q3);
  }
  if (runs[1] && runs[0]) {
    const bench::quartiles stamped = paired(1, 0);
    std::printf("stamped x unstamped (%d device(s)): %.2f [%.2f-%.2f] paired\n", device_count, stamped.median, stamped.q1,
                stamped.q3);
  }
  if (runs[4])
    std::printf("trace writing: %.2f M events/s end to end (issue 16 target >= 1)\n", bench::summarize(rates[4]).median * 1e-6);
  return 0;
}
