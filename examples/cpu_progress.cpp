// The example to read first: several cpu devices each fit a line by gradient descent, and stream
// their progress and per-epoch statistics to coroutine consumers while they run.
//
//   DEVTAP_CPU_DEVICES=4 ./build/examples/cpu_progress
#include <devtap/devtap.hpp>
#include <fmt/core.h>

#include <cmath>
#include <random>
#include <span>
#include <vector>

// What the devices tap: plain structs (sent as raw bytes) and an aggregate holding a span
// (flattened on the device, rebuilt on the host as a view of the received bytes).
struct progress {
  int epoch;
  float loss;
};
struct epoch_stats {
  int epoch;
  std::span<const float> gradients;  // one per parameter
};

// One coroutine per device: it keeps its own state across taps and sees the end of its stream.
devtap::consumer<progress> report(devtap::inbox<progress> in) {
  float best = INFINITY;
  int count = 0;
  while (auto p = co_await in.next()) {
    best = std::min(best, p->loss);
    ++count;
    if (p->epoch % 50 == 0)
      fmt::print("[{}] epoch {:4d}  loss {:9.5f}  best {:9.5f}\n", in.device().name(), p->epoch, p->loss, best);
  }
  fmt::print("[{}] stream ended after {} progress records; best loss {:.6f}\n", in.device().name(), count, best);
}

// One instance shared by every device (devtap::shared): records arrive one at a time.
devtap::consumer<epoch_stats> largest_gradient(devtap::inbox<epoch_stats> in) {
  float largest = 0;
  while (auto s = co_await in.next())
    for (float g : s->gradients) largest = std::max(largest, std::abs(g));
  fmt::print("largest gradient component seen on any device: {:.4f}\n", largest);
}

int main() {
  // Every device of every backend this program was built with: cpu here (the `devtap` dependency;
  // `devtap-cuda` would add the GPUs).
  devtap::receiver rx({.budget_bytes = 1 << 20, .name = "fit"});
  auto progress_tap = rx.attach<progress>(report);
  auto stats_tap = rx.attach<epoch_stats>(largest_gradient, devtap::shared);

  for (devtap::cpu_device* dev : devtap::cpu_devices()) {
    dev->submit([=](devtap::cpu_context& ctx) {
      // Data y = 3x - 1 + noise, different per device.
      std::mt19937 rng(static_cast<unsigned>(ctx.device().id()) + 1);
      std::normal_distribution<float> noise(0.0f, 0.1f);
      std::vector<float> xs(256), ys(256);
      for (std::size_t i = 0; i < xs.size(); ++i) {
        xs[i] = static_cast<float>(i) / 256.0f;
        ys[i] = 3.0f * xs[i] - 1.0f + noise(rng);
      }
      float w = 0, b = 0;
      const float rate = 0.5f;
      for (int epoch = 1; epoch <= 300; ++epoch) {
        float gw = 0, gb = 0, loss = 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          const float err = w * xs[i] + b - ys[i];
          loss += err * err;
          gw += err * xs[i];
          gb += err;
        }
        const float n = static_cast<float>(xs.size());
        const float grads[2] = {2 * gw / n, 2 * gb / n};
        w -= rate * grads[0];
        b -= rate * grads[1];
        ctx.tap(progress_tap, progress{epoch, loss / n});
        ctx.tap(stats_tap, epoch_stats{epoch, grads});
      }
    });
  }
  rx.close();  // after the work already submitted: every stream ends, consumers finish
  const auto total = rx.stats().total();
  fmt::print("{} records ({} bytes) delivered, {} dropped\n", total.records, total.bytes, total.dropped_records);
}
