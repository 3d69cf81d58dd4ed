// devtap::print from cpu devices and host threads: what each argument kind prints, prefixes, sinks,
// whole lines in emission order per device, errors as lines, and the handles' rules.
#include <devtap/print_host.hpp>

#include "print_capture.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <regex>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using devtap_test::all;
using devtap_test::captured;

// The lines `fn(printer)` prints on one cpu device.
template <class Fn>
std::vector<std::string> print_lines(Fn fn, devtap::print_prefix prefix = devtap::print_prefix::none) {
  return devtap_test::print_on_one_device(fn, prefix).lines;
}

enum class mode : std::uint8_t { idle = 2, busy = 7 };

}  // namespace

TEST_CASE("every argument kind prints as fmt prints it") {
  const int ints[3] = {1, -2, 3};
  const std::array<std::uint8_t, 2> bytes{0x0f, 0xff};
  const std::vector<double> doubles{0.5, 1.25, 2};
  const bool flags[2] = {true, false};
  const char name[8] = "devtap";  // stops at the NUL, as fmt prints char arrays
  int local = 0;
  const void* address = &local;
  auto lines = print_lines([&](devtap::printer out) {
    devtap::print<"int {} unsigned {} i8 {} u8 {} i16 {} u64 {}">(out, -7, 7u, static_cast<signed char>(-8),
                                                                   static_cast<unsigned char>(200),
                                                                   static_cast<short>(-300), ~0ull);
    devtap::print<"float {} double {:.3f} {:e}">(out, 1.5f, 3.14159, 1e-9);
    devtap::print<"bool {} {:d} char {} {:d} {:?}">(out, true, false, 'x', 'A', '\n');
    devtap::print<"enum {} ptr {} null {}">(out, mode::busy, address, nullptr);
    devtap::print<"array {} {::#x} {:n}">(out, ints, bytes, flags);
    devtap::print<"span {} {::.1f} empty {}">(out, std::span<const double>(doubles), std::span<const double>(doubles),
                                              std::span<const int>());
    devtap::print<"text [{}] [{:>8}] [{:.3}] [{}]">(out, name, std::string_view("right"), std::string_view("trunc"),
                                                     "literal");
    devtap::print<"{1}-{0} {{braces}} {0:}">(out, 1, 2);
    devtap::print<"{::>{}} then {}">(out, ints, 4, 'z');  // a range element's dynamic width takes the next id
  });
  REQUIRE(lines.size() == 9);
  CHECK(lines[0] == "int -7 unsigned 7 i8 -8 u8 200 i16 -300 u64 18446744073709551615");
  CHECK(lines[1] == "float 1.5 double 3.142 1.000000e-09");
  CHECK(lines[2] == "bool true 0 char x 65 '\\n'");
  CHECK(lines[3] == fmt::format("enum 7 ptr {} null 0x0", address));
  CHECK(lines[4] == "array [1, -2, 3] [0xf, 0xff] true, false");
  CHECK(lines[5] == "span [0.5, 1.25, 2] [0.5, 1.2, 2.0] empty []");
  CHECK(lines[6] == "text [devtap] [   right] [tru] [literal]");
  CHECK(lines[7] == "2-1 {braces} 1");
  CHECK(lines[8] == "[   1,   -2,    3] then z");
}

TEST_CASE("a print with no arguments, an empty format, and a trailing newline are one line each") {
  auto lines = print_lines([](devtap::printer out) {
    devtap::print<"plain">(out);
    devtap::print<"">(out);
    devtap::print<"ends in a newline\n">(out);
  });
  CHECK(lines == std::vector<std::string>{"plain", "", "ends in a newline"});
}

TEST_CASE("prefixes: device name, elapsed seconds, wall clock; inner lines get the prefix too") {
  auto lines = print_lines(
      [](devtap::printer out) {
        devtap::print<"step {}">(out, 1);
        devtap::print<"two\nlines">(out);
      },
      devtap::print_prefix::elapsed | devtap::print_prefix::wall_clock | devtap::print_prefix::device);
  REQUIRE(lines.size() == 3);
  const std::regex prefix(R"(\[ +\d+\.\d{6}\] \[\d\d:\d\d:\d\d\.\d{6}\] \[cpu:0\] )");
  CHECK(std::regex_search(lines[0], prefix));
  CHECK(lines[0].ends_with("] [cpu:0] step 1"));
  CHECK(lines[1].ends_with("] [cpu:0] two"));
  CHECK(lines[2].ends_with("] [cpu:0] lines"));
  CHECK(std::regex_search(lines[2], prefix));
}

TEST_CASE("lines of each device arrive whole and in emission order; devices interleave only between lines") {
  constexpr int devices = 4, per_device = 20000;
  devtap::cpu_client cpus(devices);
  captured cap;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 64 << 10});  // 16 KiB per device: back-pressure
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < per_device; ++i)
        devtap::print<"device {} line {} payload {:>20}">(out, ctx.device().id(), i, std::string_view("xxxxxxxx"));
    });
  rx.close();
  REQUIRE(cap.lines.size() == std::size_t{devices} * per_device);
  for (int d = 0; d < devices; ++d) {
    const auto& mine = cap.by_device["cpu:" + std::to_string(d)];
    REQUIRE(mine.size() == std::size_t{per_device});
    for (int i = 0; i < per_device; ++i)
      if (mine[static_cast<std::size_t>(i)] != fmt::format("device {} line {} payload {:>20}", d, i, "xxxxxxxx"))
        FAIL("device " << d << " line " << i << ": " << mine[static_cast<std::size_t>(i)]);
  }
  CHECK(ch.stats().lines == std::size_t{devices} * per_device);
  CHECK(rx.stats().total().dropped_records == 0);
}

TEST_CASE("a FILE sink gets every line whole; stats count them") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  {
    devtap::cpu_client cpus(2);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
    auto ch = devtap::attach_print(rx, {.sink = file, .prefix = devtap::print_prefix::device});
    for (auto* dev : cpus.cpu_devices())
      dev->submit([ch](devtap::cpu_context& ctx) {
        devtap::printer out(ctx, ch);
        for (int i = 0; i < 1000; ++i) devtap::print<"{} {:.2f}">(out, i, i * 0.5);
      });
    rx.close();
    CHECK(ch.stats().lines == 2000);
    CHECK(ch.stats().write_errors == 0);
  }
  std::rewind(file);
  std::map<std::string, int> next;
  char buf[256];
  int n = 0;
  while (std::fgets(buf, sizeof buf, file) != nullptr) {
    std::string line(buf);
    REQUIRE(line.back() == '\n');
    const std::string dev = line.substr(1, line.find(']') - 1);
    const int i = next[dev]++;
    CHECK(line == fmt::format("[{}] {} {:.2f}\n", dev, i, i * 0.5));
    ++n;
  }
  CHECK(n == 2000);
  std::fclose(file);
}

TEST_CASE("host threads print through rx.outfeed(dev)") {
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
  std::thread t([out] {
    for (int i = 0; i < 100; ++i) devtap::print<"from a thread {}">(out, i);
  });
  t.join();
  rx.close();
  REQUIRE(cap.lines.size() == 100);
  CHECK(cap.lines[99] == "from a thread 99");
}

TEST_CASE("a spec {fmt} refuses at run time is an error line, not a crash; printing goes on") {
  captured cap;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"[{:{}}]">(out, 42, 6);
    devtap::print<"[{:{}}]">(out, 42, -6);  // a negative dynamic width: only the value is wrong
    devtap::print<"after">(out);
  });
  rx.close();
  REQUIRE(cap.lines.size() == 3);
  CHECK(cap.lines[0] == "[    42]");
  CHECK(cap.lines[1] == "devtap::print: cannot format \"[{:{}}]\": negative width; arguments: 42, -6");
  CHECK(cap.lines[2] == "after");
  CHECK(ch.stats().format_errors == 1);
  CHECK(ch.stats().lines == 3);
}

TEST_CASE("a dynamic width or precision above the limit is an error line, not a line of gigabytes") {
  captured cap;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  constexpr std::uint64_t limit = devtap::detail::print_max_width;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"[{:{}}]">(out, 'x', limit);               // at the limit: formatted
    devtap::print<"[{:{}}]">(out, 'x', limit + 1);           // one above
    devtap::print<"[{:{}}]">(out, 7, std::int32_t{2147483647});  // an uninitialised variable, say
    devtap::print<"[{:{}}]">(out, 7, ~std::uint64_t{0});         // above INT_MAX: {fmt}'s own error, as before
    devtap::print<"[{:.{}f}]">(out, 1.5, std::int64_t{limit} + 1);  // a precision
    devtap::print<"[{1:{0}}]">(out, std::uint32_t{1u << 30}, 3);  // a manual index names the width
    const int xs[2] = {1, 2};
    devtap::print<"{::>{}}">(out, xs, std::uint16_t{65535});  // a range element's width, below the limit
    devtap::print<"{::>{}}">(out, xs, std::int64_t{limit} * 2);
    devtap::print<"[{:{}}]">(out, 42, std::int8_t{-1});  // negative: {fmt}'s own error, as before
    devtap::print<"[{:{}}]">(out, 42, std::uint8_t{255});
    devtap::print<"after">(out);
  });
  rx.close();
  REQUIRE(cap.lines.size() == 11);
  CHECK(cap.lines[0].size() == limit + 2);
  CHECK(cap.lines[0].front() == '[');
  CHECK(cap.lines[0][1] == 'x');
  const std::string above = "is above devtap::print's limit of " + std::to_string(limit);
  CHECK(cap.lines[1] == "devtap::print: cannot format \"[{:{}}]\": width or precision " + std::to_string(limit + 1) + " " +
                           above + "; arguments: x, " + std::to_string(limit + 1));
  CHECK(cap.lines[2] == "devtap::print: cannot format \"[{:{}}]\": width or precision 2147483647 " + above +
                           "; arguments: 7, 2147483647");
  CHECK(cap.lines[3] == "devtap::print: cannot format \"[{:{}}]\": number is too big; arguments: 7, 18446744073709551615");
  CHECK(cap.lines[4].find("width or precision " + std::to_string(limit + 1) + " " + above) != std::string::npos);
  CHECK(cap.lines[5].find("width or precision 1073741824 " + above) != std::string::npos);
  CHECK(cap.lines[6].size() == 2 * 65535 + 4);
  CHECK(cap.lines[7].find("width or precision " + std::to_string(limit * 2) + " " + above) != std::string::npos);
  CHECK(cap.lines[8] == "devtap::print: cannot format \"[{:{}}]\": negative width; arguments: 42, -1");
  CHECK(cap.lines[9].size() == 257);
  CHECK(cap.lines[10] == "after");
  CHECK(ch.stats().format_errors == 7);
  CHECK(ch.stats().lines == 11);
}

TEST_CASE("two printers on one receiver, and printing next to other taps") {
  devtap::cpu_client cpus(1);
  captured a, b;
  int values = 0;
  devtap::receiver rx({.devices = all(cpus)});
  auto pa = devtap::attach_print(rx, {.sink = a.sink()});
  auto numbers = rx.attach<int>([&](const int& v) { values += v; });
  auto pb = devtap::attach_print(rx, {.sink = b.sink(), .prefix = devtap::print_prefix::device});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::print<"to a {}">(devtap::printer(ctx, pa), 1);
    ctx.tap(numbers, 5);
    devtap::print<"to b {}">(devtap::printer(ctx, pb), 2);
  });
  rx.close();
  CHECK(a.lines == std::vector<std::string>{"to a 1"});
  CHECK(b.lines == std::vector<std::string>{"[cpu:0] to b 2"});
  CHECK(values == 5);
  CHECK(pa.point().token != pb.point().token);
}

TEST_CASE("printing needs an attached receiver; a printer from a closed receiver throws") {
  devtap::cpu_client cpus(1);
  devtap::print_channel ch;
  {
    devtap::receiver rx({.devices = all(cpus)});
    ch = devtap::attach_print(rx, {.sink = [](std::string_view) {}});
    rx.close();
  }
  CHECK_THROWS_AS(cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { devtap::printer out(ctx, ch); }),
                  devtap::outfeed_error);
  CHECK_THROWS_WITH(cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { devtap::printer out(ctx, ch); }),
                    Catch::Equals("devtap: print on device 'cpu:0' with no receiver attached (create a "
                                  "devtap::receiver for it first); nothing was written"));
}

TEST_CASE("a sink that throws stops printing on that device, and close() reports it") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  int calls = 0;
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view) {
                                        if (++calls == 2) throw std::runtime_error("disk full");
                                      },
                                      .name = "printer"});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < 5; ++i) devtap::print<"{}">(out, i);
  });
  try {
    rx.close();
    FAIL("close() did not throw");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(e.failures()[0].consumer == "printer");
    CHECK(e.failures()[0].message == "disk full");
  }
  CHECK(calls == 2);
  CHECK(rx.stats().total().consumer_errors == 4);  // the failing line and the three after it
}

TEST_CASE("print_sink: FILE* and callables, with or without the device") {
  devtap::print_sink by_default;
  CHECK(by_default.file() == stdout);
  devtap::print_sink err = stderr;
  CHECK(err.file() == stderr);
  std::string seen;
  devtap::print_sink fn = [&](std::string_view line) { seen = line; };
  CHECK(fn.file() == nullptr);
  devtap::cpu_client cpus(1);
  fn.callback()("hello", *cpus.cpu_devices()[0]);
  CHECK(seen == "hello");
}
