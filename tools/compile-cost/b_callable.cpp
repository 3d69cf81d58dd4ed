// compile-cost unit (b): one tap from a cpu device, a callable consumer.
#include <devtap/devtap.hpp>
#include <fmt/core.h>

struct sample {
  int step;
  double value;
};

int main() {
  double sum = 0;
  devtap::receiver rx({.backends = {"cpu"}});
  auto point = rx.attach<sample>([&](const sample& s) { sum += s.value; });
  devtap::cpu_devices()[0]->submit([=](devtap::cpu_context& ctx) {
    for (int i = 0; i < 1000; ++i) ctx.tap(point, sample{i, 0.5 * i});
  });
  rx.close();
  fmt::print("sum {}\n", sum);
}
