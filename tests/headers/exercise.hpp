// The public surface, used once, so every template a user instantiates is compiled: the
// warning checks see more than declarations. Shared by everything.cpp and everything.cu (host
// side only: this file must stay free of {fmt}). Compiled, never run.
#pragma once
#include <devtap/devtap.hpp>
#include <devtap/fwd.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>

namespace headers_check {

struct sample {
  std::int32_t step;
  float loss;
};
struct with_span {
  std::int32_t epoch;
  std::span<const float> values;
};
}  // namespace headers_check

// Field names for the trace, as a user gives them (outside any namespace).
template <>
struct devtap::field_names<headers_check::sample> {
  static constexpr std::array names{"step", "loss"};
};

namespace headers_check {

/** A backend policy as a user writes one. */
struct made_up_backend {
  static constexpr std::string_view name = "made_up";
  static constexpr int priority = 1000;  // above cpu and cuda
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { throw devtap::backend_error("made_up: no such hardware"); }
};
static_assert(devtap::backend_policy<made_up_backend>);
using my_registry = devtap::registry<devtap::cpu_backend, made_up_backend>;
static_assert(my_registry::names[0] == "made_up" && my_registry::contains("cpu"));

inline devtap::consumer<sample> coroutine(devtap::inbox<sample> in) {
  float sum = 0;
  while (auto s = co_await in.next()) sum += s->loss;
  devtap::log(devtap::log_level::info, "{}: sum {}", in.device().name(), sum);
}

inline devtap::consumer<with_span> span_coroutine(devtap::inbox<with_span> in) {
  std::size_t n = 0;
  while (auto s = co_await in.next()) n += s->values.size();
  devtap::log(devtap::log_level::debug, "{} values", n);
}

inline std::uint64_t exercise() {
  my_registry reg("cpu");
  std::uint64_t seen = reg.device_count("cpu") + reg.backend_errors().size();

  devtap::receiver rx({.backends = {"cpu"}, .budget_bytes = 1 << 16, .overflow = devtap::overflow_policy::drop,
                       .name = "headers"});
  auto p1 = rx.attach<sample>(coroutine);
  auto p2 = rx.attach<with_span>(span_coroutine, devtap::shared, "spans");
  auto p3 = rx.attach<std::tuple<int, double>>([](const std::tuple<int, double>& t) { (void)std::get<0>(t); });
  auto p4 = rx.attach<std::uint64_t>([&seen](const std::uint64_t& v, const devtap::device&) { seen += v; });
  for (devtap::cpu_device* dev : devtap::cpu_devices()) {
    dev->submit([=](devtap::cpu_context& ctx) {
      const std::array<float, 3> values{1, 2, 3};
      ctx.tap(p1, sample{1, 0.5f});
      ctx.tap(p2, with_span{1, values});
      ctx.tap(p3, std::tuple<int, double>{1, 2.0});
    });
    rx.outfeed(*dev).tap(p4, std::uint64_t{7});
    seen += static_cast<std::uint64_t>(dev->run([](devtap::cpu_context& ctx) { return ctx.device().id(); }));
  }
  rx.flush();
  try {
    rx.close();
  } catch (const devtap::tap_error& e) {
    seen += e.failures().size();
  } catch (const devtap::timeout_error& e) {
    seen += e.devices().size();
  }
  seen += rx.stats().total().records;
  seen += devtap::default_backend().size() + static_cast<std::uint64_t>(devtap::process_index()) +
          static_cast<std::uint64_t>(devtap::process_index("cpu"));
  return seen;
}

}  // namespace headers_check
