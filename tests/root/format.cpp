// {fmt} formatters for devtap's public types.
#include <devtap/backend/cpu.hpp>
#include <devtap/format.hpp>

#include <catch2/catch.hpp>

TEST_CASE("devices, errors, call codes, policies and statistics print with {fmt}") {
  devtap::cpu_client cpus(2);
  devtap::device& d = *cpus.local_devices()[1];
  CHECK(fmt::format("{}", d) == "cpu:1");
  CHECK(fmt::format("[{:>6}]", d) == "[ cpu:1]");
  CHECK(fmt::format("{}", devtap::backend_error("Unknown backend 'x'")) == "Unknown backend 'x'");
  CHECK(fmt::format("{}", devtap::overflow_policy::drop) == "drop");
  CHECK(fmt::format("{}", devtap::log_level::warn) == "warn");
  CHECK(fmt::format("{}", devtap::call_errc::ring_full) == "ring_full");
  CHECK(fmt::format("{}", devtap::call_errc::none) == "none");
  CHECK(fmt::format("{}", devtap::call_errc::kernels_only) == "kernels_only");
  CHECK(fmt::format("{}", static_cast<devtap::call_errc>(9)) == "unknown call_errc");
  CHECK(fmt::format("{:>10}", devtap::call_errc::closed) == "    closed");
  CHECK(fmt::format("{}", devtap::call_error(devtap::call_errc::closed, "devtap: call closed")) == "devtap: call closed");

  devtap::receiver rx({.devices = {cpus.local_devices()[0]}, .name = "fmt"});
  auto point = rx.attach<int>([](const int&) {});
  rx.outfeed(*cpus.local_devices()[0]).tap(point, 5);
  rx.close();
  const std::string text = fmt::format("{}", rx.stats());
  CHECK(text == "cpu:0: 1 records (4 bytes), 0 dropped (0 bytes), 0 unknown ids, 0 type mismatches, 0 consumer errors, 0 ignored, 0 lost at close\n"
                "total: 1 records (4 bytes), 0 dropped (0 bytes), 0 unknown ids, 0 type mismatches, 0 consumer errors, 0 ignored, 0 lost at close");
  devtap::device_stats waited;
  waited.device = "cpu:3";
  waited.call_slot_waits = 2;
  CHECK(fmt::format("{}", waited) == "cpu:3: 0 records (0 bytes), 0 dropped (0 bytes), 0 unknown ids, 0 type mismatches, "
                                     "0 consumer errors, 0 ignored, 0 lost at close, 2 call(s) waited for a reply slot");
  const devtap::consumer_failure failure{"cpu:1", "bad-callable", "boom", {}};
  CHECK(fmt::format("{}", failure) == "[cpu:1] bad-callable: boom");
}
