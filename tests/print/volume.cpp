// Far more than 1 MB of print output from cpu devices through small rings (back-pressure), every
// line counted and checked: nothing lost, nothing interleaved, each device's lines in order.
// (CUDA printf keeps 1 MB by default and overwrites the oldest output; its counterpart with a
// kernel is tests/print/gpu_volume.cu.)
#include <chrono>
#include <devtap/print_host.hpp>

#include <catch2/catch.hpp>

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

TEST_CASE("more than 1 MB of lines from every cpu device: each one arrives, whole and in order") {
  const char* env = std::getenv("DEVTAP_PRINT_LINES");
  const int per_device = env != nullptr ? std::atoi(env) : 100000;
  auto devices = devtap::cpu_devices();
  const std::size_t n = devices.size();

  struct counts {
    std::uint64_t lines = 0, bytes = 0, bad = 0;
    long long next = 0;
  };
  std::vector<counts> seen(n);
  // 64 KiB per device: the devices print far faster than one formatter thread per device can
  // write, so they wait for room again and again.
  devtap::receiver rx({.backends = {"cpu"}, .budget_bytes = (64u << 10) * n, .close_timeout = std::chrono::minutes(5), .name = "volume"});  // sanitized builds are slow
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view line, const devtap::device& dev) {
    counts& c = seen[static_cast<std::size_t>(dev.id())];
    ++c.lines;
    c.bytes += line.size() + 1;
    // "dev D line I of N checksum C"
    long long d = -1, i = -1, total = -1, sum = -1;
    const char* p = line.data();
    const char* end = p + line.size();
    auto field = [&](std::string_view word, long long& out) {
      if (std::string_view(p, static_cast<std::size_t>(end - p)).substr(0, word.size()) != word) return false;
      p += word.size();
      auto r = std::from_chars(p, end, out);
      p = r.ptr;
      return r.ec == std::errc{};
    };
    const bool ok = field("dev ", d) && field(" line ", i) && field(" of ", total) && field(" checksum ", sum) && p == end;
    if (!ok || d != dev.id() || i != c.next || total != per_device || sum != (d * 1000003 + i) % 999983) ++c.bad;
    c.next = i + 1;
  }});

  for (devtap::cpu_device* dev : devices)
    dev->submit([ch, per_device](devtap::cpu_context& ctx) {
      const devtap::printer out(ctx, ch);
      const long long d = ctx.device().id();
      for (long long i = 0; i < per_device; ++i)
        devtap::print<"dev {} line {} of {} checksum {}">(out, d, i, per_device, (d * 1000003 + i) % 999983);
    });
  rx.close();

  std::uint64_t bytes = 0;
  for (std::size_t d = 0; d < n; ++d) {
    INFO("device " << d);
    CHECK(seen[d].lines == static_cast<std::uint64_t>(per_device));
    CHECK(seen[d].bad == 0);
    bytes += seen[d].bytes;
  }
  const auto st = rx.stats().total();
  CHECK(st.dropped_records == 0);
  CHECK(ch.stats().lines == n * static_cast<std::uint64_t>(per_device));
  WARN(n << " devices printed " << ch.stats().lines << " lines, " << bytes / 1e6 << " MB");
  if (env == nullptr) CHECK(bytes > (std::uint64_t{1} << 20) * n);  // each device alone prints over 1 MiB
}
