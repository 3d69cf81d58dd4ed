// The program every consumption test builds (Meson subproject, pkg-config, CMake): what a user
// writes first. cpu devices tap numbered samples; one coroutine per device checks their order and
// adds them up; the receiver's counters must account for every record.
//
//   consumer cuda|nocuda    the argument says whether devtap was built with CUDA, which the
//                           build system must pass on to this file (DEVTAP_WITH_CUDA)
#include <devtap/devtap.hpp>
#include <devtap/format.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>
#include <string_view>

namespace {

struct sample {
  std::int32_t step;
  double value;
};

constexpr int steps = 1000;

devtap::consumer<sample> check_and_sum(devtap::inbox<sample> in) {
  int count = 0;
  bool in_order = true;
  double sum = 0;
  while (auto s = co_await in.next()) {
    in_order = in_order && s->step == count;
    ++count;
    sum += s->value;
  }
  if (count != steps || !in_order) throw std::runtime_error(fmt::format("{} samples, in order: {}", count, in_order));
  fmt::print("{}: {} samples in order, sum {}\n", in.device(), count, sum);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string_view expect = argc > 1 ? argv[1] : "";
  constexpr bool with_cuda = devtap::default_registry::contains("cuda");
  if ((expect == "cuda") != with_cuda || (expect != "cuda" && expect != "nocuda")) {
    fmt::print(stderr, "consumer: expected '{}', but this build {} the cuda backend (DEVTAP_WITH_CUDA)\n", expect,
               with_cuda ? "has" : "does not have");
    return 1;
  }
  fmt::print("devtap {}.{}.{}, backends: {}\n", DEVTAP_VERSION_MAJOR, DEVTAP_VERSION_MINOR, DEVTAP_VERSION_PATCH,
             fmt::join(devtap::default_registry::names, ", "));

  devtap::receiver rx({.backends = {"cpu"}, .budget_bytes = 1 << 16, .name = "consumer"});
  auto point = rx.attach<sample>(check_and_sum);
  const auto devices = devtap::cpu_devices();
  for (devtap::cpu_device* dev : devices)
    dev->submit([=](devtap::cpu_context& ctx) {
      for (int i = 0; i < steps; ++i) ctx.tap(point, sample{i, 0.5 * i});
    });
  rx.close();  // throws devtap::tap_error if a consumer threw

  const auto total = rx.stats().total();
  const auto expected = static_cast<std::uint64_t>(steps) * devices.size();
  if (total.records != expected || total.dropped_records != 0) {
    fmt::print(stderr, "consumer: expected {} records, got:\n{}\n", expected, rx.stats());
    return 1;
  }
  fmt::print("consumer: ok, {} records from {} device(s)\n", total.records, devices.size());
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "consumer: {}\n", e.what());
  return 1;
}
