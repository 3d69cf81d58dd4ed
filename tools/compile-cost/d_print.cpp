// compile-cost unit (d): devtap::print from a cpu device, plus the host formatter.
#include <devtap/devtap.hpp>
#include <devtap/print.hpp>
#include <devtap/print_host.hpp>

int main() {
  devtap::receiver rx({.backends = {"cpu"}});
  devtap::print_channel prints = devtap::attach_print(rx);
  devtap::cpu_devices()[0]->submit([prints](devtap::cpu_context& ctx) {
    const devtap::printer out(ctx, prints);
    for (int i = 0; i < 1000; ++i) devtap::print<"step {}: {:.3f}">(out, i, 0.5 * i);
  });
  rx.close();
}
