// Hostile tests of devtap::print: size boundaries, bytes that are not text, extremes of every
// argument kind, many arguments and nested specs, lifetimes (strings freed after the print, prints
// racing close() and the receiver's destruction), every overflow policy with tiny rings, sinks that
// throw or cannot write, and the counters adding up exactly. Each test quotes the rule it checks
// (docs/print.md unless said otherwise) or says "undocumented". A watchdog aborts a hung test with
// its name.
#include <devtap/print_host.hpp>

#include "../hostile.hpp"
#include "print_capture.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::format of spans, for the expected lines (print_host.hpp need not include it)

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>  // pipe, read

namespace {

using namespace std::chrono_literals;
using devtap_test::watchdog;

using devtap_test::all;
using devtap_test::captured;
using devtap_test::print_on_one_device;

// The ring bytes of a print record whose payload (after the codec's count word) is `rest` bytes.
constexpr std::uint64_t ring_bytes_of(std::uint64_t payload) { return devtap::detail::record_bytes(payload); }

enum class big : std::int64_t { lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max() };
enum small : std::uint8_t { s_max = 255 };

void a_function() {}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Size boundaries

// Rule (docs/outfeed.md, Receivers): "The largest record a device accepts is **its ring** ... a
// record above half the ring may wait for the ring to drain (its padding goes first); a larger
// record is refused at the tap with an `outfeed_error` that says the limit, before anything is
// written." docs/print.md: "`std::string_view` ... after the record | text".
TEST_CASE("hostile: string_view at every size boundary of a 4 KiB ring") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .name = "sizes"});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  // payload = 32 (head) + 8 (span count) + align8(n); record = align8(24 + payload) <= 4096
  constexpr std::size_t max_n = 4096 - 24 - 32 - 8;  // 4032
  STATIC_REQUIRE(ring_bytes_of(32 + 8 + max_n) == 4096);
  std::vector<std::size_t> sizes{0, 1, 2, 7, 8, 9, 15, 16, 17, 255, 256, 257, 511, 512, 1023, 1024, 1025,
                                 2047 - 64, 2048 - 64, 2049 - 64, 2047, 2048, 2049, 4031 - 64, 4025, 4026,
                                 max_n - 1, max_n};
  std::vector<std::string> expected;
  std::vector<std::size_t> too_big{max_n + 1, max_n + 8, max_n + 9, 4096, 4097, 8192, 1u << 20};
  int refused = 0;
  std::vector<std::string> messages;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (std::size_t n : sizes) {
      std::string s(n, 'a');
      for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
      devtap::print<"{}">(out, std::string_view(s));
      expected.push_back(s);
      // a too-big one right after each size: refused, and the next print goes on
      const std::size_t bad = too_big[expected.size() % too_big.size()];
      std::string b(bad, 'z');
      try {
        devtap::print<"{}">(out, std::string_view(b));
      } catch (const devtap::outfeed_error& e) {
        ++refused;
        messages.emplace_back(e.what());
      }
    }
  });
  rx.close();
  CHECK(refused == static_cast<int>(sizes.size()));
  REQUIRE(cap.lines.size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("size " << sizes[i]);
    CHECK(cap.lines[i] == expected[i]);
  }
  CHECK(ch.stats().lines == expected.size());
  CHECK(rx.stats().total().records == expected.size());
  CHECK(rx.stats().total().dropped_records == 0);
  REQUIRE(!messages.empty());
  INFO(messages[0]);
  CHECK(messages[0].find("larger than device 'cpu:0' accepts") != std::string::npos);
}

// Rule (docs/outfeed.md): the largest record is the ring; with timestamps "every tap carries its
// time and tap count", so the boundary moves by the stamp. Both sides of it, under block and drop.
TEST_CASE("hostile: a record exactly the ring's size, with timestamps, under block and drop") {
  watchdog wd(60s);
  for (auto policy : {devtap::overflow_policy::block, devtap::overflow_policy::drop}) {
    INFO("policy " << static_cast<int>(policy));
    devtap::cpu_client cpus(1);
    captured cap;
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024, .overflow = policy, .timestamps = true});
    auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
    const std::size_t stamp = sizeof(devtap::detail::tap_stamp);
    const std::size_t max_n = 1024 - 24 - 32 - 8 - stamp;
    int refused = 0, delivered_expected = 0;
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int round = 0; round < 20; ++round) {
        std::string s(max_n, static_cast<char>('A' + round % 26));
        devtap::print<"{}">(out, std::string_view(s));
        ++delivered_expected;
        std::string t(max_n + 1, 'x');
        try {
          devtap::print<"{}">(out, std::string_view(t));
        } catch (const devtap::outfeed_error&) {
          ++refused;
        }
      }
    });
    rx.close();
    CHECK(refused == 20);
    const auto st = rx.stats().total();
    // block: every one delivered; drop: delivered + dropped == printed
    CHECK(ch.stats().lines + st.dropped_records == static_cast<std::uint64_t>(delivered_expected));
    if (policy == devtap::overflow_policy::block) CHECK(cap.lines.size() == 20u);
    for (const auto& l : cap.lines) CHECK(l.size() == max_n);
  }
}

// Rule: "`char[N]`, `std::array<char, N>` | in the record | text, up to the first NUL"; the record is
// at most the ring (outfeed.md). Fixed-size char arrays at the ring boundary, no NUL at all.
TEST_CASE("hostile: char arrays without a NUL, at the ring's boundary") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  // record = align8(24 + 32 + align8(N)) <= 4096 -> N <= 4040
  static std::array<char, 4040> fits;
  static std::array<char, 4041> over;
  fits.fill('f');
  over.fill('o');
  static char one[1] = {'q'};
  static char nul_first[4] = {'\0', 'a', 'b', 'c'};
  bool threw = false;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"[{}]">(out, fits);
    try {
      devtap::print<"[{}]">(out, over);
    } catch (const devtap::outfeed_error&) {
      threw = true;
    }
    devtap::print<"[{}]">(out, one);
    devtap::print<"[{}]">(out, nul_first);
  });
  rx.close();
  CHECK(threw);
  REQUIRE(cap.lines.size() == 3);
  CHECK(cap.lines[0] == "[" + std::string(4040, 'f') + "]");
  CHECK(cap.lines[1] == "[q]");
  CHECK(cap.lines[2] == "[]");
}

// Rule: "`std::string_view`, `std::span<const char>` | after the record | text" (spans are not cut at
// a NUL: arg_store.hpp "char arrays stop at their first NUL ... spans do not"); invalid UTF-8 is
// undocumented: expected byte for byte as fmt::format writes it.
TEST_CASE("hostile: embedded NULs and invalid UTF-8 pass through byte for byte") {
  watchdog wd(60s);
  using namespace std::string_view_literals;
  const std::vector<std::string_view> texts{
      "\0"sv, "a\0b"sv, "\0\0\0\0\0\0\0\0\0"sv, "\xff\xfe"sv, "\xc3"sv, "\xc0\xaf"sv, "\xed\xa0\x80"sv,
      "\xf4\x90\x80\x80"sv, "caf\xc3\xa9"sv, "\xe2\x82"sv, "\x1b[31mred\x1b[0m"sv, "\x7f\x80\x81"sv,
      "tab\tcr\rbell\a"sv};
  const auto printed = print_on_one_device([&](devtap::printer out) {
    for (std::string_view t : texts) {
      devtap::print<"<{}>">(out, t);
      devtap::print<"<{:>12}|{:.3}|{:*^9}>">(out, t, t, t);
      devtap::print<"<{}>">(out, std::span<const char>(t.data(), t.size()));
    }
  });
  REQUIRE(printed.lines.size() == texts.size() * 3);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string_view t = texts[i];
    INFO("text #" << i);
    CHECK(printed.lines[3 * i] == fmt::format("<{}>", t));
    CHECK(printed.lines[3 * i] == "<" + std::string(t) + ">");
    CHECK(printed.lines[3 * i + 1] == fmt::format("<{:>12}|{:.3}|{:*^9}>", t, t, t));
    CHECK(printed.lines[3 * i + 2] == "<" + std::string(t) + ">");
  }
  CHECK(printed.stats.format_errors == 0);
}

// Rule: "A `FILE*` sink gets each line with one `fwrite` (whole ...)". NUL bytes inside a line must
// reach the FILE too (undocumented for NULs; fwrite takes a length, so nothing should cut them).
TEST_CASE("hostile: a FILE sink writes NULs and invalid bytes whole") {
  watchdog wd(60s);
  using namespace std::string_view_literals;
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const std::string_view t = "x\0y\xff\0"sv;
  {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
    auto ch = devtap::attach_print(rx, {.sink = file, .prefix = devtap::print_prefix::device});
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      devtap::print<"{}|{}">(out, t, '\0');
    });
    rx.close();
  }
  std::rewind(file);
  char buf[64];
  const std::size_t n = std::fread(buf, 1, sizeof buf, file);
  std::fclose(file);
  const std::string want = "[cpu:0] " + std::string(t) + "|" + std::string(1, '\0') + "\n";
  CHECK(std::string(buf, n) == want);
}

// Rule: "A `FILE*` sink ... The FILE is flushed at the end of each device's stream, so everything is
// out once `rx.close()` returns." Big lines (1 MiB string) through a 4 MiB ring to a FILE.
TEST_CASE("hostile: a 1 MiB string through a FILE sink arrives whole") {
  watchdog wd(120s);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  std::string s(1 << 20, '.');
  for (std::size_t i = 0; i < s.size(); i += 997) s[i] = static_cast<char>('a' + i % 26);
  {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4u << 20});
    auto ch = devtap::attach_print(rx, {.sink = file});
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < 8; ++i) devtap::print<"{} {}">(out, i, std::string_view(s));
    });
    rx.close();
    CHECK(ch.stats().lines == 8);
    CHECK(ch.stats().write_errors == 0);
  }
  std::rewind(file);
  std::string all_bytes;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, file)) > 0) all_bytes.append(buf, n);
  std::fclose(file);
  std::string want;
  for (int i = 0; i < 8; ++i) want += std::to_string(i) + " " + s + "\n";
  CHECK(all_bytes.size() == want.size());
  CHECK(all_bytes == want);
}

// ---------------------------------------------------------------------------------------------
// Arguments

// Rule: the Arguments table: "`bool`, `char` | 1 byte | `true`, `x` (any {fmt} spec for them)";
// "integers of 8 to 64 bits, enums (their underlying type)"; "`float`, `double` | their bytes | a
// number"; "pointers (not `char*`), `nullptr` | 8 bytes | an address". Every line must equal what
// fmt::format prints for the same values on the host.
TEST_CASE("hostile: extremes of every scalar kind print as fmt::format prints them") {
  watchdog wd(60s);
  using L64 = std::numeric_limits<std::int64_t>;
  using U64 = std::numeric_limits<std::uint64_t>;
  using D = std::numeric_limits<double>;
  using F = std::numeric_limits<float>;
  const std::int64_t i64min = L64::min(), i64max = L64::max();
  const std::uint64_t u64max = U64::max();
  const std::int32_t i32min = std::numeric_limits<std::int32_t>::min();
  const std::int16_t i16min = std::numeric_limits<std::int16_t>::min();
  const std::int8_t i8min = std::numeric_limits<std::int8_t>::min();
  const std::uint8_t u8max = 255;
  const std::uint16_t u16max = 65535;
  const std::uint32_t u32max = 0xffffffffu;
  const double nan = D::quiet_NaN(), neg_nan = -D::quiet_NaN(), inf = D::infinity(), ninf = -D::infinity();
  const double nzero = -0.0, dmin = D::denorm_min(), dmax = D::max(), dlow = D::lowest(), deps = D::epsilon();
  const float fnan = F::quiet_NaN(), finf = F::infinity(), fnzero = -0.0f, fmin = F::denorm_min(), fmax = F::max();
  const char c0 = '\0', cff = static_cast<char>(0xff), cq = '"';
  const void* pmax = reinterpret_cast<const void*>(~std::uintptr_t{0});
  const void* pnull = nullptr;
  int local = 0;
  int* ip = &local;
  void (*fp)() = &a_function;

  std::vector<std::string> want;
  want.push_back(fmt::format("{} {} {} {} {}", i64min, i64max, u64max, i32min, i16min));
  want.push_back(fmt::format("{} {} {} {} {}", i8min, u8max, u16max, u32max, static_cast<signed char>(-1)));
  want.push_back(fmt::format("{:#b} {:#o} {:#X} {:+d} {: d} {:c}", i64min, i64min, u64max, 0, 0, 65));
  want.push_back(fmt::format("{:#x} {:#x} {:030d} {:<25}|{:^25}|", i64min, u64max, i64min, i64min, i64max));
  want.push_back(fmt::format("{} {} {} {} {}", nan, neg_nan, inf, ninf, nzero));
  want.push_back(fmt::format("{} {} {} {} {}", dmin, dmax, dlow, deps, 0.1));
  want.push_back(fmt::format("{:e} {:g} {:a} {:.17g} {:+.3f} {:010.2f} {:010.2f}", dmin, dmax, dlow, 0.1, nzero, ninf, nan));
  want.push_back(fmt::format("{:.0f}", dmax));
  want.push_back(fmt::format("{} {} {} {} {}", fnan, finf, fnzero, fmin, fmax));
  want.push_back(fmt::format("{:e} {:a} {:.9g}", fmin, fmax, 0.1f));
  want.push_back(fmt::format("{} {} {:d} {:d} {:>6} {:x}", true, false, true, false, true, true));
  want.push_back(fmt::format("[{}] [{}] [{}] {:d} {:d} {:x} {:?} {:?}", c0, cff, cq, c0, cff, cff, c0, cq));
  want.push_back(fmt::format("{} {} {} {}", pmax, pnull, static_cast<const void*>(ip), reinterpret_cast<const void*>(fp)));
  want.push_back(fmt::format("{:p} {:>20} {}", pmax, pnull, static_cast<const void*>(nullptr)));
  want.push_back(fmt::format("{} {} {}", static_cast<std::int64_t>(big::lo), static_cast<std::int64_t>(big::hi), 255));

  const auto printed = print_on_one_device([&](devtap::printer out) {
    devtap::print<"{} {} {} {} {}">(out, i64min, i64max, u64max, i32min, i16min);
    devtap::print<"{} {} {} {} {}">(out, i8min, u8max, u16max, u32max, static_cast<signed char>(-1));
    devtap::print<"{:#b} {:#o} {:#X} {:+d} {: d} {:c}">(out, i64min, i64min, u64max, 0, 0, 65);
    devtap::print<"{:#x} {:#x} {:030d} {:<25}|{:^25}|">(out, i64min, u64max, i64min, i64min, i64max);
    devtap::print<"{} {} {} {} {}">(out, nan, neg_nan, inf, ninf, nzero);
    devtap::print<"{} {} {} {} {}">(out, dmin, dmax, dlow, deps, 0.1);
    devtap::print<"{:e} {:g} {:a} {:.17g} {:+.3f} {:010.2f} {:010.2f}">(out, dmin, dmax, dlow, 0.1, nzero, ninf, nan);
    devtap::print<"{:.0f}">(out, dmax);
    devtap::print<"{} {} {} {} {}">(out, fnan, finf, fnzero, fmin, fmax);
    devtap::print<"{:e} {:a} {:.9g}">(out, fmin, fmax, 0.1f);
    devtap::print<"{} {} {:d} {:d} {:>6} {:x}">(out, true, false, true, false, true, true);
    devtap::print<"[{}] [{}] [{}] {:d} {:d} {:x} {:?} {:?}">(out, c0, cff, cq, c0, cff, cff, c0, cq);
    devtap::print<"{} {} {} {}">(out, pmax, pnull, ip, fp);
    devtap::print<"{:p} {:>20} {}">(out, pmax, pnull, nullptr);
    devtap::print<"{} {} {}">(out, big::lo, big::hi, s_max);
  });
  REQUIRE(printed.lines.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    INFO("line " << i);
    CHECK(printed.lines[i] == want[i]);
  }
  CHECK(printed.stats.format_errors == 0);
  CHECK(printed.stats.malformed == 0);
}

// Rule: "`T[N]`, `std::array<T, N>` of the above | in the record | a range: `[1, 2, 3]`, `{::#x}`,
// `{:n}`"; "`std::span<T>` of the above | after the record, `count` elements | a range".
TEST_CASE("hostile: ranges of extremes, empty spans, one-element arrays, bool ranges") {
  watchdog wd(60s);
  using D = std::numeric_limits<double>;
  const std::array<double, 5> d{D::quiet_NaN(), D::infinity(), -0.0, D::denorm_min(), D::lowest()};
  const std::int64_t i[2] = {std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max()};
  const bool one[1] = {true};
  std::vector<bool> vb_src{true, false, true};
  const bool b3[3] = {true, false, true};
  const std::vector<std::uint64_t> many(1000, ~0ull);
  const char letters[3] = {'a', 'b', 'c'};  // a char array is text, not a range
  const auto printed = print_on_one_device([&](devtap::printer out) {
    devtap::print<"{} {::e} {:n}">(out, d, d, d);
    devtap::print<"{} {::#x} {::>{}}">(out, i, i, i, 22);
    devtap::print<"{} {}">(out, one, std::span<const bool>(b3));
    devtap::print<"{} {} {}">(out, std::span<const double>(), std::span<const std::int8_t>(), std::string_view());
    devtap::print<"{:n}">(out, std::span<const std::uint64_t>(many));
    devtap::print<"{}">(out, letters);
  });
  const std::span<const double> ds(d);
  const std::span<const std::int64_t> is(i);
  REQUIRE(printed.lines.size() == 6);
  CHECK(printed.lines[0] == fmt::format("{} {::e} {:n}", ds, ds, ds));
  CHECK(printed.lines[1] == fmt::format("{} {::#x} {::>22}", is, is, is));
  CHECK(printed.lines[2] == "[true] [true, false, true]");
  CHECK(printed.lines[3] == "[] [] ");
  CHECK(printed.lines[4] == fmt::format("{:n}", std::span<const std::uint64_t>(many)));
  CHECK(printed.lines[5] == "abc");
  (void)vb_src;
}

#define F64_AUTO                                                                                                     \
  "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} " \
  "{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}"
#define F64_MANUAL                                                                                                    \
  "{63}|{62}|{61}|{60}|{59}|{58}|{57}|{56}|{55}|{54}|{53}|{52}|{51}|{50}|{49}|{48}|{47}|{46}|{45}|{44}|{43}|{42}|" \
  "{41}|{40}|{39}|{38}|{37}|{36}|{35}|{34}|{33}|{32}|{31}|{30}|{29}|{28}|{27}|{26}|{25}|{24}|{23}|{22}|{21}|{20}|" \
  "{19}|{18}|{17}|{16}|{15}|{14}|{13}|{12}|{11}|{10}|{9}|{8}|{7}|{6}|{5}|{4}|{3}|{2}|{1}|{0}"

// Rule: "At most 64 arguments"; fmt syntax incl. manual indexing "{1}-{0}" and dynamic widths and
// precisions "(`{:{}}`)", "`{::{}}` with a dynamic width".
TEST_CASE("hostile: 64 arguments, manual indices in reverse, nested dynamic width and precision") {
  watchdog wd(60s);
  const int ints[3] = {1, -22, 333};
  const auto printed = print_on_one_device([&](devtap::printer out) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      devtap::print<F64_AUTO>(out, (I % 3 == 0 ? std::int64_t(I) * -1000000007LL : std::int64_t(I))...);
      devtap::print<F64_MANUAL>(out, static_cast<std::uint8_t>(I)...);
      // mixed kinds: char, double, bool, int64 in turn
      devtap::print<F64_AUTO>(out, std::get<I % 4>(std::tuple<char, double, bool, std::int64_t>(
                                       static_cast<char>('a' + I % 26), I * 0.5, I % 2 == 1, -std::int64_t(I)))...);
    }(std::make_index_sequence<64>{});
    devtap::print<"{:>{}.{}f}|{:<{}.{}e}|">(out, 3.14159, 12, 3, -2.5, 14, 2);
    devtap::print<"{0:>{1}.{2}f}|{0:<{1}.{2}e}|{1}|{2}">(out, 2.71828, 10, 4);
    devtap::print<"{:*^{}.{}}|{::>{}}|{:n:<5}">(out, std::string_view("abcdefgh"), 9, 3, ints, 5, ints);
    devtap::print<"{:{}}|{:.{}}|{:{}.{}}">(out, 7, static_cast<std::uint8_t>(3), 1.0 / 3, 2LL, std::string_view("xyz"),
                                           static_cast<short>(5), 2u);
  });
  std::string w0, w1, w2;
  for (std::size_t i = 0; i < 64; ++i) {
    w0 += (i ? " " : "") + fmt::format("{}", i % 3 == 0 ? std::int64_t(i) * -1000000007LL : std::int64_t(i));
    w1 += (i ? "|" : "") + std::to_string(63 - i);
    switch (i % 4) {
      case 0: w2 += (i ? " " : "") + std::string(1, static_cast<char>('a' + i % 26)); break;
      case 1: w2 += (i ? " " : "") + fmt::format("{}", i * 0.5); break;
      case 2: w2 += (i ? " " : "") + fmt::format("{}", i % 2 == 1); break;
      case 3: w2 += (i ? " " : "") + fmt::format("{}", -std::int64_t(i)); break;
    }
  }
  const std::span<const int> is(ints);
  REQUIRE(printed.lines.size() == 7);
  CHECK(printed.lines[0] == w0);
  CHECK(printed.lines[1] == w1);
  CHECK(printed.lines[2] == w2);
  CHECK(printed.lines[3] == fmt::format("{:>{}.{}f}|{:<{}.{}e}|", 3.14159, 12, 3, -2.5, 14, 2));
  CHECK(printed.lines[4] == fmt::format("{0:>{1}.{2}f}|{0:<{1}.{2}e}|{1}|{2}", 2.71828, 10, 4));
  CHECK(printed.lines[5] == fmt::format("{:*^{}.{}}|{::>{}}|{:n:<5}", "abcdefgh", 9, 3, is, 5, is));
  CHECK(printed.lines[6] == fmt::format("{:{}}|{:.{}}|{:{}.{}}", 7, 3, 1.0 / 3, 2LL, "xyz", 5, 2u));
  CHECK(printed.stats.format_errors == 0);
}

// Rule: "What the compiler cannot know — a dynamic width that is negative at run time — becomes an
// error line, never a crash, and printing goes on"; `format_errors` counts them; `lines` "error lines
// included". Widths/precisions out of int range, negative precisions, a huge unsigned width.
TEST_CASE("hostile: dynamic widths and precisions out of range at run time are error lines") {
  watchdog wd(60s);
  const std::int64_t huge = std::int64_t{1} << 40;
  const auto printed = print_on_one_device([&](devtap::printer out) {
    devtap::print<"[{:{}}]">(out, 1, huge);                                   // 0: too big
    devtap::print<"[{:.{}f}]">(out, 1.5, -1);                                 // 1: negative precision
    devtap::print<"[{:{}}]">(out, 1, std::numeric_limits<std::int64_t>::min());  // 2
    devtap::print<"[{:{}}]">(out, 1, std::numeric_limits<std::uint64_t>::max()); // 3
    devtap::print<"[{:{}}]">(out, std::string_view("s"), std::numeric_limits<int>::min());  // 4
    devtap::print<"[{::{}}]">(out, std::array<int, 2>{1, 2}, -3);             // 5: range element width
    devtap::print<"ok {}">(out, 5);                                           // 6
  });
  REQUIRE(printed.lines.size() == 7);
  for (int i = 0; i < 6; ++i) {
    INFO("line " << i << ": " << printed.lines[static_cast<std::size_t>(i)]);
    CHECK(printed.lines[static_cast<std::size_t>(i)].starts_with("devtap::print: cannot format \""));
  }
  CHECK(printed.lines[0] == fmt::format("devtap::print: cannot format \"[{{:{{}}}}]\": number is too big; arguments: 1, {}", huge));
  CHECK(printed.lines[6] == "ok 5");
  CHECK(printed.stats.format_errors == 6);
  CHECK(printed.stats.lines == 7);
}

// Rule: "A trailing `\n` in the format is optional; a text with inner newlines is several lines,
// each with the prefix." `lines` counts "one per print ... inner newlines or not". Newlines from an
// argument are undocumented: treated here as inner newlines of the text.
TEST_CASE("hostile: newlines from arguments, empty inner lines, and the prefix on each") {
  watchdog wd(60s);
  const auto printed = print_on_one_device([&](devtap::printer out) {
    devtap::print<"{}">(out, std::string_view("a\nb"));
    devtap::print<"\n">(out);
    devtap::print<"x\n\ny\n">(out);
    devtap::print<"{}|">(out, std::string_view("\n"));
  }, devtap::print_prefix::device);
  CHECK(printed.lines == std::vector<std::string>{"[cpu:0] a", "[cpu:0] b", "[cpu:0] ", "[cpu:0] x", "[cpu:0] ",
                                              "[cpu:0] y", "[cpu:0] ", "[cpu:0] |"});
  CHECK(printed.stats.lines == 4);
}

// ---------------------------------------------------------------------------------------------
// Lifetimes

// Rule: "`std::string_view`, `std::span<const char>` | after the record" / "no string copy" is about
// the device; the record holds the characters ("whose characters are sent"), so memory freed right
// after print returns must not matter (ASan would flag a read of it). Slow sink: the records sit in
// the ring while their sources are freed and overwritten.
TEST_CASE("hostile: strings and spans freed right after print returns") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  captured cap;
  std::atomic<bool> release{false};
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view line) {
                                        while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                                        cap.lines.emplace_back(line);
                                      }});
  std::vector<std::string> want;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < 50; ++i) {
      auto s = std::make_unique<std::string>(100 + i, static_cast<char>('a' + i % 26));
      auto v = std::make_unique<std::vector<double>>(static_cast<std::size_t>(i % 5), i * 0.25);
      devtap::print<"{} {}">(out, std::string_view(*s), std::span<const double>(*v));
      want.push_back(fmt::format("{} {}", *s, std::span<const double>(*v)));
      std::memset(s->data(), 'X', s->size());
      std::fill(v->begin(), v->end(), -1.0);
      s.reset();
      v.reset();
      std::string scratch(150, '#');  // reuse the freed memory
      (void)scratch;
    }
  });
  release = true;
  rx.close();
  CHECK(cap.lines == want);
}

// Rule (docs/outfeed.md): "`rx.close()` ... Taps after that throw"; "Every record a device taps
// reaches its consumer or is counted"; "a full ring after close is not a drop" (outfeed.hpp). Host
// threads print through rx.outfeed(dev) while close() runs, under block and drop: every print that
// returned normally is a line or (drop) a dropped record, exactly; every other one threw outfeed_error.
TEST_CASE("hostile: prints racing close(): returned == lines, the rest threw outfeed_error") {
  watchdog wd(120s);
  for (int round = 0; round < 20; ++round) {
    INFO("round " << round);
    const auto policy = round % 2 == 0 ? devtap::overflow_policy::block : devtap::overflow_policy::drop;
    devtap::cpu_client cpus(1);
    std::atomic<std::uint64_t> sunk{0};
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024, .overflow = policy});
    auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view) { sunk.fetch_add(1); }});
    const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
    std::atomic<std::uint64_t> ok{0}, threw{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0;; ++i) {
          try {
            devtap::print<"t {} i {}">(out, t, i);
            ok.fetch_add(1);
          } catch (const devtap::outfeed_error&) {
            threw.fetch_add(1);
            return;
          } catch (...) {
            other.fetch_add(1);
            return;
          }
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + round % 7));
    rx.close();
    for (auto& th : threads) th.join();
    CHECK(other == 0);
    CHECK(threw == 4);
    const auto st = rx.stats().total();
    CHECK(ch.stats().lines + st.dropped_records == ok.load());  // drop: "counts dropped records"
    CHECK(sunk.load() == ch.stats().lines);
    CHECK(st.records == ch.stats().lines);
    if (policy == devtap::overflow_policy::block) CHECK(st.dropped_records == 0);
    CHECK(st.lost_at_close == 0);
  }
}

// Rule (docs/outfeed.md, Lifetimes): "A host thread still inside a tap when its receiver is
// destroyed leaves with an `outfeed_error`: the device keeps the closed receiver's ring alive until
// the next receiver on it closes". docs/print.md: "Like the outfeed in it, a printer is valid while
// its receiver is open." Prints racing the destructor must end in outfeed_error, not a crash; the
// channel's stats stay readable after the receiver is gone.
TEST_CASE("hostile: prints racing the receiver's destruction, and a stale printer after it") {
  watchdog wd(120s);
  for (int round = 0; round < 10; ++round) {
    devtap::cpu_client cpus(1);
    std::atomic<std::uint64_t> ok{0}, threw{0};
    devtap::print_channel ch;
    devtap::printer out;
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    {
      devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512});
      ch = devtap::attach_print(rx, {.sink = [](std::string_view) { std::this_thread::yield(); }});
      out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
      for (int t = 0; t < 3; ++t)
        threads.emplace_back([&] {
          while (!go.load()) std::this_thread::yield();
          for (;;) {
            try {
              devtap::print<"{}">(out, std::string_view("racing the destructor"));
              ok.fetch_add(1);
            } catch (const devtap::outfeed_error&) {
              threw.fetch_add(1);
              return;
            }
          }
        });
      go = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(round % 4));
    }  // ~receiver while they print
    for (auto& th : threads) th.join();
    CHECK(threw == 3);
    CHECK(ch.stats().lines == ok.load());
    // a printer of the destroyed receiver, used later: refused, never a hang or a crash
    CHECK_THROWS_AS(devtap::print<"late {}">(out, 1), devtap::outfeed_error);
  }
}

// ---------------------------------------------------------------------------------------------
// Threads and order

// Rule: "Order: each device's lines are in emission order (one device's ring is one ordered
// stream ...)". Many host threads printing into one device's ring through a tiny ring: each
// thread's lines stay in its order, none lost, none torn.
TEST_CASE("hostile: 8 host threads on one device through a 512-byte ring keep per-thread order") {
  watchdog wd(120s);
  constexpr int threads_n = 8, per_thread = 3000;
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
  std::vector<std::thread> threads;
  for (int t = 0; t < threads_n; ++t)
    threads.emplace_back([out, t] {
      for (int i = 0; i < per_thread; ++i) devtap::print<"thread {} line {} {}">(out, t, i, std::string_view("pad", i % 4));
    });
  for (auto& th : threads) th.join();
  rx.close();
  REQUIRE(cap.lines.size() == std::size_t{threads_n} * per_thread);
  std::vector<int> next(threads_n, 0);
  int bad = 0;
  for (const auto& l : cap.lines) {
    int t = -1, i = -1;
    char tail[8] = {};
    if (std::sscanf(l.c_str(), "thread %d line %d %7s", &t, &i, tail) < 2 || t < 0 || t >= threads_n ||
        i != next[static_cast<std::size_t>(t)] ||
        l != fmt::format("thread {} line {} {}", t, i, std::string_view("pad", static_cast<std::size_t>(i % 4)))) {
      if (bad++ < 5) UNSCOPED_INFO("bad line: " << l);
    } else {
      ++next[static_cast<std::size_t>(t)];
    }
  }
  CHECK(bad == 0);
  CHECK(ch.stats().lines == std::uint64_t{threads_n} * per_thread);
}

// ---------------------------------------------------------------------------------------------
// Overflow policies

// Rule (docs/outfeed.md): "`drop` never waits and counts dropped records and bytes"; "records tapped
// = records (delivered) + dropped_records + ...". A slow sink and a 256-byte ring: lines +
// dropped_records == prints, exactly; the lines that arrive are in order.
TEST_CASE("hostile: overflow_policy::drop with a 256-byte ring: lines + dropped == prints") {
  watchdog wd(60s);
  constexpr int n = 20000;
  devtap::cpu_client cpus(2);
  captured cap;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .overflow = devtap::overflow_policy::drop});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < n; ++i) devtap::print<"{} {:>30}">(out, i, std::string_view("payload"));
    });
  rx.close();
  const auto st = rx.stats().total();
  INFO("lines " << ch.stats().lines << " dropped " << st.dropped_records);
  CHECK(ch.stats().lines + st.dropped_records == 2u * n);
  CHECK(st.records == ch.stats().lines);
  CHECK(cap.lines.size() == ch.stats().lines);
  for (auto& [dev, lines] : cap.by_device) {
    int last = -1;
    for (const auto& l : lines) {
      const int i = std::atoi(l.c_str());
      if (i <= last) FAIL(dev << ": out of order: " << l);
      last = i;
    }
  }
}

// Rule (docs/outfeed.md): "`error` throws `outfeed_error` at the tap"; "error policy, ring full (cpu:
// `outfeed_error` at the tap) | `dropped_records` | `tap_error` ... also when nobody looked at the
// work's future". docs/print.md: "on the host it throws outfeed_error where a tap would".
TEST_CASE("hostile: overflow_policy::error with a 256-byte ring: lines + throws == prints") {
  watchdog wd(60s);
  constexpr int n = 20000;
  devtap::cpu_client cpus(1);
  std::atomic<std::uint64_t> sunk{0};
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 256, .overflow = devtap::overflow_policy::error});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view) { sunk.fetch_add(1); }});
  std::uint64_t threw = 0;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < n; ++i) {
      try {
        devtap::print<"{} {:>30}">(out, i, std::string_view("payload"));
      } catch (const devtap::outfeed_error&) {
        ++threw;
      }
    }
  });
  bool close_threw = false;
  try {
    rx.close();
  } catch (const devtap::tap_error& e) {
    close_threw = true;
    INFO(e.what());
    CHECK(std::string(e.what()).find("overflow_policy::error") != std::string::npos);
  }
  const auto st = rx.stats().total();
  INFO("lines " << ch.stats().lines << " threw " << threw);
  CHECK(ch.stats().lines + threw == std::uint64_t{n});
  CHECK(st.dropped_records == threw);
  CHECK(sunk.load() == ch.stats().lines);
  CHECK(close_threw == (threw != 0));
}

// Rule: "Nothing is lost under the receiver's `block` policy". The smallest ring a receiver allows
// (256 bytes), a sink that sleeps now and then, prints of every size that fits.
TEST_CASE("hostile: overflow_policy::block with a 256-byte ring and a slow sink loses nothing") {
  watchdog wd(240s);
  constexpr int n = 3000;
  devtap::cpu_client cpus(2);
  captured cap;
  int calls = 0;
  // close() waits for all 6000 prints to pass the tiny rings: 7-8 s under TSan on 2 loaded cores,
  // and once over the default 10 s.
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .close_timeout = std::chrono::minutes(2)});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view line, const devtap::device& d) {
                                        if (++calls % 500 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                                        cap.by_device[d.name()].emplace_back(line);
                                      }});
  // 256-byte ring: record = 64 + align8(len) -> len <= 192
  std::string text(192, 'w');
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch, &text](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < n; ++i)
        devtap::print<"{}">(out, std::string_view(text.data(), static_cast<std::size_t>(i % 193)));
    });
  rx.close();
  CHECK(ch.stats().lines == 2u * n);
  CHECK(rx.stats().total().dropped_records == 0);
  for (auto& [dev, lines] : cap.by_device) {
    REQUIRE(lines.size() == std::size_t{n});
    for (int i = 0; i < n; ++i)
      if (lines[static_cast<std::size_t>(i)].size() != static_cast<std::size_t>(i % 193)) FAIL(dev << " line " << i);
  }
}

// ---------------------------------------------------------------------------------------------
// Sinks and consumers

// Rule: "A sink that throws stops that printer on that device; the later lines are counted as
// consumer errors and `rx.close()` throws `tap_error` naming the printer"; outfeed.md "Errors: never
// silent, never fatal to other devices". Two devices, one sink throwing for one of them: the other
// device's lines all arrive; lines + consumer_errors == prints.
TEST_CASE("hostile: a sink that throws for one device only: the other is unaffected, counts add up") {
  watchdog wd(60s);
  constexpr int n = 2000;
  devtap::cpu_client cpus(2);
  std::map<std::string, int> got;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 14});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view, const devtap::device& d) {
                                        if (d.name() == "cpu:1" && got[d.name()] == 100) throw std::runtime_error("boom");
                                        ++got[d.name()];
                                      },
                                      .name = "hostile-printer"});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < n; ++i) devtap::print<"{}">(out, i);
    });
  try {
    rx.close();
    FAIL("close() did not throw");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(e.failures()[0].consumer == "hostile-printer");
    CHECK(e.failures()[0].message == "boom");
  }
  CHECK(got["cpu:0"] == n);
  CHECK(got["cpu:1"] == 100);
  const auto st = rx.stats().total();
  CHECK(st.consumer_errors == std::uint64_t{n - 100});
  CHECK(ch.stats().lines + st.consumer_errors == 2u * n);
}

// Undocumented: a sink that throws something that is not a std::exception. Expected like any
// throwing sink (outfeed.md: "a coroutine consumer threw: it has ended | consumer_errors"), never
// std::terminate.
TEST_CASE("hostile: a sink that throws an int") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  int calls = 0;
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view) {
    if (++calls == 3) throw 42;
  }});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < 10; ++i) devtap::print<"{}">(out, i);
  });
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
  CHECK(calls == 3);
  CHECK(ch.stats().lines == 2);
  CHECK(rx.stats().total().consumer_errors == 8);
}

// Rule (docs/outfeed.md): "`close()`/`flush()`/`barrier()` from a consumer | `std::logic_error` at
// once: they would wait for the calling thread". The print sink is a consumer: close() from it must
// not deadlock; the logic_error then counts as the sink throwing.
TEST_CASE("hostile: a sink that calls rx.close() or rx.flush() gets logic_error, no deadlock") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  devtap::receiver* self = nullptr;
  int logic_errors = 0;
  devtap::receiver rx({.devices = all(cpus)});
  self = &rx;
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view line) {
    try {
      if (line == "close") self->close();
      if (line == "flush") self->flush();
    } catch (const std::logic_error&) {
      ++logic_errors;
    }
  }});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"close">(out);
    devtap::print<"flush">(out);
    devtap::print<"after">(out);
  });
  rx.close();
  CHECK(logic_errors == 2);
  CHECK(ch.stats().lines == 3);
}

// Rule: `write_errors` "lines a FILE sink did not take". /dev/full refuses every write: unbuffered,
// each fwrite fails. docs/outfeed.md "Errors: never silent".
TEST_CASE("hostile: an unbuffered FILE that refuses every write: write_errors counts each line") {
  watchdog wd(60s);
  std::FILE* full = std::fopen("/dev/full", "w");
  if (full == nullptr) {
    WARN("no /dev/full");
    return;
  }
  std::setvbuf(full, nullptr, _IONBF, 0);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = full});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < 10; ++i) devtap::print<"{}">(out, i);
  });
  rx.close();
  CHECK(ch.stats().write_errors == 10);
  CHECK(ch.stats().lines == 10);
  std::fclose(full);
}

// Rule: `write_errors` counts "the lines in the FILE's buffer when a flush fails (ours, or the one
// `fwrite` does when the buffer fills)"; "`flush_each_line = true` flushes after every line"; "The
// FILE is flushed at the end of each device's stream"; outfeed.md "Errors: never silent". A
// *buffered* FILE on /dev/full takes every fwrite into its buffer and fails at the flush: every
// line is lost, so every line is counted, exactly once. Also with four devices sharing a buffer
// small enough that fwrite's own flushes fail in the middle of the run.
TEST_CASE("hostile: a buffered FILE whose flush fails: the lost lines are counted") {
  watchdog wd(60s);
  struct config {
    bool each;
    int devices;
    std::size_t buffer;
    int prints;
  };
  for (const config c : {config{true, 1, 1 << 16, 10}, config{false, 1, 1 << 16, 10}, config{false, 4, 256, 500},
                         config{true, 4, 256, 500}}) {
    INFO("flush_each_line " << c.each << ", " << c.devices << " devices, buffer " << c.buffer);
    std::FILE* full = std::fopen("/dev/full", "w");
    if (full == nullptr) {
      WARN("no /dev/full");
      return;
    }
    std::vector<char> space(c.buffer);  // glibc honours the size only with a buffer; outlives fclose
    std::setvbuf(full, space.data(), _IOFBF, c.buffer);
    devtap::cpu_client cpus(c.devices);
    devtap::receiver rx({.devices = all(cpus)});
    auto ch = devtap::attach_print(rx, {.sink = full, .flush_each_line = c.each});
    for (auto* dev : cpus.cpu_devices())
      dev->submit([ch, n = c.prints](devtap::cpu_context& ctx) {
        devtap::printer out(ctx, ch);
        for (int i = 0; i < n; ++i) devtap::print<"{} {}">(out, ctx.device().id(), i);
      });
    rx.close();
    CHECK(std::ferror(full) != 0);  // the FILE itself knows it failed
    const auto st = ch.stats();
    CHECK(st.lines == static_cast<std::uint64_t>(c.devices * c.prints));
    CHECK(st.write_errors == st.lines);
    std::fclose(full);
  }
}

// Rule: "each line is counted at most once"; a FILE that takes everything counts nothing, also
// with four devices filling a tiny buffer (its own flushes succeed in the middle of the run).
TEST_CASE("hostile: a FILE with a tiny buffer that takes everything has no write errors") {
  watchdog wd(60s);
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  static char space[64];  // glibc honours the size only with a buffer
  std::setvbuf(file, space, _IOFBF, sizeof space);
  devtap::cpu_client cpus(4);
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = file});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < 1000; ++i) devtap::print<"{} {}">(out, ctx.device().id(), i);
    });
  rx.close();
  CHECK(ch.stats().lines == 4000);
  CHECK(ch.stats().write_errors == 0);
  CHECK(std::ferror(file) == 0);
  std::rewind(file);
  int newlines = 0;
  for (int ch_ = std::fgetc(file); ch_ != EOF; ch_ = std::fgetc(file)) newlines += ch_ == '\n';
  CHECK(newlines == 4000);
  std::fclose(file);
}

#ifdef __GLIBC__
// Rule: each failure counts "the printer's lines that may still be in the buffer ... at most a
// buffer's worth of lines plus one". A FILE (fopencookie) that takes its first 6000 bytes and then
// fails: the lines it never got are all counted, and no more than a buffer's worth besides.
TEST_CASE("hostile: a FILE that fails mid-run counts the lines it lost, not every line before") {
  watchdog wd(60s);
  struct budget {
    std::size_t left;
    std::string got;
  } taken{6000, {}};
  cookie_io_functions_t io{};
  io.write = [](void* cookie, const char* data, std::size_t n) -> ssize_t {
    auto& b = *static_cast<budget*>(cookie);
    if (n > b.left) {
      errno = ENOSPC;
      return -1;
    }
    b.left -= n;
    b.got.append(data, n);
    return static_cast<ssize_t>(n);
  };
  std::FILE* file = fopencookie(&taken, "w", io);
  REQUIRE(file != nullptr);
  constexpr std::size_t buffer = 512, line = 16;  // "line 0000000000\n"
  static char space[buffer];  // (glibc takes a size only with a buffer)
  std::setvbuf(file, space, _IOFBF, buffer);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = file});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < 1000; ++i) devtap::print<"line {:010}">(out, i);
  });
  rx.close();
  std::fclose(file);
  const std::size_t received = taken.got.size() / line;  // whole lines the FILE passed on
  INFO("received " << received << " lines, write_errors " << ch.stats().write_errors);
  CHECK(taken.got.size() % line == 0);
  CHECK(received > 0);
  CHECK(received < 1000);
  CHECK(ch.stats().write_errors >= 1000 - received);
  CHECK(ch.stats().write_errors <= 1000 - received + buffer / line + 1);
}
#endif

// ---------------------------------------------------------------------------------------------
// No printer, the wrong printer

// Rule (docs/outfeed.md): "a tap_point of another receiver, or of a closed one (cpu, host threads:
// `outfeed_error` at the tap ...)", "a tap with no receiver attached, or after `close()` |
// `outfeed_error` at the tap; nothing written, never blocks (also under `drop`)". A print through a
// default print_point (no printer attached), a default print_channel, or another receiver's channel
// is refused at the call; nothing reaches any consumer and no counter moves.
TEST_CASE("hostile: prints with no printer attached, or another receiver's printer, are refused") {
  watchdog wd(60s);
  for (auto policy : {devtap::overflow_policy::block, devtap::overflow_policy::drop, devtap::overflow_policy::error}) {
    devtap::cpu_client cpus(2);
    captured cap;
    devtap::receiver other({.devices = {cpus.cpu_devices()[1]}});
    auto foreign = devtap::attach_print(other, {.sink = cap.sink()});
    devtap::receiver rx({.devices = {cpus.cpu_devices()[0]}, .overflow = policy});
    auto mine = devtap::attach_print(rx, {.sink = cap.sink()});
    const devtap::outfeed of = rx.outfeed(*cpus.cpu_devices()[0]);
    CHECK_THROWS_AS(devtap::print<"none {}">(devtap::printer(of, devtap::print_point{}), 1), devtap::outfeed_error);
    CHECK_THROWS_AS(devtap::print<"none {}">(devtap::print_channel{}.on(of), 2), devtap::outfeed_error);
    CHECK_THROWS_AS(devtap::print<"none {}">(foreign.on(of), 3), devtap::outfeed_error);
    devtap::print<"mine {}">(mine.on(of), 4);
    // a print_point whose tap point is another consumer's (a plain int consumer) on this receiver
    auto ints = rx.attach<int>([](const int&) {});
    devtap::print_point wrong{devtap::tap_point<std::span<const std::byte>>{ints.id, ints.fingerprint, ints.receiver}, 9};
    bool wrong_threw = false;
    try {
      devtap::print<"wrong {}">(devtap::printer(of, wrong), 5);
    } catch (const devtap::outfeed_error&) {
      wrong_threw = true;
    }
    std::uint64_t mismatches = 0;
    try {
      rx.close();
    } catch (const devtap::tap_error&) {
    }
    mismatches = rx.stats().total().type_mismatches;
    other.close();
    CHECK(cap.lines == std::vector<std::string>{"mine 4"});
    CHECK(mine.stats().lines == 1);
    CHECK(foreign.stats().lines == 0);
    CHECK(rx.stats().total().unknown_ids == 0);
    CHECK(rx.stats().total().dropped_records == 0);
    // the mis-typed one: refused at the tap, or counted as a type mismatch, never given to the int consumer
    CHECK((wrong_threw || mismatches == 1));
  }
}

// Rule: "Like the outfeed in it, a printer is valid while its receiver is open" and outfeed.md
// "`rx.close()` ... Taps after that throw". A printer kept past close(), then past the receiver's
// destruction, then when a new receiver is open on the device: always outfeed_error, and the new
// receiver's printer never sees those lines.
TEST_CASE("hostile: a printer kept past close(), destruction, and into the next receiver") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  devtap::printer stale;
  devtap::print_channel old_ch;
  {
    devtap::receiver rx({.devices = all(cpus)});
    old_ch = devtap::attach_print(rx, {.sink = [](std::string_view) {}});
    stale = old_ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
    devtap::print<"first">(stale);
    rx.close();
    CHECK_THROWS_AS(devtap::print<"after close">(stale), devtap::outfeed_error);
  }
  CHECK_THROWS_AS(devtap::print<"after destruction">(stale), devtap::outfeed_error);
  CHECK(old_ch.stats().lines == 1);
  captured cap;
  devtap::receiver rx2({.devices = all(cpus)});
  auto ch2 = devtap::attach_print(rx2, {.sink = cap.sink()});
  CHECK_THROWS_AS(devtap::print<"stale into the new receiver">(stale), devtap::outfeed_error);
  // the old channel's point on the new receiver's outfeed: another receiver's point
  CHECK_THROWS_AS(devtap::print<"old point">(old_ch.on(rx2.outfeed(*cpus.cpu_devices()[0]))), devtap::outfeed_error);
  devtap::print<"new">(ch2.on(rx2.outfeed(*cpus.cpu_devices()[0])));
  rx2.close();
  CHECK(cap.lines == std::vector<std::string>{"new"});
  CHECK(old_ch.stats().lines == 1);
}

// ---------------------------------------------------------------------------------------------
// Stats

// Rule: `print_stats`: "`lines` (one per print)", "error lines included"; outfeed.md: "`records`:
// records delivered to a consumer; `bytes`: their payload bytes"; "after `flush()` they are exact".
// Several printers and a plain consumer on one receiver; the counters after flush() and after
// close() add up exactly, per printer and in the receiver.
TEST_CASE("hostile: stats add up exactly across printers, devices and flush()") {
  watchdog wd(60s);
  devtap::cpu_client cpus(3);
  std::atomic<std::uint64_t> a_lines{0}, b_lines{0};
  int ints = 0;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 3 << 12});
  auto a = devtap::attach_print(rx, {.sink = [&](std::string_view) { a_lines.fetch_add(1); }, .name = "a"});
  auto point = rx.attach<int>([&](const int&) { ++ints; }, devtap::shared);
  auto b = devtap::attach_print(rx, {.sink = [&](std::string_view) { b_lines.fetch_add(1); }, .name = "b"});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([=](devtap::cpu_context& ctx) {
      devtap::printer pa(ctx, a), pb(ctx, b);
      for (int i = 0; i < 777; ++i) {
        devtap::print<"a {}">(pa, i);
        if (i % 3 == 0) devtap::print<"b {}\nsecond line">(pb, i);  // two sink calls, one line in stats
        if (i % 7 == 0) devtap::print<"[{:{}}]">(pa, i, -1);         // an error line
        ctx.tap(point, i);
      }
    });
  rx.barrier();
  rx.flush();
  const std::uint64_t a_err = 3 * ((777 + 6) / 7), a_ok = 3 * 777, b_n = 3 * ((777 + 2) / 3);
  CHECK(a.stats().lines == a_ok + a_err);
  CHECK(a.stats().format_errors == a_err);
  CHECK(b.stats().lines == b_n);
  CHECK(rx.stats().total().records == a_ok + a_err + b_n + 3 * 777);
  rx.close();
  CHECK(a_lines.load() == a_ok + a_err);
  CHECK(b_lines.load() == 2 * b_n);
  CHECK(ints == 3 * 777);
  const auto st = rx.stats().total();
  CHECK(st.records == a_ok + a_err + b_n + 3 * 777);
  CHECK(st.dropped_records + st.unknown_ids + st.type_mismatches + st.consumer_errors + st.ignored + st.lost_at_close == 0);
  CHECK(a.stats().unknown_formats + a.stats().malformed + a.stats().write_errors + a.stats().definitions == 0);
}

// Rule (print.md): "A callable sink gets each line without its `\n`, and never concurrently: devices
// take turns under the printer's mutex". Eight devices printing at once into one sink that checks it
// is never entered twice.
TEST_CASE("hostile: a callable sink is never called concurrently, eight devices at once") {
  watchdog wd(120s);
  devtap::cpu_client cpus(8);
  std::atomic<int> inside{0};
  std::atomic<int> overlaps{0};
  std::uint64_t calls = 0;  // plain: the sink is serialised
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 8 << 12});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view line) {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    if (line.empty() || line.back() == '\n') overlaps.fetch_add(1000);
    ++calls;
    inside.fetch_sub(1);
  }});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < 5000; ++i) devtap::print<"{} {}\n">(out, ctx.device().id(), i);
    });
  rx.close();
  CHECK(overlaps.load() == 0);
  CHECK(calls == 8u * 5000);
}

// ---------------------------------------------------------------------------------------------
// More hostile corners

// Rule (docs/outfeed.md): "a consumer or handler of this receiver must not wait for space in its
// rings" (outfeed.hpp; the doc's table: "close()/flush()/barrier() from a consumer | std::logic_error"
// is the nearest documented rule; for taps from a consumer into a full ring of its own receiver the
// tap throws outfeed_error). Undocumented in print.md: a sink that prints. Expected: no deadlock;
// each re-entrant print either becomes a line or the sink gets an outfeed_error.
TEST_CASE("hostile: a sink that prints into its own device's ring (re-entrant), tiny ring") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 256});
  devtap::printer self_out;
  std::uint64_t reprinted = 0, refused = 0, echoes = 0;
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view line) {
    if (line.starts_with("echo")) {
      ++echoes;
      return;
    }
    for (int k = 0; k < 8; ++k) {  // more than a 256-byte ring holds
      try {
        devtap::print<"echo {}">(self_out, k);
        ++reprinted;
      } catch (const devtap::outfeed_error&) {
        ++refused;
      }
    }
  }});
  self_out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    for (int i = 0; i < 20; ++i) devtap::print<"seed {}">(out, i);
  });
  rx.close();
  CHECK(reprinted + refused == 20u * 8);
  CHECK(echoes == reprinted);
  CHECK(ch.stats().lines == 20 + reprinted);
}

// Rule (docs/outfeed.md): tap_error's "`consumer`: its name or `#id`". print_options::name = "" is
// undocumented; expected: close() still names the printer somehow (non-empty).
TEST_CASE("hostile: a throwing sink of a printer with an empty name") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = [](std::string_view) { throw std::runtime_error("x"); }, .name = ""});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { devtap::print<"a">(devtap::printer(ctx, ch)); });
  try {
    rx.close();
    FAIL("no throw");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(!e.failures()[0].consumer.empty());
    CHECK(e.failures()[0].message == "x");
  }
}

// Rule: "a record that does not match its definition (sizes, span counts, bool bytes), becomes an
// error line (`format_errors`, `malformed`), never undefined behaviour." A span of bool whose bytes
// are not 0/1 (bytes reinterpreted as bool by a careless user) reaches the host as is.
TEST_CASE("hostile: a bool span holding bytes other than 0 and 1 is an error line") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  alignas(8) static unsigned char raw[3] = {1, 2, 0};
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"{}">(out, std::span<const bool>(reinterpret_cast<const bool*>(raw), 3));
    devtap::print<"after">(out);
  });
  rx.close();
  REQUIRE(cap.lines.size() == 2);
  CHECK(cap.lines[0] == "devtap::print: malformed arguments for format \"{}\"");
  CHECK(cap.lines[1] == "after");
  CHECK(ch.stats().malformed == 1);
  CHECK(ch.stats().lines == 2);
}

// Rule: fmt syntax (print.md "{fmt} syntax"); UTF-8 in the format text and width on multi-byte text
// is undocumented: expected as fmt::format does it.
TEST_CASE("hostile: UTF-8 in the format text and centred multi-byte arguments") {
  watchdog wd(60s);
  auto lines = [] {
    devtap::cpu_client cpus(1);
    captured cap;
    devtap::receiver rx({.devices = all(cpus)});
    auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      devtap::print<"héllo → {:^7}|{:─<6}|{}">(out, std::string_view("日本"), std::string_view("é"), 'x');
    });
    rx.close();
    return cap.lines;
  }();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == fmt::format("héllo → {:^7}|{:─<6}|{}", "日本", "é", 'x'));
}

// Rule: "If a definition never arrives ... the waiting lines are written as `devtap::print: format id
// 0x... unknown (...)` at the end of the stream, or when more than 65536 records or 16 MiB wait, and
// counted in `unknown_formats`." The CUDA protocol driven from a host thread (as tests/print/wire.cpp
// does): 70000 id-only records before their definition. Every record is one line, in order.
TEST_CASE("hostile: more than 65536 records waiting for a definition") {
  watchdog wd(120s);
  using namespace devtap::detail;
  devtap::cpu_client cpus(1);
  std::vector<std::string> lines;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view l) { lines.emplace_back(l); }});
  const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
  using sig = print_signature<"hostile waiting {}", int>;
  constexpr int n = 70000;
  for (int i = 0; i < n; ++i) print_send<sig, false>(out, i);
  print_send<sig, true>(out, n);
  rx.close();
  REQUIRE(lines.size() == std::size_t{n} + 1);
  const auto st = ch.stats();
  CHECK(st.lines == std::uint64_t{n} + 1);
  CHECK(st.unknown_formats >= std::uint64_t{n} - 65536);
  std::uint64_t formatted = 0, unknown = 0;
  int next = 0;
  bool ordered = true;
  for (const auto& l : lines) {
    if (l.starts_with("devtap::print: format id")) {
      ++unknown;
      ++next;
    } else {
      ++formatted;
      if (l != "hostile waiting " + std::to_string(next++)) ordered = false;
    }
  }
  CHECK(ordered);
  CHECK(unknown == st.unknown_formats);
  CHECK(formatted + unknown == std::uint64_t{n} + 1);
}

// Rule (docs/outfeed.md): "`close()` gave up on the device (`close_timeout`) | `lost_at_close`: what
// was committed in its ring, counted (not delivered) by its reader once its consumer call returns |
// `timeout_error`"; "After `close()` has returned or thrown, no consumer is called again ... (a
// consumer call already running when `close()` gave up finishes)". A sink slower than close_timeout:
// lines + lost_at_close == prints, and the sink is called at most once more after close() threw.
TEST_CASE("hostile: a sink slower than close_timeout: lines + lost_at_close == prints") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  std::atomic<int> calls{0};
  devtap::print_channel ch;
  std::uint64_t lost = 0, lines_after = 0;
  int calls_at_throw = 0, calls_later = 0;
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16, .close_timeout = std::chrono::milliseconds(200)});
    ch = devtap::attach_print(rx, {.sink = [&](std::string_view) {
      calls.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
    }});
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < 100; ++i) devtap::print<"{}">(out, i);
    });
    bool timed_out = false;
    try {
      rx.close();
    } catch (const devtap::timeout_error&) {
      timed_out = true;
    }
    calls_at_throw = calls.load();
    CHECK(timed_out);
    devtap_test::eventually([&] {  // the reader counts what is left once the running call returns
      lost = rx.stats().total().lost_at_close;
      lines_after = ch.stats().lines;
      return lost + lines_after == 100;
    }, std::chrono::milliseconds(10000));
    calls_later = calls.load();
  }
  INFO("lines " << lines_after << " lost " << lost << " calls at throw " << calls_at_throw << " later " << calls_later);
  CHECK(lines_after + lost == 100);
  CHECK(calls_later - calls_at_throw <= 1);
  CHECK(ch.stats().lines == static_cast<std::uint64_t>(calls.load()));
}

// Rule: "A sink that throws stops *that printer* on that device". Another printer on the same
// device and receiver must go on getting every line.
TEST_CASE("hostile: one printer's sink throws; another printer on the same device goes on") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  std::vector<std::string> b_lines;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024});
  auto a = devtap::attach_print(rx, {.sink = [](std::string_view) { throw std::runtime_error("a fails"); }, .name = "a"});
  auto b = devtap::attach_print(rx, {.sink = [&](std::string_view l) { b_lines.emplace_back(l); }, .name = "b"});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer pa(ctx, a), pb(ctx, b);
    for (int i = 0; i < 1000; ++i) {
      devtap::print<"a {}">(pa, i);
      devtap::print<"b {}">(pb, i);
    }
  });
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
  REQUIRE(b_lines.size() == 1000);
  CHECK(b_lines[999] == "b 999");
  CHECK(a.stats().lines == 0);
  CHECK(rx.stats().total().consumer_errors == 1000);
}

// Rule: "Times are the host's, taken when the line is formatted, so every device's lines share one
// clock." With `elapsed`, the times of the lines, in the order the sink gets them, never go back.
TEST_CASE("hostile: elapsed prefixes never go back across four devices") {
  watchdog wd(60s);
  devtap::cpu_client cpus(4);
  std::vector<double> times;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4 << 12});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view l) { times.push_back(std::atof(std::string(l.substr(1, 12)).c_str())); },
                                      .prefix = devtap::print_prefix::elapsed});
  for (auto* dev : cpus.cpu_devices())
    dev->submit([ch](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      for (int i = 0; i < 3000; ++i) devtap::print<"{}">(out, i);
    });
  rx.close();
  REQUIRE(times.size() == 12000);
  std::size_t back = 0;
  for (std::size_t i = 1; i < times.size(); ++i)
    if (times[i] < times[i - 1]) ++back;
  // Undocumented subtlety: the time is taken before the sink's mutex, so two devices may swap by a
  // microsecond; the rule says one clock, not one order. Reported, not required.
  if (back != 0) WARN(back << " line(s) carry an earlier elapsed time than the line before them");
  CHECK(times.front() >= 0.0);
}

// Rule: "`attach_print` refuses a sink that cannot take lines — a null `FILE*`, an empty
// `std::function` (either signature) or a null function pointer — with `std::invalid_argument`";
// docs/outfeed.md "Errors: never silent". Nothing is attached: the receiver closes cleanly.
TEST_CASE("hostile: a null FILE* sink or an empty std::function sink") {
  watchdog wd(60s);
  const auto refused = [](devtap::print_sink sink, std::string_view what) {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus)});
    std::string message;
    try {
      (void)devtap::attach_print(rx, {.sink = std::move(sink)});
    } catch (const std::invalid_argument& e) {
      message = e.what();
    }
    INFO(message);
    CHECK(message == "devtap: attach_print: the sink is " + std::string(what));
    CHECK_NOTHROW(rx.close());
  };
  SECTION("null FILE*") {
    refused(static_cast<std::FILE*>(nullptr), "a null FILE*");
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus)});
    CHECK_THROWS_AS(devtap::attach_print(rx, {.sink = static_cast<std::FILE*>(nullptr)}), std::invalid_argument);
  }
  const std::string empty = "an empty callable (an empty std::function or a null function pointer)";
  SECTION("empty std::function with the device parameter") {
    refused(std::function<void(std::string_view, const devtap::device&)>{}, empty);
  }
  SECTION("empty std::function of the line only") {
    refused(std::function<void(std::string_view)>{}, empty);
  }
  SECTION("null function pointers") {
    refused(static_cast<void (*)(std::string_view)>(nullptr), empty);
    refused(static_cast<void (*)(std::string_view, const devtap::device&)>(nullptr), empty);
  }
  SECTION("a non-empty std::function is accepted") {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus)});
    int calls = 0;
    auto ch = devtap::attach_print(rx, {.sink = std::function<void(std::string_view)>([&](std::string_view) { ++calls; })});
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { devtap::print<"into something">(devtap::printer(ctx, ch)); });
    rx.close();
    CHECK(calls == 1);
    CHECK(ch.stats().lines == 1);
  }
}

// Undocumented: attach_print on a receiver that is already closed. Expected: an exception, not a
// printer whose prints vanish.
TEST_CASE("hostile: attach_print on a closed receiver") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  rx.close();
  bool threw = false;
  devtap::print_channel ch;
  try {
    ch = devtap::attach_print(rx, {.sink = [](std::string_view) {}});
  } catch (const std::exception& e) {
    threw = true;
    INFO(e.what());
  }
  if (!threw) CHECK_THROWS_AS(devtap::print<"x">(ch.on(rx.outfeed(*cpus.cpu_devices()[0]))), devtap::outfeed_error);
  CHECK(ch.stats().lines == 0);
}

namespace {
enum class char_enum : char { a = 'a' };
enum class bool_enum : bool { yes = true };
}  // namespace

// Rule: "integers of 8 to 64 bits, enums (their underlying type) | their bytes | a number". An enum
// whose underlying type is char or bool is still an enum: the table says it prints as a number.
TEST_CASE("hostile: enums with char and bool underlying types print as numbers") {
  watchdog wd(60s);
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"{} {}">(out, char_enum::a, bool_enum::yes);
  });
  rx.close();
  REQUIRE(cap.lines.size() == 1);
  CHECK(cap.lines[0] == "97 1");
}

// Rule: "the fixed-size arguments of one print take at most 64 KiB in all" (its record is built on
// the printing thread's stack). The verdicts are compile-time constants, read here at run time so
// that a wrong verdict fails this test instead of the build.
TEST_CASE("hostile: fixed-size arguments of 64 KiB in all are accepted, a byte more is refused") {
  using namespace devtap::detail;
  constexpr print_check at_limit = print_signature<"{}", std::array<char, 1u << 16>>::check.code;
  constexpr print_check above = print_signature<"{}", std::array<char, (1u << 16) + 1>>::check.code;
  constexpr print_check doubles_at_limit = print_signature<"{}", std::array<double, 1u << 13>>::check.code;
  constexpr print_check doubles_above = print_signature<"{}", double[(1u << 13) + 1]>::check.code;
  // together: a scalar counts 8 bytes
  constexpr print_check two_at_limit = print_signature<"{} {}", std::array<char, (1u << 16) - 8>, int>::check.code;
  constexpr print_check two_above = print_signature<"{} {}", std::array<char, (1u << 16) - 7>, int>::check.code;
  constexpr print_check with_span = print_signature<"{} {}", std::array<char, 1u << 16>, std::span<const int>>::check.code;
  CHECK(at_limit == print_check::ok);
  CHECK(above == print_check::too_long);
  CHECK(doubles_at_limit == print_check::ok);
  CHECK(doubles_above == print_check::too_long);
  CHECK(two_at_limit == print_check::ok);
  CHECK(two_above == print_check::too_long);
  CHECK(with_span == print_check::ok);  // (a span travels after the record, from where it is)
  // The wire's 22-bit extent field still holds up to 4M (a definition from a device is read with
  // it), 4M as 0 (no array is empty): it decodes to 4M, and the extents below keep their encoding.
  constexpr std::uint32_t d = print_desc(print_kind::u8, print_form::array, 4u << 20);
  CHECK(print_desc_valid(d));
  CHECK(desc_extent(d) == (4u << 20));
  CHECK(desc_extent(print_desc(print_kind::u8, print_form::array, (4u << 20) - 1)) == (4u << 20) - 1);
  CHECK(desc_extent(print_arg_desc<double[2]>()) == 2);
  CHECK(print_compute_layout(&d, 1, nullptr).arg_bytes == (4u << 20));
  CHECK(desc_extent(print_desc(print_kind::i32, print_form::scalar)) == 0);
  CHECK(!print_desc_valid(print_desc(print_kind::i32, print_form::span, 0) | (1u << 10)));
}

TEST_CASE("hostile: a print of 64 KiB of fixed-size arguments from a cpu device's thread") {
  // The record is built on the printing thread's stack: at the limit it must still fit there.
  devtap::cpu_client cpus(1);
  devtap_test::captured cap;
  devtap::receiver rx({.devices = devtap_test::all(cpus), .budget_bytes = 1 << 20, .name = "big"});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    static std::array<char, 1u << 16> text;  // (static: not on the test's stack either)
    text.fill('x');
    devtap::print<"{}">(devtap::printer(ctx, ch), text);
    static std::array<std::int64_t, (1u << 13) - 1> numbers;
    numbers.fill(-1);
    devtap::print<"{} {}">(devtap::printer(ctx, ch), numbers, 7);
  });
  rx.close();
  REQUIRE(cap.lines.size() == 2);
  CHECK(cap.lines[0] == std::string(1u << 16, 'x'));
  CHECK(cap.lines[1].size() == 1 + 4 * ((1u << 13) - 1) - 2 + 1 + 2);  // "[-1, -1, ..., -1] 7"
  CHECK(cap.lines[1].substr(cap.lines[1].size() - 5) == "-1] 7");
}

TEST_CASE("hostile: volatile scalars print as their values") {
  const auto p = devtap_test::print_on_one_device([](devtap::printer out) {
    volatile int i = -7;
    volatile double d = 2.5;
    volatile bool b = true;
    int target = 0;
    int* volatile ptr = &target;
    devtap::print<"{} {} {} {}">(out, i, d, b, ptr != nullptr);
    const volatile std::uint8_t u = 200;
    devtap::print<"{:#x}">(out, u);
    devtap::print<"{} {} {}">(out, i, std::string_view("with a span"), d);  // (the span path skips the scalars)
  });
  REQUIRE(p.lines.size() == 3);
  CHECK(p.lines[0] == "-7 2.5 true true");
  CHECK(p.lines[1] == "0xc8");
  CHECK(p.lines[2] == "-7 with a span 2.5");
}

// Two format texts whose 64-bit ids collide (FNV-1a; found by a Pollard-rho search): the host
// cannot tell their records apart. Neither may print the other's text: from the moment the second
// is known, records of either are error lines, counted in format_errors.
#define DEVTAP_TEST_FORMAT_A "\306\030\315\277\132\222\355\147"
#define DEVTAP_TEST_FORMAT_B "\163\026\361\031\130\070\027\232"
TEST_CASE("hostile: two formats whose ids collide print error lines, never each other's text") {
  using namespace devtap::detail;
  STATIC_REQUIRE(print_signature<DEVTAP_TEST_FORMAT_A>::id == print_signature<DEVTAP_TEST_FORMAT_B>::id);
  // (a kernel keys its definition token by this too: each of the two sends its own definition)
  STATIC_REQUIRE(print_signature<DEVTAP_TEST_FORMAT_A>::text_key != print_signature<DEVTAP_TEST_FORMAT_B>::text_key);
  std::vector<std::string> logs;
  std::mutex logs_mutex;
  devtap::set_log_sink([&](devtap::log_level, std::string_view m) {
    std::lock_guard lock(logs_mutex);
    logs.emplace_back(m);
  });
  devtap::cpu_client cpus(1);
  devtap_test::captured cap;
  devtap::receiver rx({.devices = devtap_test::all(cpus), .name = "collide"});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { devtap::print<DEVTAP_TEST_FORMAT_A>(devtap::printer(ctx, ch)); });
  rx.flush();  // A's line is formatted before B is known: A's own text
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::print<DEVTAP_TEST_FORMAT_B>(devtap::printer(ctx, ch));
    devtap::print<DEVTAP_TEST_FORMAT_A>(devtap::printer(ctx, ch));
  });
  rx.close();
  devtap::set_log_sink(nullptr);
  REQUIRE(cap.lines.size() == 3);
  CHECK(cap.lines[0] == DEVTAP_TEST_FORMAT_A);
  for (std::size_t i : {1, 2}) {
    INFO(cap.lines[i]);
    CHECK(cap.lines[i].starts_with("devtap::print: two formats share the id 0x7ffe982c1c38d580"));
    CHECK(cap.lines[i].find("cannot be told apart") != std::string::npos);
  }
  CHECK(ch.stats().format_errors == 2);
  CHECK(ch.stats().lines == 3);
  std::lock_guard lock(logs_mutex);
  CHECK(std::count_if(logs.begin(), logs.end(), [](const std::string& l) { return l.find("two formats share the id") != std::string::npos; }) == 1);
}

// Rule: "`char` ... (any {fmt} spec for them)" and strings take {fmt} 9's specs; the debug
// presentation `{:?}` of text with quotes, escapes, NULs and invalid UTF-8 must equal fmt::format's.
TEST_CASE("hostile: {:?} of text with quotes, control bytes, NULs and invalid UTF-8") {
  watchdog wd(60s);
  using namespace std::string_view_literals;
  const std::string_view t = "q\"\\\t\n\0\x01\xff\xc3\xa9"sv;
  devtap::cpu_client cpus(1);
  captured cap;
  devtap::receiver rx({.devices = all(cpus)});
  auto ch = devtap::attach_print(rx, {.sink = cap.sink()});
  const char arr[4] = {'a', '"', '\t', '\0'};
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"{:?} {:?} {:?}">(out, t, arr, '\'');
  });
  rx.close();
  REQUIRE(cap.lines.size() == 1);
  CHECK(cap.lines[0] == fmt::format("{:?} {:?} {:?}", t, std::string_view("a\"\t"), '\''));
}

// Rule: the waiting lines are written as unknown "when more than 65536 records or 16 MiB wait".
// The byte limit: 300 id-only records of ~60 KB each (18 MB) before their definition, through a
// 64 KiB ring. Every record is one line, in order; the ones pushed out early are unknown lines.
TEST_CASE("hostile: more than 16 MiB of records waiting for a definition") {
  watchdog wd(120s);
  using namespace devtap::detail;
  devtap::cpu_client cpus(1);
  std::vector<std::string> lines;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view l) { lines.emplace_back(l.substr(0, 40)); }});
  const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
  using sig = print_signature<"hostile bytes {} {}", int, std::string_view>;
  const std::string big_text(60000, 'b');
  constexpr int n = 300;
  for (int i = 0; i < n; ++i) print_send<sig, false>(out, i, std::string_view(big_text));
  print_send<sig, true>(out, n, std::string_view(big_text));
  rx.close();
  REQUIRE(lines.size() == std::size_t{n} + 1);
  const auto st = ch.stats();
  CHECK(st.lines == std::uint64_t{n} + 1);
  CHECK(st.unknown_formats >= 1);
  CHECK(st.unknown_formats < std::uint64_t{n});
  int next = 0;
  bool ordered = true;
  for (const auto& l : lines) {
    if (!l.starts_with("devtap::print: format id") && !l.starts_with("hostile bytes " + std::to_string(next) + " "))
      ordered = false;
    ++next;
  }
  CHECK(ordered);
}

// print.md: a definition that fails the host's check "becomes an error line". A definition whose text
// was damaged in flight (its id is the genuine format's) was registered under that id process-wide:
// every later print of the genuine format, in any receiver, printed the damaged text. The host now
// checks that a definition hashes to its id.
TEST_CASE("hostile: a damaged definition does not take over its format's id") {
  watchdog wd(30s);
  using namespace devtap::detail;
  devtap::cpu_client cpus(1);
  using genuine = print_signature<"hostile genuine {} C", int>;
  using damaged = print_signature<"HOSTILE GENUINE {} F", int>;  // same size, same descriptors
  static_assert(genuine::def_bytes == damaged::def_bytes && genuine::id != damaged::id);
  {
    std::vector<std::string> lines;
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
    auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view l) { lines.emplace_back(l); }});
    const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
    // What a CUDA device sends with its definition, the text damaged on the way, the id intact.
    print_record<damaged::def_bytes + 8> rec;
    static_assert(sizeof(rec) == 32 + damaged::def_bytes + damaged::arg_bytes);
    rec.head.count = sizeof(rec) - 8;
    rec.head.id = genuine::id;
    rec.head.flags = print_has_definition;
    rec.head.def_bytes = damaged::def_bytes;
    rec.head.arg_bytes = damaged::arg_bytes;
    std::memcpy(rec.body, damaged::def_words.w, damaged::def_bytes);
    const int one = 1;
    std::memcpy(rec.body + damaged::def_bytes, &one, sizeof one);
    const auto& point = ch.point().point;
    out.out().tap(devtap::tap_point<decltype(rec)>{point.id, point.fingerprint, point.receiver}, rec);
    rx.close();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("malformed format definition") != std::string::npos);
    CHECK(ch.stats().malformed == 1);
  }
  std::vector<std::string> lines;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
  auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view l) { lines.emplace_back(l); }});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    devtap::print<"hostile genuine {} C">(out, 21);
  });
  rx.close();
  CHECK(lines == std::vector<std::string>{"hostile genuine 21 C"});
}

// print.md: "a device's line that waited for it while close() gave up on that device is not given to
// it (no sink call after close() has thrown) and counts" in write_errors. Either cpu:0's line holds
// the callable sink past close_timeout while cpu:1's reader waits for it, or close() gives up
// during the sink's call for the first line of a print of two (its second line still came).
TEST_CASE("hostile: a callable sink is not called after close() gave up on the device waiting for it") {
  watchdog wd(30s);
  const bool two_lines = GENERATE(false, true);
  INFO((two_lines ? "a print of two lines" : "another device's print"));
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::cpu_client cpus(2);
  std::atomic<bool> release{false}, blocked{false}, close_done{false};
  std::atomic<int> after{0};
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  auto ch = devtap::attach_print(*rx, {.sink = [&](std::string_view line) {
                                   if (close_done) ++after;
                                   if (line != "block") return;
                                   blocked = true;
                                   while (!release) std::this_thread::sleep_for(1ms);
                                 }});
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    devtap::printer out(ctx, ch);
    if (two_lines) devtap::print<"block\nafter close">(out);
    else devtap::print<"block">(out);
  });
  while (!blocked) std::this_thread::sleep_for(1ms);
  if (!two_lines) {
    cpus.cpu_devices()[1]->run([&](devtap::cpu_context& ctx) {
      devtap::printer out(ctx, ch);
      devtap::print<"second {}">(out, 2);
    });
    std::this_thread::sleep_for(50ms);  // cpu:1's reader waits for the sink
  }
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  close_done = true;
  release = true;
  for (int i = 0; i < 2000 && ch.stats().write_errors == 0; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);
  CHECK(after == 0);
  // cpu:1's line counts in write_errors once its reader waited for the sink; in lost_at_close where,
  // late on a loaded machine, that reader had not read it when close() gave up.
  const std::uint64_t unread = two_lines ? 0 : rx->stats().devices[1].lost_at_close;
  CHECK(unread <= 1);
  CHECK(ch.stats().write_errors + unread == 1);
  CHECK(ch.stats().lines + unread == (two_lines ? 1u : 2u));
  rx.reset();
  devtap::set_log_sink({});
}

// Rule: every print is a line, a consumer error or lost_at_close ("never silent"). Records that wait
// for a definition (one overtook it, the rest queue behind) were dropped uncounted when the sink
// threw while they were written out, at a definition or at the end of the stream, and when close()
// gave up on the device (no end of stream). Each now counts as a line the sink lost.
TEST_CASE("hostile: records waiting for a definition count when the sink throws or close() gives up") {
  watchdog wd(120s);
  using namespace devtap::detail;
  devtap::cpu_client cpus(1);
  using late = print_signature<"hostile late {}", int>;  // (defined in the first section: the registry is the process's)
  using never = print_signature<"hostile never defined {}", int>;
  using fine = print_signature<"hostile fine {}", int>;
  SECTION("the sink throws on the first waiting line, at its definition") {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
    auto ch = devtap::attach_print(rx, {.sink = [](std::string_view l) {
                                          if (l == "hostile late 1") throw std::runtime_error("sink failed");
                                        }});
    const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
    print_send<fine, true>(out, 0);   // written
    print_send<late, false>(out, 1);  // overtook its definition: waits, and the next ten behind it
    for (int i = 2; i < 12; ++i) print_send<fine, false>(out, i);
    rx.flush();
    print_send<late, true>(out, 12);  // its definition: the waiting lines go out, the first throws
    for (int i = 13; i < 20; ++i) print_send<fine, false>(out, i);
    CHECK_THROWS_AS(rx.close(), devtap::tap_error);
    CHECK(ch.stats().lines + rx.stats().total().consumer_errors == 20);
    CHECK(ch.stats().write_errors == 11);  // "hostile late 1" and the ten behind it
  }
  SECTION("the sink throws on the unknown-format line at the end of the stream") {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16});
    auto ch = devtap::attach_print(rx, {.sink = [](std::string_view l) {
                                          if (l.find("unknown") != std::string_view::npos) throw std::runtime_error("sink failed");
                                        }});
    const devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
    print_send<fine, true>(out, 0);
    print_send<never, false>(out, 1);
    for (int i = 2; i < 10; ++i) print_send<fine, false>(out, i);
    CHECK_THROWS_AS(rx.close(), devtap::tap_error);
    CHECK(ch.stats().lines + rx.stats().total().consumer_errors == 10);
    CHECK(ch.stats().write_errors == 9);
  }
  SECTION("close() gives up on the device while records wait") {
    auto rx = std::make_unique<devtap::receiver>(
        devtap::receiver_options{.devices = all(cpus), .budget_bytes = 1 << 16, .close_timeout = 200ms});
    auto waiting = devtap::attach_print(*rx, {.sink = [](std::string_view) {}, .name = "waiting"});
    auto slow = devtap::attach_print(*rx, {.sink = [](std::string_view) { std::this_thread::sleep_for(1500ms); },
                                           .name = "slow"});
    const devtap::printer w = waiting.on(rx->outfeed(*cpus.cpu_devices()[0]));
    const devtap::printer s = slow.on(rx->outfeed(*cpus.cpu_devices()[0]));
    print_send<never, false>(w, 1);  // it and the eight behind it wait
    for (int i = 2; i < 10; ++i) print_send<fine, true>(w, i);
    print_send<fine, true>(s, 100);  // the reader is stuck in this sink when close() gives up
    print_send<fine, true>(s, 101);
    CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
    std::this_thread::sleep_for(2s);  // the stuck reader leaves its sink call and counts what is left
    const auto lost = rx->stats().total().lost_at_close;
    rx.reset();  // the waiting records count when the device's consumer state goes, with the receiver
    CHECK(waiting.stats().lines + slow.stats().lines + lost == 11);
    CHECK(waiting.stats().write_errors == 9);
  }
}

// docs/print.md: a reader close() gave up on "finishes that line when the write returns". A FILE
// sink went on: records that waited for a definition were written out, thousands, into the FILE
// after close() threw (helper report of session 35: 3002 lines into a pipe that held 564 when
// close() gave up), and into the trace too. They are now counted in write_errors, as a callable's.
TEST_CASE("hostile print: after close() gave up on a reader blocked in a FILE sink, the lines it still holds are not written") {
  watchdog dog("print drain after give-up", 60s);
  devtap_test::quiet_log quiet;
  using namespace devtap::detail;
  using late = print_signature<"drain late {}", int>;
  using fine = print_signature<"drain fine {} {}", int, std::string_view>;
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::FILE* f = ::fdopen(fds[1], "w");
  REQUIRE(f != nullptr);
  std::setvbuf(f, nullptr, _IONBF, 0);
  devtap::print_stats stats;
  std::size_t lines = 0;
  {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 20, .close_timeout = 300ms});
    auto channel = devtap::attach_print(rx, {.sink = f});
    const devtap::printer out = channel.on(rx.outfeed(*cpus.cpu_devices()[0]));
    const std::string pad(100, 'x');
    print_send<late, false>(out, 0);  // overtakes its definition: everything behind it waits
    for (int i = 1; i <= 3000; ++i) print_send<fine, true>(out, i, std::string_view(pad));
    print_send<late, true>(out, 3001);  // the definition: the reader writes 3001 lines, blocks on the pipe
    std::this_thread::sleep_for(200ms);
    CHECK_THROWS_AS(rx.close(), devtap::timeout_error);
    std::thread reader([&] {  // the pipe is read from now on: the blocked write returns
      char buf[65536];
      for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) lines += static_cast<std::size_t>(std::count(buf, buf + n, '\n'));
    });
    devtap_test::eventually([&] { return channel.stats().lines == 3002; }, 20s);
    stats = channel.stats();
    std::fclose(f);
    reader.join();
  }
  ::close(fds[0]);
  INFO("lines in the pipe " << lines << ", stats.lines " << stats.lines << ", write_errors " << stats.write_errors);
  CHECK(stats.lines == 3002);
  CHECK(lines <= 65536 / 100 + 2);  // what the pipe held when close() gave up, and the line being written
  CHECK(lines + stats.write_errors == stats.lines);
}
