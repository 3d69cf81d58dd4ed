// devtap::print against fmt::print from host threads (docs/print.md, issue 6): lines per second,
// side by side in one run, as a table (and CSV with --csv FILE).
//
//   fmt::print      T host threads each print their share of the lines with fmt::print(FILE*, ...)
//   devtap e2e      T cpu devices each print their share with devtap::print; from the first print
//                   until the printer has written every line (rx.flush())
//   devtap device   the same runs, until the devices' work returned: what printing costs the device
//                   (formatting and writing happen on the receiver's threads meanwhile)
//
// Every line goes to a FILE on /dev/null (the sink's cost is stdio's, not a disk's), is formatted
// from the same format and arguments, and is counted. Not a timed test: `--smoke` runs it tiny.
#include <devtap/devtap.hpp>
#include <devtap/print.hpp>
#include <devtap/print_host.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct result {
  double fmt_lps = 0, devtap_e2e_lps = 0, devtap_device_lps = 0;
};

double run_fmt(std::FILE* sink, int threads, long lines) {
  const long per = lines / threads;
  std::vector<std::thread> pool;
  const double t0 = now_s();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([=] {
      for (long i = 0; i < per; ++i)
        fmt::print(sink, "dev {} step {} loss {:.4f} tag {}\n", t, i, 1.0 / static_cast<double>(i + 1), std::string_view("train"));
    });
  for (auto& th : pool) th.join();
  std::fflush(sink);
  return static_cast<double>(per * threads) / (now_s() - t0);
}

void run_devtap(std::FILE* sink, int threads, long lines, double& e2e_lps, double& device_lps) {
  const long per = lines / threads;
  devtap::cpu_client cpus(threads);
  auto span = cpus.local_devices();
  devtap::receiver rx({.devices = {span.begin(), span.end()}, .budget_bytes = std::size_t{16} << 20 << (threads > 4 ? 1 : 0),
                       .name = "bench-print"});
  auto prints = devtap::attach_print(rx, {.sink = sink});
  std::vector<std::future<void>> done;
  const double t0 = now_s();
  for (devtap::cpu_device* dev : cpus.cpu_devices())
    done.push_back(dev->submit([prints, per](devtap::cpu_context& ctx) {
      const devtap::printer out(ctx, prints);
      const int d = ctx.device().id();
      for (long i = 0; i < per; ++i)
        devtap::print<"dev {} step {} loss {:.4f} tag {}">(out, d, i, 1.0 / static_cast<double>(i + 1), "train");
    }));
  for (auto& f : done) f.get();
  const double t1 = now_s();
  rx.flush();
  std::fflush(sink);
  const double t2 = now_s();
  rx.close();
  if (prints.stats().lines != static_cast<std::uint64_t>(per * threads)) {
    std::fprintf(stderr, "devtap::print wrote %llu lines, not %ld\n", static_cast<unsigned long long>(prints.stats().lines),
                 per * threads);
    std::exit(1);
  }
  e2e_lps = static_cast<double>(per * threads) / (t2 - t0);
  device_lps = static_cast<double>(per * threads) / (t1 - t0);
}

}  // namespace

int main(int argc, char** argv) {
  long lines = 2'000'000;
  int reps = 3;
  std::vector<int> thread_counts{1, 2, 4, 8};
  const char* csv_path = nullptr;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      lines = 20'000;
      reps = 1;
      thread_counts = {1, 2};
    } else if (a == "--lines" && i + 1 < argc) {
      lines = std::atol(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--threads" && i + 1 < argc) {
      thread_counts.clear();
      for (char* p = argv[++i]; *p != '\0';) {
        thread_counts.push_back(static_cast<int>(std::strtol(p, &p, 10)));
        if (*p == ',') ++p;
      }
    } else if (a == "--csv" && i + 1 < argc) {
      csv_path = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--smoke] [--lines N] [--reps R] [--threads 1,2,4] [--csv FILE]\n", argv[0]);
      return 2;
    }
  }
  devtap::set_log_level(devtap::log_level::warn);
  std::FILE* sink = std::fopen("/dev/null", "w");
  if (sink == nullptr) return 1;

  std::vector<std::pair<int, result>> rows;
  for (int threads : thread_counts) {
    result best;
    for (int r = 0; r < reps; ++r) {
      best.fmt_lps = std::max(best.fmt_lps, run_fmt(sink, threads, lines));
      double e2e = 0, dev = 0;
      run_devtap(sink, threads, lines, e2e, dev);
      best.devtap_e2e_lps = std::max(best.devtap_e2e_lps, e2e);
      best.devtap_device_lps = std::max(best.devtap_device_lps, dev);
    }
    rows.emplace_back(threads, best);
  }

  fmt::print("devtap::print vs fmt::print, {} lines per run, best of {}, FILE on /dev/null, {} hardware threads\n\n",
             lines, reps, std::thread::hardware_concurrency());
  fmt::print("| threads | fmt::print lines/s | devtap e2e lines/s | e2e / fmt | devtap device lines/s | device / fmt |\n");
  fmt::print("|--------:|-------------------:|-------------------:|----------:|----------------------:|-------------:|\n");
  for (const auto& [threads, r] : rows)
    fmt::print("| {:7} | {:18.3e} | {:18.3e} | {:9.2f} | {:21.3e} | {:12.2f} |\n", threads, r.fmt_lps, r.devtap_e2e_lps,
               r.devtap_e2e_lps / r.fmt_lps, r.devtap_device_lps, r.devtap_device_lps / r.fmt_lps);
  if (csv_path != nullptr) {
    std::FILE* csv = std::fopen(csv_path, "w");
    if (csv == nullptr) return 1;
    fmt::print(csv, "threads,fmt_print_lps,devtap_e2e_lps,devtap_device_lps\n");
    for (const auto& [threads, r] : rows)
      fmt::print(csv, "{},{:.0f},{:.0f},{:.0f}\n", threads, r.fmt_lps, r.devtap_e2e_lps, r.devtap_device_lps);
    std::fclose(csv);
  }
  std::fclose(sink);
  return 0;
}
