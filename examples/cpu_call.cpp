// Device code asks the host a question and changes course on the answer: several cpu devices each
// run a solver that taps its progress and, every step, calls the host for its learning rate and
// whether to stop. The host keeps the schedule (its state is the handler's own) and sees every
// step's progress before the call that follows it.
//
//   DEVTAP_CPU_DEVICES=3 ./build/examples/cpu_call
#include <devtap/devtap.hpp>
#include <fmt/core.h>

#include <cmath>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

struct query {  // what a device asks
  int step;
  float loss;
};
struct answer {  // what the host answers
  float lr;
  bool stop;
};
struct progress {
  int step;
  float loss;
};

int main() {
  devtap::receiver rx({.name = "train"});
  std::mutex mutex;
  std::map<std::string, int> progress_seen;  // per device: steps tapped before each call
  auto progress_tap = rx.attach<progress>([&](const progress&, const devtap::device& d) {
    std::lock_guard lock(mutex);
    ++progress_seen[d.name()];
  });
  // The handler runs on the host, on the asking device's reader thread; the answer goes back to the
  // one caller that asked.
  auto ask = rx.serve<query, answer>([&](const query& q, const devtap::device& d) {
    std::lock_guard lock(mutex);
    if (progress_seen[d.name()] != q.step + 1) throw std::logic_error("a call overtook a tap");
    const float lr = 0.4f / (1.0f + 0.05f * static_cast<float>(q.step));  // decaying schedule
    return answer{lr, q.loss < 1e-4f};
  });

  std::vector<std::future<int>> runs;
  for (devtap::cpu_device* dev : devtap::cpu_devices())
    runs.push_back(dev->submit([=](devtap::cpu_context& ctx) {
      // Minimise (w - target)^2 by gradient descent; the host decides the step size and the stop.
      const float target = 1.0f + static_cast<float>(ctx.device().id());
      float w = 0.0f;
      int step = 0;
      for (;; ++step) {
        const float loss = (w - target) * (w - target);
        ctx.tap(progress_tap, progress{step, loss});
        const answer a = ctx.call(ask, query{step, loss});
        if (a.stop) break;
        w -= a.lr * 2.0f * (w - target);
      }
      fmt::print("[{}] stopped by the host at step {}: {:.4f} from its target {:.1f}\n", ctx.device().name(), step,
                 std::abs(w - target), target);
      return step;
    }));
  int calls = 0;
  for (auto& r : runs) calls += r.get() + 1;
  rx.close();
  const devtap::device_stats total = rx.stats().total();
  fmt::print("{} calls answered, {} records delivered, {} type mismatches\n", calls, total.records,
             total.type_mismatches);
}
