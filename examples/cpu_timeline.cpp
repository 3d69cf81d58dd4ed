// One timeline for several devices: four cpu devices run a solver whose steps are scopes (forward,
// backward) and whose statistics are taps, print now and then, and ask the host for their decay
// every 20 steps (a call, on the timeline where it was asked). The receiver stamps every record
// on its device, writes a trace file (open it in ui.perfetto.dev or chrome://tracing) and a
// recording; a merged consumer sees every device's steps in the order they were tapped. After the
// run, the recording is replayed to the same kind of consumer and checked against the live run.
//
//   DEVTAP_CPU_DEVICES=4 ./build/examples/cpu_timeline [OUTPUT_DIR]
//   ./build/devtap-recording summary OUTPUT_DIR/timeline.devtap
#include <devtap/devtap.hpp>
#include <devtap/print_host.hpp>
#include <fmt/core.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <future>
#include <string>
#include <vector>

struct step_stats {
  int step;
  float loss;
  float grad_norm;
};
// The keys of a step's fields in the trace (else "0", "1", "2": C++20 cannot reflect names).
template <>
struct devtap::field_names<step_stats> {
  static constexpr std::array names{"step", "loss", "grad_norm"};
};

struct seen {  // what a consumer learnt of one record: compared between the live run and the replay
  std::string device;
  int step;
  float loss;
  std::chrono::steady_clock::time_point time;
  std::uint64_t sequence;
  bool operator==(const seen&) const = default;
};

namespace {
constexpr int steps = 100;

// Work that takes a little while, so that scopes have a width on the timeline.
double busy(double x, int rounds) {
  for (int i = 0; i < rounds; ++i) x = std::sqrt(x + 1.0);
  return x;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : ".";
  const std::string trace = dir + "/timeline.json", recording = dir + "/timeline.devtap";
  std::vector<seen> live;
  int calls = 0;
  {
    // merge_lag: how long a device may stay silent before the merged consumer stops waiting for it.
    // Generous here, so that the order holds even on a machine busy enough to stall a reader.
    devtap::receiver rx({.name = "timeline",
                         .timestamps = true,
                         .merge_lag = std::chrono::milliseconds(500),
                         .trace_file = trace,
                         .record_file = recording});
    // One consumer for every device, in tap order: the steps of all devices on one time line.
    auto point = rx.attach<step_stats>(
        [&](const step_stats& s, const devtap::tap_info& info) {
          live.push_back({info.device.name(), s.step, s.loss, info.time, info.sequence});
        },
        devtap::merged, "step");
    devtap::print_channel prints = devtap::attach_print(rx, {.sink = [](std::string_view) {}});  // lines: trace only
    // The host's answer to "which decay from this step on?"; info.time is when the device asked.
    std::atomic<int> asked_before_answered{0};
    auto schedule = rx.serve<int, double>(
        [&](const int& step, const devtap::tap_info& info) {
          asked_before_answered += info.stamped && info.time <= std::chrono::steady_clock::now();
          return step < steps / 2 ? 0.95 : 0.9;
        },
        "schedule");

    std::vector<std::future<double>> runs;
    int rank = 0;
    for (devtap::cpu_device* dev : devtap::cpu_devices()) {
      const int work = 2000 * (1 + rank++);  // the devices run at different speeds
      runs.push_back(dev->submit([=](devtap::cpu_context& ctx) {
        devtap::printer out(ctx, prints);
        double x = 1.0, loss = 1.0, decay = 1.0;
        for (int s = 0; s < steps; ++s) {
          if (s % 20 == 0) decay = ctx.call(schedule, s);  // this device waits for the answer
          auto step = ctx.scope("step");
          {
            auto forward = ctx.scope("forward");
            x = busy(x, work);
          }
          {
            auto backward = ctx.scope("backward");
            x = busy(x, 2 * work);
          }
          loss *= decay;
          ctx.tap(point, step_stats{s, static_cast<float>(loss), static_cast<float>(x)});
          if (s % 10 == 0) devtap::print<"step {} loss {:.4f}">(out, s, loss);
        }
        return x;
      }));
    }
    for (auto& r : runs) r.get();
    rx.close();  // the trace file and the recording are complete when close() returns
    const devtap::device_stats total = rx.stats().total();
    fmt::print("live: {} records from {} devices, {} dropped\n", total.records, runs.size(), total.dropped_records);
    fmt::print("calls: {} answered, each stamped when it was asked\n", asked_before_answered.load());
    calls = asked_before_answered.load();
  }

  bool in_order = true;
  for (std::size_t i = 1; i < live.size(); ++i) in_order = in_order && live[i - 1].time <= live[i].time;
  fmt::print("merged: {} steps of every device in tap order: {}\n", live.size(), in_order ? "yes" : "NO");

  // Offline: the recording re-delivered to a consumer attached by the point's name, merged again.
  devtap::replay rp(recording);
  std::vector<seen> replayed;
  rp.attach<step_stats>(
      "step",
      [&](const step_stats& s, const devtap::tap_info& info) {
        replayed.push_back({info.device.name(), s.step, s.loss, info.time, info.sequence});
      },
      devtap::merged);
  const devtap::replay_stats stats = rp.run();
  const bool same = live == replayed;  // the same records, devices, times and sequence numbers, in the same order
  fmt::print("replay: {} of {} recorded records delivered; matches the live run: {}\n", stats.delivered, stats.records,
             same ? "yes" : "NO");
  fmt::print("trace: {} ({} devices x {} steps: {} taps, {} scope begins and ends, {} prints, {} calls)\n", trace,
             rp.devices().size(), steps, rp.devices().size() * steps, rp.devices().size() * steps * 6,
             rp.devices().size() * (steps / 10), rp.devices().size() * (steps / 20));
  const bool all_calls = calls == static_cast<int>(rp.devices().size()) * (steps / 20);
  return same && in_order && all_calls && !live.empty() ? 0 : 1;
}
