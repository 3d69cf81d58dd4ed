// devtap::print from cpu devices: each device's work prints fmt-style lines; the host formats them
// and writes whole lines, in order per device, with the device and the time as a prefix.
//
//   DEVTAP_CPU_DEVICES=3 ./build/examples/cpu_print
#include <devtap/devtap.hpp>
#include <devtap/print.hpp>
#include <devtap/print_host.hpp>  // the formatter ({fmt}): in exactly one .cpp file of a program

#include <cmath>
#include <span>
#include <string_view>

int main() {
  devtap::receiver rx({.backends = {"cpu"}, .name = "cpu_print"});
  devtap::print_channel prints =
      devtap::attach_print(rx, {.prefix = devtap::print_prefix::elapsed | devtap::print_prefix::device});

  for (devtap::cpu_device* dev : devtap::cpu_devices()) {
    dev->submit([prints](devtap::cpu_context& ctx) {
      const devtap::printer out(ctx, prints);
      const int id = ctx.device().id();
      double x = 1.0 + id;  // Newton's method for sqrt(2 + id), one line per step
      const double target = 2.0 + id;
      for (int step = 1; step <= 6; ++step) {
        x = 0.5 * (x + target / x);
        devtap::print<"sqrt({}) step {}: x = {:.12f}  error {:.1e}">(out, target, step, x, std::abs(x * x - target));
      }
      const float history[3] = {1.0f, 0.5f, 0.25f};
      devtap::print<"done: {} (history {::.2f}, status {:>6})">(out, x, history, std::string_view("ok"));
    });
  }
  // A host thread prints through a device's outfeed too.
  devtap::print<"host thread: {} device(s) at work">(prints.on(rx.outfeed(*devtap::cpu_devices()[0])),
                                                     devtap::cpu_devices().size());
  rx.close();  // every device's lines are out once close() returns
  const devtap::print_stats st = prints.stats();
  std::printf("%llu lines printed, %llu format errors\n", static_cast<unsigned long long>(st.lines),
              static_cast<unsigned long long>(st.format_errors));
  return st.format_errors == 0 ? 0 : 1;
}
