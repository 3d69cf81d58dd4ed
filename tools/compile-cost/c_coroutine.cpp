// compile-cost unit (c): one tap from a cpu device, a coroutine consumer.
#include <devtap/devtap.hpp>
#include <fmt/core.h>

struct sample {
  int step;
  double value;
};

devtap::consumer<sample> add_up(devtap::inbox<sample> in) {
  double sum = 0;
  while (auto s = co_await in.next()) sum += s->value;
  fmt::print("sum {}\n", sum);
}

int main() {
  devtap::receiver rx({.backends = {"cpu"}});
  auto point = rx.attach<sample>(add_up);
  devtap::cpu_devices()[0]->submit([=](devtap::cpu_context& ctx) {
    for (int i = 0; i < 1000; ++i) ctx.tap(point, sample{i, 0.5 * i});
  });
  rx.close();
}
