// The receiver on cpu devices: order, consumers of every kind, flush/close, every error path.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/ring/memory.hpp>

#include "../cpu_starver.hpp"
#include "../hostile.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {
struct step {
  std::uint32_t device;
  std::uint32_t index;
  float loss;
};

std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

/** Log lines, filled from any thread (reader threads log); shared so a late line has somewhere to go. */
struct captured_log {
  std::mutex mutex;
  std::vector<std::string> lines;
};

/** Installs a sink that keeps the error lines; the caller resets the sink. */
std::shared_ptr<captured_log> capture_errors() {
  auto log = std::make_shared<captured_log>();
  devtap::set_log_sink([log](devtap::log_level level, std::string_view m) {
    std::lock_guard lock(log->mutex);
    if (level == devtap::log_level::error) log->lines.emplace_back(m);
  });
  return log;
}

devtap::consumer<step> collect(devtap::inbox<step> in, std::vector<std::vector<step>>* out, std::atomic<int>* ended) {
  while (auto s = co_await in.next()) (*out)[static_cast<std::size_t>(in.device().id())].push_back(*s);
  ended->fetch_add(1);
}
}  // namespace

TEST_CASE("each device's taps reach its own coroutine, in order, and the stream ends at close") {
  devtap::cpu_client cpus(3);
  std::vector<std::vector<step>> got(3);
  std::atomic<int> ended{0};
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 64 << 10, .name = "order"});
  auto point = rx.attach<step>([&](devtap::inbox<step> in) { return collect(in, &got, &ended); });
  for (auto* dev : cpus.cpu_devices())
    dev->submit([&, point](devtap::cpu_context& ctx) {
      for (std::uint32_t i = 0; i < 5000; ++i)
        ctx.tap(point, step{static_cast<std::uint32_t>(ctx.device().id()), i, 1.0f / float(i + 1)});
    });
  rx.close();
  CHECK(ended == 3);
  for (std::uint32_t d = 0; d < 3; ++d) {
    REQUIRE(got[d].size() == 5000);
    for (std::uint32_t i = 0; i < 5000; ++i) {
      CHECK(got[d][i].device == d);
      CHECK(got[d][i].index == i);
    }
  }
  auto st = rx.stats();
  CHECK(st.total().records == 15000);
  CHECK(st.total().bytes == 15000 * sizeof(step));
  CHECK(st.total().unknown_ids == 0);
}

TEST_CASE("a consumer coroutine keeps state across taps and sees the end of its stream") {
  devtap::cpu_client cpus(1);
  double sum = -1;
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<double>([&](devtap::inbox<double> in) -> devtap::consumer<double> {
    double s = 0;
    while (auto v = co_await in.next()) s += *v;
    sum = s;  // written only after the stream ended
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 1; i <= 100; ++i) ctx.tap(point, double(i));
  });
  rx.flush();
  CHECK(sum == -1);
  rx.close();
  CHECK(sum == 5050);
}

TEST_CASE("plain callables, with and without the device") {
  devtap::cpu_client cpus(2);
  std::atomic<int> plain{0}, with_device{0};
  devtap::receiver rx({.devices = all(cpus)});
  auto a = rx.attach<int>([&](const int& v) { plain += v; });
  auto b = rx.attach<int>([&](const int& v, const devtap::device& d) { with_device += v * (d.id() + 1); });
  for (auto* dev : cpus.cpu_devices())
    dev->run([&](devtap::cpu_context& ctx) {
      ctx.tap(a, 1);
      ctx.tap(b, 10);
    });
  rx.close();
  CHECK(plain == 2);
  CHECK(with_device == 10 + 20);
}

TEST_CASE("a shared consumer is one instance fed by every device, never concurrently") {
  devtap::cpu_client cpus(4);
  std::atomic<int> instances{0}, inside{0}, overlaps{0};
  long total = 0;
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>(
      [&](devtap::inbox<int> in) -> devtap::consumer<int> {
        ++instances;
        long s = 0;
        while (auto v = co_await in.next()) {
          if (inside.fetch_add(1) != 0) ++overlaps;
          s += *v;
          inside.fetch_sub(1);
        }
        total = s;
      },
      devtap::shared);
  for (auto* dev : cpus.cpu_devices())
    dev->submit([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 10000; ++i) ctx.tap(point, 1);
    });
  rx.close();
  CHECK(instances == 1);
  CHECK(overlaps == 0);
  CHECK(total == 40000);
}

TEST_CASE("a coroutine may take its inbox by reference: the reference stays valid while it runs") {
  // The factory's argument was a temporary: a frame that kept `inbox&&` or `const inbox&` read it
  // after it was gone (ASan: stack-use-after-scope).
  devtap::cpu_client cpus(2);
  std::vector<int> by_rvalue, by_const;
  std::mutex mutex;
  devtap::receiver rx({.devices = all(cpus)});
  const auto rvalue = rx.attach<int>([&](devtap::inbox<int>&& in) -> devtap::consumer<int> {
    while (auto v = co_await in.next()) {
      std::lock_guard lock(mutex);
      by_rvalue.push_back(*v);
    }
  });
  const auto constant = rx.attach<int>(
      [&](const devtap::inbox<int>& in) -> devtap::consumer<int> {
        devtap::inbox<int> mine = in;
        while (auto v = co_await mine.next()) by_const.push_back(*v);
      },
      devtap::shared);
  for (auto* dev : cpus.cpu_devices())
    dev->submit([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 5; ++i) ctx.tap(rvalue, i), ctx.tap(constant, i);
    });
  rx.close();
  std::ranges::sort(by_rvalue);
  std::ranges::sort(by_const);
  CHECK(by_rvalue == std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4});
  CHECK(by_const == by_rvalue);
}

namespace {
devtap::consumer<int> tagged(devtap::inbox<int> in, std::string tag, std::vector<std::string>* out, std::mutex* mutex) {
  while (co_await in.next()) {
    std::lock_guard lock(*mutex);
    out->push_back(tag + "/" + std::string(in.device().name()));
  }
}
}  // namespace

TEST_CASE("a factory may ask its inbox for its device before any value; a shared one is told why it cannot") {
  // The device was set only with the first value: the factory dereferenced null.
  devtap::cpu_client cpus(2);
  std::vector<std::string> got;
  std::mutex mutex;
  devtap::receiver rx({.devices = all(cpus)});
  const auto point = rx.attach<int>(
      [&](devtap::inbox<int> in) { return tagged(in, std::string(in.device().name()), &got, &mutex); });
  CHECK_THROWS_WITH(rx.attach<int>([&](devtap::inbox<int> in) { return tagged(in, std::string(in.device().name()), &got, &mutex); },
                                   devtap::shared),
                    "devtap: inbox::device() of a shared consumer before its first value: it reads every device's stream");
  CHECK_THROWS_WITH(rx.attach<int>([&](devtap::inbox<int> in) {
    (void)in.info();
    return tagged(in, "", &got, &mutex);
  }, devtap::shared),
                    "devtap: inbox::info() of a shared consumer before its first value: it reads every device's stream");
  for (auto* dev : cpus.cpu_devices()) dev->submit([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
  rx.close();
  std::ranges::sort(got);
  CHECK(got == std::vector<std::string>{"cpu:0/cpu:0", "cpu:1/cpu:1"});
}

namespace {
struct flagged {
  int x;
  bool b;
};
struct flagged_raw {  // flagged's layout, with a byte where its bool is
  int x;
  unsigned char b;
};
}  // namespace

TEST_CASE("a bool neither 0 nor 1 is a type mismatch for every kind of consumer, merged coroutines included") {
  // A merged coroutine took it (its check looked at the size only), and the record was counted as
  // a consumer error: not logged, not reported by close().
  for (const bool coroutine : {true, false})
    for (const bool merged : {true, false}) {
      CAPTURE(coroutine, merged);
      const auto log = capture_errors();
      devtap::cpu_client cpus(1);
      std::vector<int> got;
      devtap::receiver rx({.devices = all(cpus), .timestamps = true});
      const auto fn = [&](devtap::inbox<flagged> in) -> devtap::consumer<flagged> {
        while (auto v = co_await in.next()) got.push_back(v->x);
      };
      const auto callable = [&](const flagged& v) { got.push_back(v.x); };
      const devtap::tap_point<flagged> p = coroutine ? (merged ? rx.attach<flagged>(fn, devtap::merged) : rx.attach<flagged>(fn))
                                                     : (merged ? rx.attach<flagged>(callable, devtap::merged)
                                                               : rx.attach<flagged>(callable));
      const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
      out.tap(p, flagged{1, true});
      out.tap(devtap::tap_point<flagged_raw>{p.id, p.fingerprint, p.receiver}, flagged_raw{2, 7});
      out.tap(p, flagged{3, false});
      CHECK_THROWS_WITH(rx.close(), Catch::Matchers::Contains("1 record(s) that do not match the consumer's type skipped"));
      devtap::set_log_sink({});
      const auto st = rx.stats().total();
      CHECK(got == std::vector<int>{1, 3});
      CHECK(st.type_mismatches == 1);
      CHECK(st.consumer_errors == 0);
      std::lock_guard lock(log->mutex);
      CHECK(log->lines.size() == 1);
    }
}

TEST_CASE("other host threads tap through rx.outfeed(dev)") {
  devtap::cpu_client cpus(1);
  std::vector<int> got;
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>([&](const int& v) { got.push_back(v); });
  auto out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::thread t([&] {
    for (int i = 0; i < 1000; ++i) out.tap(point, i);
  });
  t.join();
  rx.flush();
  REQUIRE(got.size() == 1000);
  CHECK(std::is_sorted(got.begin(), got.end()));
  rx.close();
}

TEST_CASE("back-pressure: fast producers and a slow consumer lose nothing in a tiny ring") {
  devtap::cpu_client cpus(2);
  std::vector<std::uint64_t> count(2, 0), next(2, 0), out_of_order(2, 0);  // one slot per device thread
  // close() waits for all 40000 taps to pass the tiny rings: up to 7.5 s of the default 10 s under
  // TSan on 2 loaded cores.
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2 * 512, .close_timeout = 120s, .name = "slow"});
  auto point = rx.attach<std::uint64_t>([&](const std::uint64_t& v, const devtap::device& d) {
    const auto i = static_cast<std::size_t>(d.id());
    out_of_order[i] += v != next[i];
    next[i] = v + 1;
    ++count[i];
    if (v % 64 == 0) std::this_thread::sleep_for(100us);  // much slower than the producers
  });
  for (auto* dev : cpus.cpu_devices())
    dev->submit([&](devtap::cpu_context& ctx) {
      for (std::uint64_t i = 0; i < 20000; ++i) ctx.tap(point, i);
    });
  rx.close();
  CHECK(out_of_order == std::vector<std::uint64_t>{0, 0});
  CHECK(count[0] == 20000);
  CHECK(count[1] == 20000);
  CHECK(rx.stats().total().dropped_records == 0);
}

TEST_CASE("drop policy never waits and counts what it dropped") {
  devtap::cpu_client cpus(1);
  std::atomic<std::uint64_t> got{0};
  std::latch release_consumer(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .overflow = devtap::overflow_policy::drop});
  auto point = rx.attach<std::uint64_t>([&](const std::uint64_t&) {
    release_consumer.wait();  // holds the ring full
    ++got;
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (std::uint64_t i = 0; i < 1000; ++i) ctx.tap(point, i);
  });
  release_consumer.count_down();
  rx.close();
  auto st = rx.stats().total();
  CHECK(st.dropped_records > 0);
  CHECK(st.dropped_records + got == 1000);
  CHECK(st.dropped_bytes == st.dropped_records * devtap::detail::record_bytes(sizeof(std::uint64_t)));
}

TEST_CASE("error policy throws at the tap when the ring is full") {
  devtap::cpu_client cpus(1);
  std::latch release_consumer(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .overflow = devtap::overflow_policy::error});
  auto point = rx.attach<std::uint64_t>([&](const std::uint64_t&) { release_consumer.wait(); });
  auto work = [&](devtap::cpu_context& ctx) {
    for (std::uint64_t i = 0; i < 1000; ++i) ctx.tap(point, i);
  };
  CHECK_THROWS_WITH(cpus.cpu_devices()[0]->run(work),
                    Catch::Equals("devtap: the ring of device 'cpu:0' is full (512 bytes; overflow_policy::error)"));
  release_consumer.count_down();
  CHECK_THROWS_WITH(rx.close(), Catch::Equals("devtap: receiver 'receiver': 1 consumer failure(s):\n  [cpu:0] (device): "
                                              "taps on the device found its ring full (overflow_policy::error)"));
  CHECK(rx.stats().total().dropped_records == 1);  // the record that found the ring full
}

TEST_CASE("error policy: a record above half the ring may find no room in a nearly empty ring, and the error says why") {
  devtap::cpu_client cpus(1);
  std::latch release_consumer(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .overflow = devtap::overflow_policy::error});
  using half = std::array<char, 2048 - 24>;  // one record of 2 KiB: the tail is then half way round
  using big = std::array<char, 3000>;
  auto first = rx.attach<half>([](const half&) {});
  auto blocker = rx.attach<int>([&](const int&) { release_consumer.wait(); });
  auto second = rx.attach<big>([](const big&) {});
  auto out = rx.outfeed(*cpus.cpu_devices()[0]);
  out.tap(first, half{});
  rx.flush();
  out.tap(blocker, 1);  // 32 bytes in use, held (its consumer waits): 3 KiB fits only at the ring's
                        // start, behind padding to its end, which the held reader cannot pass
  CHECK_THROWS_WITH(out.tap(second, big{}),
                    Catch::Equals("devtap: the ring of device 'cpu:0' is full (4 KiB; overflow_policy::error) for a "
                                  "record of 3000 bytes, above half the ring: it needs room in one piece, which depends "
                                  "on where the ring's end falls; give each device at least twice the largest record"));
  release_consumer.count_down();
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);  // (the refused record is reported, as any under error)
  // The too-large advice under drop and error names a ring twice the record: one of just its size
  // could refuse it as above.
  devtap::receiver small({.devices = all(cpus), .budget_bytes = 1024, .overflow = devtap::overflow_policy::drop});
  using too_big = std::array<char, 1024 - 24 + 1>;
  auto point = small.attach<too_big>([](const too_big&) {});
  CHECK_THROWS_WITH(small.outfeed(*cpus.cpu_devices()[0]).tap(point, too_big{}),
                    Catch::Contains("a ring of 4 KiB holds it: give receiver_options::budget_bytes 4 KiB per device"));
  small.close();
}

TEST_CASE("error policy: a full ring is reported by close() even when nobody looked at the work's future") {
  devtap::cpu_client cpus(1);
  std::latch release_consumer(1);
  std::atomic<int> got{0};
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .overflow = devtap::overflow_policy::error});
  auto point = rx.attach<std::uint64_t>([&](const std::uint64_t&) {
    release_consumer.wait();
    ++got;
  });
  (void)cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {  // the README's pattern: future discarded
    for (std::uint64_t i = 0; i < 1000; ++i) ctx.tap(point, i);
  });
  // The ring is full once a tap found it so (the record is counted as dropped); a fixed sleep was not
  // always long enough for the device thread on a loaded machine.
  devtap_test::eventually([&] { return rx.stats().total().dropped_records > 0; }, 10s);
  release_consumer.count_down();
  try {
    rx.close();
    FAIL("close() should report the full ring");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(e.failures()[0].device == "cpu:0");
    CHECK_THAT(e.what(), Catch::Equals("devtap: receiver 'receiver': 1 consumer failure(s):\n  [cpu:0] (device): taps on "
                                       "the device found its ring full (overflow_policy::error)"));
  }
  auto st = rx.stats().total();
  CHECK(st.records + st.dropped_records == static_cast<std::uint64_t>(got) + 1);
  CHECK(st.dropped_records == 1);
}

TEST_CASE("what producers that cannot throw leave in the sticky word is reported by close(), in full") {
  // A CUDA kernel sets these bits; written here as it would, on a cpu device's ring.
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024, .name = "sticky"});
  const devtap::detail::ring_view ring = rx.outfeed(*cpus.cpu_devices()[0]).ring();
  namespace d = devtap::detail;
  d::set_sticky<d::host_atomics>(ring, d::sticky_record_too_large, 5000);
  d::set_sticky<d::host_atomics>(ring, d::sticky_ring_full, 0);
  d::set_sticky<d::host_atomics>(ring, d::sticky_stale_point, 0);
  CHECK_THROWS_WITH(rx.close(),
                    Catch::Equals("devtap: receiver 'sticky': 1 consumer failure(s):\n  [cpu:0] (device): a tap on the "
                                  "device refused a record of 5000 bytes: larger than the device accepts (1000 bytes); "
                                  "raise receiver_options::budget_bytes; taps on the device found its ring full "
                                  "(overflow_policy::error); taps through a tap_point of another receiver, or of none, "
                                  "were dropped (counted in dropped_records)"));
}

TEST_CASE("an outfeed that host threads may not use (a CUDA device's) refuses host taps") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>([](const int&) {});
  const devtap::outfeed real = rx.outfeed(*cpus.cpu_devices()[0]);
  const devtap::outfeed kernels_only(real.ring(), real.policy(), "cuda:0", false, real.receiver_id());
  CHECK_THROWS_AS(kernels_only.tap(point, 1), devtap::outfeed_error);
  CHECK_THROWS_WITH(kernels_only.tap(point, 1),
                    Catch::Equals("devtap: device 'cuda:0' takes taps from its own kernels only (pass this outfeed to a "
                                  "kernel)"));
  rx.close();
  CHECK(rx.stats().total().records == 0);
}

TEST_CASE("drop policy: taps after close() keep throwing, also once aborted claims filled the ring") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .overflow = devtap::overflow_policy::drop});
  auto point = rx.attach<std::uint64_t>([](const std::uint64_t&) {});
  auto out = rx.outfeed(*cpus.cpu_devices()[0]);
  rx.close();
  int thrown = 0;
  for (std::uint64_t i = 0; i < 1000; ++i) {
    try {
      out.tap(point, i);
    } catch (const devtap::outfeed_error&) {
      ++thrown;
    }
  }
  CHECK(thrown == 1000);
  CHECK(rx.stats().total().dropped_records == 0);
}

TEST_CASE("close_timeout = milliseconds::max() waits as long as it takes instead of timing out at once") {
  devtap::cpu_client cpus(1);
  std::atomic<int> got{0};
  devtap::receiver rx({.devices = all(cpus), .close_timeout = std::chrono::milliseconds::max()});
  auto point = rx.attach<int>([&](const int&) {
    std::this_thread::sleep_for(1ms);
    ++got;
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 20; ++i) ctx.tap(point, i);
  });
  CHECK_NOTHROW(rx.flush());
  CHECK_NOTHROW(rx.close());
  CHECK(got == 20);
}

TEST_CASE("a record larger than the device's share is refused before anything is written") {
  devtap::cpu_client cpus(1);
  int got = 0;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024});
  using too_big = std::array<char, 1024 - 24 + 1>;  // one byte more than the 1 KiB ring holds
  auto point = rx.attach<too_big>([&](const too_big&) { ++got; });
  auto small = rx.attach<int>([&](const int&) { ++got; });
  auto out = rx.outfeed(*cpus.cpu_devices()[0]);
  CHECK_THROWS_AS(out.tap(point, too_big{}), devtap::outfeed_error);
  CHECK_THROWS_WITH(out.tap(point, too_big{}),
                    Catch::Equals("devtap: a record of 1001 bytes is larger than device 'cpu:0' accepts (1000 bytes in a "
                                  "ring of 1 KiB); a ring of 2 KiB holds it: give receiver_options::budget_bytes 2 KiB per "
                                  "device, or tap smaller pieces"));
  out.tap(small, 1);
  rx.close();
  CHECK(got == 1);
  // With timestamps, both sizes leave the stamp out: the refused value is larger than the limit named.
  devtap::receiver stamped({.devices = all(cpus), .budget_bytes = 1024, .timestamps = true});
  using too_big_stamped = std::array<char, 1024 - 24 - 16 + 1>;
  auto big = stamped.attach<too_big_stamped>([](const too_big_stamped&) {});
  CHECK_THROWS_WITH(stamped.outfeed(*cpus.cpu_devices()[0]).tap(big, too_big_stamped{}),
                    Catch::Equals("devtap: a record of 985 bytes is larger than device 'cpu:0' accepts (984 bytes in a "
                                  "ring of 1 KiB, beside its 16-byte timestamp); a ring of 2 KiB holds it: give "
                                  "receiver_options::budget_bytes 2 KiB per device, or tap smaller pieces"));
  stamped.close();
}

TEST_CASE("taps without a receiver, or after close, throw and write nothing") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  devtap::tap_point<int> nowhere{1, devtap::type_fingerprint_v<int>};
  const std::string no_receiver = "devtap: tap on device 'cpu:0' with no receiver attached (create a devtap::receiver "
                                  "for it first); nothing was written";
  CHECK_THROWS_WITH(dev->run([&](devtap::cpu_context& ctx) { ctx.tap(nowhere, 1); }), Catch::Equals(no_receiver));
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>([](const int&) {});
  auto out = rx.outfeed(*dev);
  rx.close();
  CHECK_THROWS_WITH(dev->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); }), Catch::Equals(no_receiver));
  CHECK_THROWS_WITH(out.tap(point, 1),
                    Catch::Equals("devtap: tap on device 'cpu:0' after its receiver closed (the record was not written)"));
}

TEST_CASE("every consumer exception is kept and thrown by close() as tap_error; draining goes on") {
  devtap::cpu_client cpus(2);
  std::atomic<int> healthy{0};
  devtap::receiver rx({.devices = all(cpus), .name = "errs"});
  auto bad = rx.attach<int>(
      [&](devtap::inbox<int> in) -> devtap::consumer<int> {
        while (auto v = co_await in.next())
          if (*v == 3) throw std::runtime_error("coroutine says 3");
      },
      "bad-coroutine");
  auto worse = rx.attach<int>([](const int&) { throw std::logic_error("callable always fails"); }, "bad-callable");
  auto good = rx.attach<int>([&](const int&) { ++healthy; });
  for (auto* dev : cpus.cpu_devices())
    dev->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 10; ++i) {
        ctx.tap(bad, i);
        ctx.tap(worse, i);
        ctx.tap(good, i);
      }
    });
  try {
    rx.close();
    FAIL("close() should throw");
  } catch (const devtap::tap_error& e) {
    CHECK(e.failures().size() == 2 + 2 * 10);  // the coroutine once per device; the callable on every record
    CHECK_THAT(e.what(), Catch::Contains("[cpu:0] bad-coroutine: coroutine says 3"));
    CHECK_THAT(e.what(), Catch::Contains("[cpu:1] bad-callable: callable always fails"));
  }
  CHECK(healthy == 20);
  auto st = rx.stats().total();
  CHECK(st.consumer_errors == 2 * (10 - 3) + 2 * 10);  // the coroutine's failing record and every later one; each callable throw
}

TEST_CASE("a callable that throws keeps receiving; every exception is kept up to a cap, the rest counted") {
  devtap::cpu_client cpus(1);
  std::vector<int> seen;
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::receiver rx({.devices = all(cpus), .name = "flaky"});
  auto point = rx.attach<int>(
      [&](const int& v) {
        seen.push_back(v);
        if (v % 2 == 1) throw std::runtime_error("odd " + std::to_string(v));
      },
      "odd-hater");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 40; ++i) ctx.tap(point, i);
  });
  try {
    rx.close();
    FAIL("close() should throw");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 16 + 1);
    CHECK(e.failures()[0].message == "odd 1");
    CHECK(e.failures()[15].message == "odd 31");
    CHECK(e.failures()[16].message == "4 more exception(s), not kept (20 in all)");
    CHECK(e.failures()[16].consumer == "odd-hater");
  }
  devtap::set_log_sink({});
  CHECK(seen.size() == 40);  // every record reached it, also after it threw
  CHECK(rx.stats().total().consumer_errors == 20);
  CHECK(rx.stats().total().records == 20);
}

TEST_CASE("unknown ids and type mismatches are counted and skipped") {
  devtap::cpu_client cpus(1);
  std::vector<std::string> logs;
  devtap::set_log_sink([&](devtap::log_level level, std::string_view m) {
    if (level == devtap::log_level::error) logs.emplace_back(m);
  });
  int got = 0;
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>([&](const int&) { ++got; });
  auto out = rx.outfeed(*cpus.cpu_devices()[0]);
  for (int i = 0; i < 3; ++i) {
    out.tap(devtap::tap_point<int>{99, point.fingerprint, point.receiver}, 1);  // nobody attached 99
    out.tap(devtap::tap_point<float>{point.id, devtap::type_fingerprint_v<float>, point.receiver}, 1.0f);  // wrong type
    out.tap(point, 1);
  }
  try {  // reported at the end, as the reference runtime raises at the end
    rx.close();
    FAIL("close() should report them");
  } catch (const devtap::tap_error& e) {
    CHECK(std::string(e.what()) ==
          "devtap: receiver 'receiver': 2 consumer failure(s):\n"
          "  [cpu:0] #99: 3 record(s) for unknown consumer id 99 skipped\n"
          "  [cpu:0] consumer#1: 3 record(s) that do not match the consumer's type skipped");
  }
  devtap::set_log_sink({});
  auto st = rx.stats().total();
  CHECK(got == 3);
  CHECK(st.unknown_ids == 3);
  CHECK(st.type_mismatches == 3);
  // Each logged once, in tap order (one reader thread).
  CHECK(logs == std::vector<std::string>{
                    "receiver 'receiver': record for unknown consumer id 99 on cpu:0 (skipped; logged once)",
                    "receiver 'receiver': record for consumer 'consumer#1' on cpu:0 does not match its type (fingerprint " +
                        std::to_string(devtap::type_fingerprint_v<float>) + " expected " +
                        std::to_string(devtap::type_fingerprint_v<int>) + ", 4 payload bytes; skipped; logged once)"});
}

TEST_CASE("a record with the consumer's fingerprint but the wrong size is a mismatch, for every kind of consumer") {
  devtap::cpu_client cpus(1);
  std::vector<std::string> logs;
  devtap::set_log_sink([&](devtap::log_level, std::string_view line) { logs.emplace_back(line); });
  std::vector<int> by_callable, by_coroutine;
  devtap::receiver rx({.devices = all(cpus)});
  auto callable = rx.attach<int>([&](const int& v) { by_callable.push_back(v); });
  auto coroutine = rx.attach<int>([&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (auto v = co_await in.next()) by_coroutine.push_back(*v);
  });
  auto out = rx.outfeed(*cpus.cpu_devices()[0]);
  for (auto point : {callable, coroutine}) {
    out.tap(point, 1);
    out.tap(devtap::tap_point<std::int64_t>{point.id, point.fingerprint, point.receiver}, std::int64_t{2});  // 8 bytes, not 4
    out.tap(point, 3);
  }
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
  devtap::set_log_sink({});
  CHECK(by_callable == std::vector<int>{1, 3});
  CHECK(by_coroutine == std::vector<int>{1, 3});
  CHECK(rx.stats().total().type_mismatches == 2);
  CHECK(rx.stats().total().records == 4);
  // The log says why a record with the right fingerprint was refused (it printed two equal
  // fingerprints as a mismatch before).
  REQUIRE(logs.size() >= 1);
  CHECK(logs[0] == "receiver 'receiver': record for consumer 'consumer#1' on cpu:0 has its type's fingerprint (" +
                       std::to_string(devtap::type_fingerprint_v<int>) +
                       ") but does not decode as one (a size or span count that does not fit, a bool neither 0 nor 1; "
                       "skipped; logged once)");
}

TEST_CASE("a malformed record stops that device's stream only, reported with device and offset") {
  devtap::cpu_client cpus(2);
  auto logs = capture_errors();
  std::atomic<int> got{0};
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2 * 4096});
  auto point = rx.attach<int>([&](const int&) { ++got; });
  auto broken = rx.outfeed(*cpus.cpu_devices()[1]).ring();
  REQUIRE(devtap_test::write_malformed_record(broken));
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 100; ++i) ctx.tap(point, i);
  });
  // The stop first, then close(): otherwise close()'s end marker may already be behind the bad
  // record, and the bytes left over count it too.
  devtap_test::eventually([&] { return rx.stats().devices[1].stream_failed; }, 10s);
  REQUIRE(rx.stats().devices[1].stream_failed);
  const std::string failure =
      "malformed record on device 'cpu:1' at ring offset 0 (record of length 8): its stream was stopped; "
      "64 bytes from it on were not delivered";
  CHECK_THROWS_WITH(rx.close(),
                    Catch::Equals("devtap: receiver 'receiver': 1 consumer failure(s):\n  [cpu:1] (stream): " + failure));
  {
    std::lock_guard lock(logs->mutex);
    CHECK(logs->lines == std::vector<std::string>{"receiver 'receiver': " + failure});
  }
  devtap::set_log_sink({});
  CHECK(got == 100);
  auto st = rx.stats();
  CHECK_FALSE(st.devices[0].stream_failed);
  CHECK(st.devices[1].stream_failed);
}

TEST_CASE("close() with a device whose work never finishes returns within the timeout") {
  std::atomic<bool> release{false};  // (before the client: the stuck work reads it until the client is gone)
  devtap::cpu_client cpus(2);
  auto* stuck = cpus.cpu_devices()[1];
  stuck->submit([&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  {
    devtap::receiver rx({.devices = all(cpus), .close_timeout = 300ms, .name = "stuck"});
    const auto start = std::chrono::steady_clock::now();
    try {
      rx.close();
      FAIL("close() should time out");
    } catch (const devtap::timeout_error& e) {
      CHECK(e.devices() == std::vector<std::string>{"cpu:1"});
      // Its ring is empty: 0 records, once its idle reader has exited (close() waits 100 ms for that;
      // a reader that slow under load is described as still running).
      const std::string head = "devtap: receiver 'stuck': close() timed out after 300 ms; devices that did not finish: cpu:1 ";
      CHECK_THAT(e.what(), Catch::Equals(head + "(0 records not delivered)") ||
                               Catch::Equals(head + "(its reader has not stopped yet: a consumer call, or a write to "
                                                    "the trace or record file, may still be running; what its ring holds "
                                                    "is counted in stats().lost_at_close)"));
    }
    CHECK(std::chrono::steady_clock::now() - start < 5s);  // bounded, not hung: the device never finishes
  }
  release = true;  // the end marker queued behind it now runs harmlessly
}

TEST_CASE("after a close() timeout with a full ring, the cpu device runs later work") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  // Owned by the consumer: the abandoned reader still calls it after this test's scope (issue 11).
  auto release_consumer = std::make_shared<std::latch>(1);
  auto entered = std::make_shared<std::atomic<bool>>(false);
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512, .close_timeout = 100ms});
    auto point = rx.attach<std::uint64_t>([release_consumer, entered](const std::uint64_t&) {
      *entered = true;
      release_consumer->wait();
    });
    auto work = dev->submit([&](devtap::cpu_context& ctx) {
      for (std::uint64_t i = 0; i < 1000; ++i) ctx.tap(point, i);  // blocks once the ring is full
    });
    // The reader is inside the consumer before close() starts (else, late on a loaded machine, it
    // could stop idle and close() would say "0 records not delivered").
    REQUIRE(devtap_test::eventually([&] { return entered->load(); }));
    // The consumer is blocked on the latch: its reader cannot have exited.
    CHECK_THROWS_WITH(rx.close(), Catch::Equals("devtap: receiver 'receiver': close() timed out after 100 ms; devices that "
                                                "did not finish: cpu:0 (its reader has not stopped yet: a consumer call, or a "
                                                "write to the trace or record file, may still be running; what its ring "
                                                "holds is counted in stats().lost_at_close)"));
    CHECK_THROWS_WITH(work.get(),
                      Catch::Equals("devtap: tap on device 'cpu:0' after its receiver closed (the record was not written)"));
  }
  // The end-marker job queued by close() must not wait for space that the stuck reader never frees.
  auto later = dev->submit([] { return 7; });
  REQUIRE(later.wait_for(5s) == std::future_status::ready);
  CHECK(later.get() == 7);
  release_consumer->count_down();
  std::this_thread::sleep_for(100ms);  // the abandoned reader drains what is left before `cpus` goes
}

TEST_CASE("at most one receiver per device; devices and backends together are refused") {
  devtap::cpu_client cpus(2);
  devtap::receiver first({.devices = {cpus.local_devices()[0]}});
  CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus)}), devtap::outfeed_error);
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus)}),
                    Catch::Equals("devtap: device 'cpu:0' already has a receiver attached (at most one receiver per "
                                  "device at once)"));
  devtap::receiver second({.devices = {cpus.local_devices()[1]}});  // the failed one released cpu:1
  CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .backends = {"cpu"}}), std::invalid_argument);
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .backends = {"cpu"}}),
                    Catch::Equals("devtap: receiver_options: give `devices` or `backends`, not both"));
  CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .budget_bytes = 100}), std::invalid_argument);
}

TEST_CASE("of two receivers opened at once on the same devices, listed in opposite orders, one always opens") {
  // Each attached its devices in its own list's order: each could take some, find the next taken
  // by the other, and give up; both failed (1 round in 300 under ASan, 7 under TSan).
  devtap::cpu_client cpus(64);
  std::vector<devtap::device*> forward = all(cpus), backward(forward.rbegin(), forward.rend());
  for (int round = 0; round < 200; ++round) {
    std::latch start(2);
    std::atomic<int> opened{0};
    auto open = [&](const std::vector<devtap::device*>& devices) {
      start.arrive_and_wait();
      try {
        devtap::receiver rx({.devices = devices, .budget_bytes = 64 * 4096});
        ++opened;
        rx.close();
      } catch (const devtap::outfeed_error&) {
      }
    };
    std::thread other(open, backward);
    open(forward);
    other.join();
    INFO("round " << round);
    REQUIRE(opened >= 1);
  }
}

TEST_CASE("bad receiver options are refused with messages that name the receiver and the device") {
  devtap::cpu_client cpus(2);
  auto* d0 = cpus.local_devices()[0];
  auto* d1 = cpus.local_devices()[1];
  // Checked before any device is attached: the same devices take a receiver afterwards.
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .budget_bytes = 100, .name = "tiny"}),
                    Catch::Equals("devtap: receiver 'tiny': budget_bytes 100 leaves less than 256 bytes per device"));
  CHECK_THROWS_WITH(devtap::receiver({.devices = {d0}, .budget_bytes = 255}),
                    Catch::Equals("devtap: receiver 'receiver': budget_bytes 255 leaves less than 256 bytes per device"));
  CHECK_THROWS_AS(devtap::receiver({.devices = {d0, nullptr}}), std::invalid_argument);
  CHECK_THROWS_WITH(devtap::receiver({.devices = {d0, nullptr}}),
                    Catch::Equals("devtap: receiver_options.devices holds a null device"));
  CHECK_THROWS_AS(devtap::receiver({.devices = {d0, d1, d0}}), std::invalid_argument);
  CHECK_THROWS_WITH(devtap::receiver({.devices = {d0, d1, d0}}),
                    Catch::Equals("devtap: device 'cpu:0' is listed twice"));
  devtap::receiver rx({.devices = {d0}, .budget_bytes = 256, .name = "one"});
  CHECK_THROWS_AS(rx.outfeed(*d1), std::invalid_argument);
  CHECK_THROWS_WITH(rx.outfeed(*d1), Catch::Equals("devtap: device 'cpu:1' is not drained by receiver 'one'"));
  rx.close();
}

TEST_CASE("attach() after close() is a logic error naming the receiver") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .name = "done"});
  rx.close();
  CHECK_THROWS_AS(rx.attach<int>([](const int&) {}), std::logic_error);
  CHECK_THROWS_WITH(rx.attach<int>([](const int&) {}),
                    Catch::Equals("devtap: attach() on receiver 'done' after close()"));
}

TEST_CASE("flush() and barrier() time out naming the devices whose consumers are behind") {
  devtap::cpu_client cpus(2);
  std::latch release_consumer(1);
  devtap::receiver rx({.devices = all(cpus), .close_timeout = 100ms, .name = "behind"});
  auto point = rx.attach<int>([&](const int&) { release_consumer.wait(); });
  rx.outfeed(*cpus.cpu_devices()[1]).tap(point, 1);  // cpu:1's consumer blocks; cpu:0 has nothing to do
  try {
    rx.flush();
    FAIL("flush() should time out");
  } catch (const devtap::timeout_error& e) {
    CHECK(e.devices() == std::vector<std::string>{"cpu:1"});
    CHECK(std::string(e.what()) == "devtap: receiver 'behind': flush() timed out; devices behind: cpu:1");
  }
  // The devices' work is done at once; what is behind is the consumer.
  CHECK_THROWS_WITH(rx.barrier(), Catch::Equals("devtap: receiver 'behind': barrier() timed out; devices behind: cpu:1"));
  release_consumer.count_down();
  rx.close();
}

TEST_CASE("flush returns once what was committed before it is consumed, with no device work") {
  devtap::cpu_client cpus(1);
  std::atomic<int> got{0};
  std::atomic<bool> busy{true};
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>([&](const int&) {
    std::this_thread::sleep_for(50us);
    ++got;
  });
  std::atomic<bool> tapped{false};
  cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 200; ++i) ctx.tap(point, i);
    tapped = true;
    while (busy) std::this_thread::sleep_for(1ms);  // the device stays busy: flush must not wait for it
  });
  // Waited for, not slept for: on a loaded machine the device thread may not have tapped all 200 in
  // any fixed time, and flush() covers only what was committed before it.
  while (!tapped) std::this_thread::sleep_for(1ms);
  rx.flush();
  CHECK(got == 200);
  busy = false;
  rx.close();
}

TEST_CASE("the destructor closes and never throws") {
  devtap::cpu_client cpus(1);
  auto logs = capture_errors();
  {
    devtap::receiver rx({.devices = all(cpus), .name = "dtor"});
    auto point = rx.attach<int>([](const int&) { throw std::runtime_error("nope"); });
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
  }
  devtap::set_log_sink({});
  std::lock_guard lock(logs->mutex);
  CHECK(logs->lines == std::vector<std::string>{
                           "receiver 'dtor': consumer 'consumer#1' on cpu:0 threw: nope (postponed to close())",
                           "receiver 'dtor' destroyed without close(); close() would have thrown: devtap: receiver "
                           "'dtor': 1 consumer failure(s):\n  [cpu:0] consumer#1: nope"});
}

TEST_CASE("a receiver destroyed from its device's own work abandons its streams, and says so") {
  devtap::cpu_client cpus(1);
  auto logs = capture_errors();
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .name = "inside"});
  cpus.cpu_devices()[0]->run([&] { rx.reset(); });  // close() would wait for this very work: not drained
  std::this_thread::sleep_for(20ms);  // the abandoned reader exits (nothing in its ring: nothing logged)
  devtap::set_log_sink({});
  std::lock_guard lock(logs->mutex);
  CHECK(logs->lines == std::vector<std::string>{"receiver 'inside' destroyed from the work of one of its devices: its "
                                                "streams are abandoned, not drained"});
}

TEST_CASE("the receiver's debug lines: start, and each stream's end") {
  devtap::cpu_client cpus(2);
  auto lines = std::make_shared<captured_log>();
  devtap::set_log_sink([lines](devtap::log_level level, std::string_view m) {
    std::lock_guard lock(lines->mutex);
    if (level == devtap::log_level::debug) lines->lines.emplace_back(m);
  });
  const auto before = devtap::get_log_level();
  devtap::set_log_level(devtap::log_level::debug);
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2 * 4096, .overflow = devtap::overflow_policy::drop,
                         .name = "dbg"});
    rx.close();
  }
  devtap::set_log_level(before);
  devtap::set_log_sink({});
  std::lock_guard lock(lines->mutex);
  REQUIRE(lines->lines.size() == 3);
  CHECK(lines->lines[0] == "receiver 'dbg' started on 2 device(s), 4 KiB ring each, overflow policy drop");
  std::sort(lines->lines.begin() + 1, lines->lines.end());  // the two readers end in either order
  CHECK(lines->lines[1] == "receiver 'dbg': stream of cpu:0 ended");
  CHECK(lines->lines[2] == "receiver 'dbg': stream of cpu:1 ended");
}

namespace {
struct histogram {
  std::uint32_t block;
  std::span<const std::uint32_t> bins;
  double mean;
};
}  // namespace

TEST_CASE("spans, tuples and aggregates holding spans round-trip; spans view the ring until the next co_await") {
  devtap::cpu_client cpus(1);
  std::vector<float> floats;
  std::vector<std::uint32_t> bins_seen;
  std::vector<double> means;
  std::string text;
  devtap::receiver rx({.devices = all(cpus)});
  auto span_point = rx.attach<std::span<const float>>(
      [&](devtap::inbox<std::span<const float>> in) -> devtap::consumer<std::span<const float>> {
        while (auto s = co_await in.next()) floats.insert(floats.end(), s->begin(), s->end());
      });
  auto hist_point = rx.attach<histogram>([&](const histogram& h) {
    bins_seen.insert(bins_seen.end(), h.bins.begin(), h.bins.end());
    means.push_back(h.mean + h.block);
  });
  using tagged = std::tuple<int, std::span<const char>>;
  auto tuple_point = rx.attach<tagged>([&](const tagged& t) {
    text += std::to_string(std::get<0>(t)) + ":" + std::string(std::get<1>(t).begin(), std::get<1>(t).end()) + ";";
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    const std::vector<float> a{1.5f, 2.5f, 3.5f};
    ctx.tap(span_point, std::span<const float>(a));
    ctx.tap(span_point, std::span<const float>());  // empty spans are values too
    const std::uint32_t bins[4] = {4, 3, 2, 1};
    ctx.tap(hist_point, histogram{10, bins, 0.25});
    const char word[] = "tap";
    ctx.tap(tuple_point, tagged{7, std::span<const char>(word, 3)});
  });
  rx.close();
  CHECK(floats == std::vector<float>{1.5f, 2.5f, 3.5f});
  CHECK(bins_seen == std::vector<std::uint32_t>{4, 3, 2, 1});
  CHECK(means == std::vector<double>{10.25});
  CHECK(text == "7:tap;");
}

TEST_CASE("a tap_point of a closed or another receiver is refused at the tap, never delivered to a stranger") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  struct a_t { int v; };
  struct b_t { int v; };  // the same layout: the fingerprint cannot tell them apart
  devtap::tap_point<a_t> old_point;
  {
    devtap::receiver first({.devices = all(cpus), .name = "first"});
    old_point = first.attach<a_t>([](const a_t&) {});
    first.close();
  }
  int strangers = 0;
  devtap::receiver second({.devices = all(cpus), .name = "second"});
  auto b = second.attach<b_t>([&](const b_t&) { ++strangers; });
  REQUIRE(b.id == old_point.id);  // ids restart in every receiver
  const auto stale = devtap::tap_point<b_t>{old_point.id, old_point.fingerprint, old_point.receiver};
  CHECK_THROWS_WITH(dev->run([&](devtap::cpu_context& ctx) { ctx.tap(stale, b_t{1}); }),
                    Catch::Equals("devtap: tap on device 'cpu:0' through a tap_point of another receiver, or of a "
                                  "closed one (nothing was written)"));
  CHECK_THROWS_AS(second.outfeed(*dev).tap(stale, b_t{2}), devtap::outfeed_error);
  const devtap::tap_point<b_t> unattached{b.id, b.fingerprint};
  CHECK_THROWS_WITH(second.outfeed(*dev).tap(unattached, b_t{3}),
                    Catch::Equals("devtap: tap on device 'cpu:0' through a tap_point that no receiver attached "
                                  "(nothing was written)"));
  dev->run([&](devtap::cpu_context& ctx) { ctx.tap(b, b_t{4}); });
  second.close();
  CHECK(strangers == 1);
  CHECK(second.stats().total().unknown_ids == 0);
}

TEST_CASE("after a close() timeout no consumer is called again, and what the ring held is counted as lost") {
  auto calls = std::make_shared<std::atomic<int>>(0);  // owned by the consumer, which may outlive the test
  std::atomic<bool> stop_producing{false};
  std::atomic<bool> release_device{false};  // (before the client: the device's work reads it until the client is gone)
  devtap::cpu_client cpus(1);
  std::thread producer;
  auto logs = capture_errors();
  (void)cpus.cpu_devices()[0]->submit([&] {  // the end of the stream waits behind this: close() times out
    while (!release_device) std::this_thread::sleep_for(1ms);
  });
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .close_timeout = 100ms, .name = "busy"});
    auto point = rx.attach<std::uint64_t>([calls](const std::uint64_t&) {
      std::this_thread::sleep_for(200us);
      calls->fetch_add(1);
    });
    // A producer like a CUDA kernel's: it claims and commits directly and never looks at `closed`
    // unless it is blocked, so the ring stays non-empty.
    const devtap::detail::ring_view ring = rx.outfeed(*cpus.cpu_devices()[0]).ring();
    producer = std::thread([&stop_producing, ring, point] {
      namespace d = devtap::detail;
      const std::uint64_t bytes = d::record_bytes(sizeof(std::uint64_t));
      for (std::uint64_t i = 0; !stop_producing.load(); ++i) {
        std::uint64_t pos;
        if (!d::try_claim<d::host_atomics>(ring, bytes, pos)) {
          std::this_thread::yield();
          continue;
        }
        std::memcpy(ring.payload_at(pos), &i, sizeof i);
        d::commit<d::host_atomics>(ring, pos, point.id, point.fingerprint, sizeof i);
      }
    });
    std::this_thread::sleep_for(20ms);
    std::string message;
    try {
      rx.close();
      FAIL("close() should time out");
    } catch (const devtap::timeout_error& e) {
      message = e.what();
    }
    const int at_close = calls->load();
    std::this_thread::sleep_for(100ms);
    // A reader descheduled mid-call for longer than close() waits for it (100 ms, a loaded machine)
    // stops later: it counts what is left when it does. Either way nothing is delivered after close().
    const std::string prefix = "devtap: receiver 'busy': close() timed out after 100 ms; devices that did not finish: cpu:0 ";
    const bool reader_was_late =
        message == prefix + "(its reader has not stopped yet: a consumer call, or a write to the trace or record file, "
                            "may still be running; what its ring holds is counted in stats().lost_at_close)";
    if (reader_was_late) devtap_test::eventually([&] { return rx.stats().total().lost_at_close > 0; }, 10s);
    CHECK(calls->load() <= at_close + (reader_was_late ? 1 : 0));  // at most the call that was running
    const int after_close = calls->load();
    std::this_thread::sleep_for(50ms);
    CHECK(calls->load() == after_close);
    const auto st = rx.stats().total();
    CHECK(st.lost_at_close > 0);
    if (!reader_was_late) {
      // How many records were left depends on scheduling: the count is matched, then compared with the
      // stats (the reader stored it before close() read it).
      std::smatch m;
      const std::regex whole(
          R"(devtap: receiver 'busy': close\(\) timed out after 100 ms; devices that did not finish: cpu:0 \(([0-9]+) records not delivered\))");
      CHECK(std::regex_match(message, m, whole));
      CHECK(m[1].str() == std::to_string(st.lost_at_close));
    }
    devtap_test::eventually([&] {  // a late reader logs just after it counts
      std::lock_guard lock(logs->mutex);
      return !logs->lines.empty();
    }, 10s);
    {
      std::lock_guard lock(logs->mutex);
      CHECK(logs->lines == std::vector<std::string>{"receiver 'busy': " + std::to_string(st.lost_at_close) +
                                                    " record(s) left on cpu:0 after close() gave up on it were not delivered"});
    }
    stop_producing = true;
    producer.join();  // the ring lives as long as the receiver object
  }
  devtap::set_log_sink({});
  release_device = true;
}

TEST_CASE("close() and barrier() from a device's own work, and flush() from a consumer, fail at once") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  devtap::receiver rx({.devices = all(cpus), .close_timeout = 10s, .name = "self"});
  std::string from_consumer;
  auto point = rx.attach<int>([&](const int&) {
    try {
      rx.flush();
    } catch (const std::logic_error& e) {
      from_consumer = e.what();
    }
  });
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(dev->run([&] { rx.close(); }),
                    Catch::Equals("devtap: receiver 'self': close() called from the work of one of its devices, "
                                  "which it would wait for; call it from another thread"));
  CHECK_THROWS_WITH(dev->run([&] { rx.barrier(); }),
                    Catch::Equals("devtap: receiver 'self': barrier() called from the work of one of its devices, "
                                  "which it would wait for; call it from another thread"));
  dev->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
  rx.close();
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK(from_consumer == "devtap: receiver 'self': flush() called from a consumer of this receiver, which it would "
                         "wait for; call it from another thread");
}

TEST_CASE("barrier() waits for the work already submitted and for what it tapped; flush() does not") {
  devtap::cpu_client cpus(3);
  std::atomic<int> got{0};
  devtap::receiver rx({.devices = all(cpus)});
  auto point = rx.attach<int>([&](const int&) { ++got; });
  for (auto* dev : cpus.cpu_devices())
    (void)dev->submit([point](devtap::cpu_context& ctx) {
      std::this_thread::sleep_for(50ms);
      for (int i = 0; i < 101; ++i) ctx.tap(point, i);
    });
  rx.barrier();
  CHECK(got == 303);
  rx.close();
}

TEST_CASE("barrier() on a device whose work does not finish times out, naming it") {
  devtap::cpu_client cpus(2);
  std::atomic<bool> release{false};
  devtap::receiver rx({.devices = all(cpus), .close_timeout = 200ms, .name = "slow"});
  (void)cpus.cpu_devices()[1]->submit([&] {
    while (!release) std::this_thread::sleep_for(1ms);
  });
  try {
    rx.barrier();
    FAIL("barrier() should time out");
  } catch (const devtap::timeout_error& e) {
    CHECK(e.devices() == std::vector<std::string>{"cpu:1"});
    CHECK(std::string(e.what()) ==
          "devtap: receiver 'slow': barrier() timed out after 200 ms; devices whose work did not finish: cpu:1");
  }
  release = true;
  rx.close();
}

TEST_CASE("records above half the ring, up to the whole ring, are delivered under block") {
  devtap::cpu_client cpus(1);
  using big = std::array<std::uint8_t, 600>;      // more than half of the 1 KiB ring
  using whole = std::array<std::uint8_t, 1000>;   // exactly the ring (24-byte header + 1000)
  std::vector<int> got;
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024});
  auto big_point = rx.attach<big>([&](const big& b) { got.push_back(b[0]); });
  auto whole_point = rx.attach<whole>([&](const whole& w) { got.push_back(w[999]); });
  auto small_point = rx.attach<int>([&](const int& v) { got.push_back(v); });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 20; ++i) {  // every offset of the wrap: small records move the tail around
      ctx.tap(small_point, 1000 + i);
      big b{};
      b[0] = static_cast<std::uint8_t>(i);
      ctx.tap(big_point, b);
      whole w{};
      w[999] = static_cast<std::uint8_t>(100 + i);
      ctx.tap(whole_point, w);
    }
  });
  rx.close();
  REQUIRE(got.size() == 60);
  for (int i = 0; i < 20; ++i) {
    CHECK(got[3 * i] == 1000 + i);
    CHECK(got[3 * i + 1] == i);
    CHECK(got[3 * i + 2] == 100 + i);
  }
}

// A record above half the ring needs the ring (nearly) drained. While two threads flood it with
// small taps on one CPU, every one of the flood's claims used to win the race for the space the
// reader freed: the big tap waited as long as the flood went on. Now it goes first; and close()
// while it waits ends it with an error instead of leaving it (or the stream's end) stuck.
TEST_CASE("a tap above half the ring, under a flood of small taps on one CPU, is made while the flood goes on") {
  devtap_test::watchdog dog(60s);
  devtap_test::one_cpu pinned;
  using big = std::array<std::uint8_t, 3000>;  // of a 4 KiB ring
  for (const bool close_first : {false, true}) {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .close_timeout = 20s});
    std::atomic<std::uint64_t> small_records{0}, big_records{0};
    auto small_point = rx.attach<std::uint64_t>([&](const std::uint64_t&) { ++small_records; });
    auto big_point = rx.attach<big>([&](const big& b) { big_records += b[2999]; });
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
    std::atomic<bool> stop{false};
    std::vector<std::thread> flooders;
    for (int t = 0; t < 2; ++t)
      flooders.emplace_back([&] {
        try {
          while (!stop) out.tap(small_point, std::uint64_t{1});
        } catch (const devtap::outfeed_error&) {  // closed under it (the close_first round)
        }
      });
    std::this_thread::sleep_for(20ms);
    big b{};
    b[2999] = 1;
    auto tapped = std::async(std::launch::async, [&] {
      try {
        out.tap(big_point, b);
        return true;
      } catch (const devtap::outfeed_error&) {
        return false;
      }
    });
    if (!close_first) {
      CHECK(tapped.wait_for(10s) == std::future_status::ready);  // while the flood goes on
      stop = true;
      for (auto& t : flooders) t.join();
      CHECK(tapped.get());
      rx.close();
      CHECK(big_records == 1);
    } else {
      rx.close();  // whatever the big tap's state: made and delivered, or refused as closed
      stop = true;
      for (auto& t : flooders) t.join();
      REQUIRE(tapped.wait_for(10s) == std::future_status::ready);
      CHECK(big_records == (tapped.get() ? 1u : 0u));
    }
    CHECK(small_records > 0);
  }
}

// Under block on one CPU, a producer asleep for space lost every race to one that kept spinning: a
// device's work beside a host thread flooding the same ring did not finish in 20 s (found with the
// accounting test under taskset -c 0). A claim about to sleep now takes its turn (host_wait::takes_turn).
TEST_CASE("a device's work tapping beside a host thread that floods its ring, on one CPU, finishes") {
  devtap_test::watchdog dog(60s);
  devtap_test::one_cpu pinned;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2048});
  std::atomic<std::uint64_t> from_work{0};
  auto point = rx.attach<std::uint64_t>([&](const std::uint64_t& v) { from_work += v; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::atomic<bool> stop{false};
  std::thread flooder([&] {
    while (!stop) out.tap(point, std::uint64_t{0});
  });
  std::this_thread::sleep_for(10ms);
  auto work = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 2000; ++i) ctx.tap(point, std::uint64_t{1});
  });
  const bool finished = work.wait_for(20s) == std::future_status::ready;  // while the flood goes on
  stop = true;
  flooder.join();
  CHECK(finished);
  work.get();
  rx.close();
  CHECK(from_work == 2000);
}

TEST_CASE("host threads blocked in a tap when the receiver is destroyed leave with an error, touching live memory") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  for (int round = 0; round < 30; ++round) {
    std::atomic<int> finished{0};
    std::vector<std::thread> tappers;
    {
      devtap::receiver rx({.devices = all(cpus), .budget_bytes = 256, .close_timeout = 2s});
      auto point = rx.attach<std::uint64_t>([](const std::uint64_t&) { std::this_thread::sleep_for(50us); });
      const devtap::outfeed out = rx.outfeed(*dev);
      for (int t = 0; t < 8; ++t)  // more threads than cores: some wake late, after close() returned
        tappers.emplace_back([&finished, out, point] {
          try {
            for (std::uint64_t i = 0;; ++i) out.tap(point, i);  // blocks on the tiny ring, until closed
          } catch (const devtap::outfeed_error&) {
          }
          finished.fetch_add(1);
        });
      std::this_thread::sleep_for(2ms);
    }  // destroyed while they are blocked or mid-tap (ASan: no use after free)
    for (auto& t : tappers) t.join();
    CHECK(finished == 8);
  }
}

// Harder: the blocked tappers are kept off the CPU (SCHED_IDLE beside a spinner on CPU 1) while the
// receiver is destroyed and the next one on the device opens and closes, which frees the ring the
// first one retired unless a host thread still waits inside it (detail::ring_pin). ASan watches.
TEST_CASE("host threads blocked in a tap outlive their receiver and its successor, touching live memory") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  for (int round = 0; round < 5; ++round) {
    devtap_test::cpu_starver starver;
    std::atomic<int> finished{0}, blocked{0};
    std::vector<std::thread> tappers;
    auto rx = std::make_unique<devtap::receiver>(
        devtap::receiver_options{.devices = all(cpus), .budget_bytes = 256, .close_timeout = 100ms});
    std::atomic<bool> release{false};
    auto point = rx->attach<std::uint64_t>([&release](const std::uint64_t&) {
      while (!release) std::this_thread::sleep_for(1ms);  // holds the reader: the tiny ring fills
    });
    const devtap::outfeed out = rx->outfeed(*dev);
    for (int t = 0; t < 8; ++t)
      tappers.emplace_back([&, out, point] {
        devtap_test::cpu_starver::starve_this_thread();
        try {
          blocked.fetch_add(1);  // the reader is held: the tiny ring fills, and every tapper blocks
          for (std::uint64_t i = 0;; ++i) out.tap(point, i);
        } catch (const devtap::outfeed_error&) {
        }
        finished.fetch_add(1);
      });
    while (blocked.load() < 8) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // the ring is full: they sleep, waiting for space
    starver.hold();
    release = true;
    rx.reset();  // wakes the tappers, which cannot run on CPU 1 yet
    { devtap::receiver next({.devices = all(cpus)}); }  // its close frees what rx retired, unless pinned
    starver.let_go();
    for (auto& t : tappers) t.join();
    CHECK(finished == 8);
  }
}

TEST_CASE("close() racing close() and flush() neither deadlocks nor touches freed state") {
  devtap::cpu_client cpus(2);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> got{0};
    devtap::receiver rx({.devices = all(cpus), .close_timeout = 5s});
    auto point = rx.attach<int>([&](const int&) { ++got; });
    for (auto* dev : cpus.cpu_devices())
      (void)dev->submit([point](devtap::cpu_context& ctx) {
        for (int i = 0; i < 200; ++i) ctx.tap(point, i);
      });
    std::atomic<bool> go{false};
    std::vector<std::thread> racers;
    for (int t = 0; t < 2; ++t)
      racers.emplace_back([&] {
        while (!go) std::this_thread::yield();
        rx.close();
      });
    racers.emplace_back([&] {
      while (!go) std::this_thread::yield();
      for (int i = 0; i < 10; ++i) rx.flush();
    });
    go = true;
    rx.close();
    CHECK(got == 400);  // whichever close() returned first, everything was delivered
    for (auto& t : racers) t.join();
  }
}

TEST_CASE("a consumer that destroys its own receiver abandons its streams, never joins itself") {
  devtap::cpu_client cpus(1);
  std::vector<std::string> logs;
  std::mutex logs_mutex;
  devtap::set_log_sink([&](devtap::log_level, std::string_view m) {
    std::lock_guard lock(logs_mutex);
    logs.emplace_back(m);
  });
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .name = "self-destroy"});
  std::atomic<bool> destroyed{false};
  auto point = rx->attach<int>([&](const int&) {
    rx.reset();  // from the reader thread
    destroyed = true;
  });
  rx->outfeed(*cpus.cpu_devices()[0]).tap(point, 1);
  devtap_test::eventually([&] { return destroyed.load(); }, 10s);
  REQUIRE(destroyed);
  std::this_thread::sleep_for(20ms);  // the reader returns and frees the state on its own thread
  devtap::set_log_sink({});
  std::lock_guard lock(logs_mutex);
  CHECK(std::count(logs.begin(), logs.end(),
                   "receiver 'self-destroy' destroyed from a consumer of this receiver: its streams are abandoned, "
                   "not drained") == 1);
}

TEST_CASE("an outfeed kept past its receiver's destruction fails with an error, never touches freed memory") {
  devtap::cpu_client cpus(1);
  auto* dev = cpus.cpu_devices()[0];
  devtap::outfeed kept;
  devtap::tap_point<int> point;
  {
    devtap::receiver rx({.devices = all(cpus)});
    point = rx.attach<int>([](const int&) {});
    kept = rx.outfeed(*dev);
  }  // destroyed: its ring stays alive on the device (ASan: the tap below read freed memory before)
  CHECK_THROWS_WITH(kept.tap(point, 1),
                    Catch::Equals("devtap: tap on device 'cpu:0' after its receiver closed (the record was not written)"));
}

namespace {
// A device whose ring position cannot be read (a GPU whose copy engine does not answer): its ring
// is an ordinary host ring, but claimed_position() gives up at the deadline, or throws as
// cuda_check does (a broken CUDA context) when `silent_ring_throws` is set.
std::atomic<bool> silent_ring_throws{false};
struct silent_ring final : devtap::detail::ring_allocation {
  explicit silent_ring(std::uint64_t capacity) : inner(capacity) {
    host = inner.host;
    producer = inner.producer;
  }
  std::optional<std::uint64_t> claimed_position(std::chrono::steady_clock::time_point deadline) const override {
    if (silent_ring_throws) throw devtap::backend_error("silent:0: reading the ring's tail failed");
    std::this_thread::sleep_until(deadline);
    return std::nullopt;
  }
  devtap::detail::host_ring_allocation inner;
};
struct silent_device final : devtap::device {
  silent_device() : device(0, "silent", "silent:0", 0) {}
  std::unique_ptr<devtap::detail::ring_allocation> allocate_ring(std::uint64_t capacity) override {
    return std::make_unique<silent_ring>(capacity);
  }
  void after_pending_work(std::function<void()> fn) override { run_pending_work_callback(fn); }
};
}  // namespace

TEST_CASE("flush() is bounded by close_timeout even when a device's position cannot be read") {
  silent_device dev;
  devtap::receiver rx({.devices = {&dev}, .close_timeout = std::chrono::milliseconds(200), .name = "silent"});
  const auto start = std::chrono::steady_clock::now();
  try {
    rx.flush();
    FAIL("flush() returned although the device's position was never read");
  } catch (const devtap::timeout_error& e) {
    CHECK(std::string(e.what()).find("silent:0 (its position could not be read in time)") != std::string::npos);
    REQUIRE(e.devices().size() == 1);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= std::chrono::milliseconds(200));
  CHECK(took < std::chrono::seconds(5));
  rx.close();  // close() does not read the position: it ends the stream and returns
}

// outfeed.md: "After close() has returned or thrown, no consumer is called again". close() queues the
// end of the stream behind the record a stuck reader is on; released later, that reader must not
// hand the end to the consumers (a coroutine's end runs its code).
TEST_CASE("after a close() timeout, a released reader does not give the consumers their end") {
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  struct shared_state {
    std::atomic<bool> release{false}, stuck{false}, closed{false};
    std::atomic<int> after_close{0};
  };
  auto s = std::make_shared<shared_state>();
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .close_timeout = 200ms});
    auto co = rx.attach<int>([s](devtap::inbox<int> in) -> devtap::consumer<int> {
      while (auto v = co_await in.next())
        if (s->closed) s->after_close++;
      if (s->closed) s->after_close++;  // the end, seen after close() threw
    });
    auto plain = rx.attach<double>([s](const double&) {
      s->stuck = true;
      while (!s->release) std::this_thread::sleep_for(1ms);
    });
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      ctx.tap(co, 1);
      ctx.tap(plain, 1.0);
    });
    REQUIRE(devtap_test::eventually([&] { return s->stuck.load(); }, 10s));
    CHECK_THROWS_AS(rx.close(), devtap::timeout_error);
    s->closed = true;
    s->release = true;
    CHECK(devtap_test::eventually([&] { return rx.stats().devices[0].lost_at_close == 0 && rx.stats().devices[0].records == 2; }, 10s));
    std::this_thread::sleep_for(100ms);
    CHECK(s->after_close == 0);
  }
  devtap::set_log_sink({});
}

TEST_CASE("a client destroyed before its receiver closes it first; the receiver then touches no device") {
  auto cpus = std::make_unique<devtap::cpu_client>(2);
  std::atomic<int> got{0};
  std::atomic<bool> ended{false};
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(*cpus), .name = "outlived"});
  auto point = rx->attach<int>([&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (co_await in.next()) got.fetch_add(1);
    ended = true;
  }, devtap::shared);
  for (auto* dev : cpus->cpu_devices())
    (void)dev->submit([point](devtap::cpu_context& ctx) { for (int i = 0; i < 1000; ++i) ctx.tap(point, i); });
  cpus.reset();  // runs the queued taps, then closes the receiver (a warning), then frees the devices
  CHECK(got == 2000);
  CHECK(ended);
  // Closed: these no longer look at the devices (ASan: barrier() read a freed device).
  CHECK_NOTHROW(rx->barrier());
  CHECK_NOTHROW(rx->flush());
  CHECK(rx->stats().total().records == 2000);
  CHECK_NOTHROW(rx->close());
  rx.reset();
}

TEST_CASE("after close() gave up, what the ring holds counts although its position cannot be read, or reading it throws") {
  const bool throws = GENERATE(false, true);
  INFO((throws ? "claimed_position() throws" : "claimed_position() gives up"));
  silent_ring_throws = throws;
  silent_device dev;
  // Static: the reader close() let go of may still be leaving when the next GENERATE run starts.
  static std::atomic<bool> stuck, release;
  stuck = release = false;
  devtap::receiver rx({.devices = {&dev}, .close_timeout = 100ms, .name = "silent"});
  auto point = rx.attach<int>([&](const int&) {
    stuck = true;
    while (!release) std::this_thread::sleep_for(1ms);
  });
  auto out = rx.outfeed(dev);
  for (int i = 0; i < 5; ++i) out.tap(point, i);
  while (!stuck) std::this_thread::sleep_for(1ms);
  CHECK_THROWS_AS(rx.close(), devtap::timeout_error);
  release = true;  // the reader counts what is left (it counted nothing; a throw ended the process)
  devtap_test::eventually([&] { return rx.stats().total().lost_at_close != 0; }, 10s);
  const auto st = rx.stats().total();
  CHECK(st.records + st.lost_at_close == 5);
  silent_ring_throws = false;
}

// ---- consumers: one instance per device, whatever their form ----------------------------------

namespace {
// Taps 0..count-1 through `point` on every device at once, and waits for them all.
void tap_on_every_device(devtap::cpu_client& cpus, devtap::tap_point<int> point, int count) {
  std::vector<std::future<void>> works;
  for (auto* dev : cpus.cpu_devices())
    works.push_back(dev->submit([point, count](devtap::cpu_context& ctx) {
      for (int i = 0; i < count; ++i) ctx.tap(point, i);
    }));
  for (auto& w : works) w.get();
}

// Which instance each device's records reached, and whether two threads were ever inside one.
struct instance_log {
  std::mutex mutex;
  std::map<const void*, std::set<int>> devices_of;     // instance -> devices it was called for
  std::map<const void*, std::thread::id> inside;       // instance -> the thread in it now
  int overlaps = 0;
  void enter(const void* self, int device) {
    std::lock_guard lock(mutex);
    devices_of[self].insert(device);
    if (!inside.emplace(self, std::this_thread::get_id()).second) ++overlaps;
  }
  void leave(const void* self) {
    std::lock_guard lock(mutex);
    if (inside[self] == std::this_thread::get_id()) inside.erase(self);
  }
};
struct counting_callable {
  instance_log* log;
  void operator()(const int&, const devtap::device& d) {
    log->enter(this, d.id());
    std::this_thread::yield();  // widens the window two readers would share
    log->leave(this);
  }
};
}  // namespace

TEST_CASE("a callable consumer is one object: each device's reader calls it, in that device's order; shared: one call at a time") {
  devtap_test::watchdog dog(60s);
  devtap::cpu_client cpus(3);
  const bool shared = GENERATE(false, true);
  CAPTURE(shared);
  instance_log log;
  devtap::receiver rx({.devices = all(cpus)});
  const auto point = shared ? rx.attach<int>(counting_callable{&log}, devtap::shared) : rx.attach<int>(counting_callable{&log});
  tap_on_every_device(cpus, point, 5000);
  rx.close();
  CHECK(rx.stats().total().records == 15000);
  REQUIRE(log.devices_of.size() == 1);  // one object, fed by all three devices (not a copy each)
  CHECK(log.devices_of.begin()->second.size() == 3);
  if (shared) CHECK(log.overlaps == 0);  // (without `shared`, calls of two devices may overlap: documented)
}

TEST_CASE("a callable that cannot be copied, or only claims it can, is a consumer") {
  devtap_test::watchdog dog(60s);
  devtap::cpu_client cpus(2);
  std::atomic<int> calls{0};
  std::vector<std::unique_ptr<int>> kept;  // its copy constructor exists only as a declaration
  devtap::receiver rx({.devices = all(cpus)});
  const auto unique = rx.attach<int>([&, only = std::make_unique<int>(0)](const int&) { ++calls; });
  const auto keeper = rx.attach<int>([kept = std::move(kept)](const int& v) mutable { kept.push_back(std::make_unique<int>(v)); },
                                     devtap::shared);
  tap_on_every_device(cpus, unique, 100);
  tap_on_every_device(cpus, keeper, 100);
  rx.close();
  CHECK(calls == 200);
  CHECK(rx.stats().total().records == 400);
}

namespace {
devtap::consumer<int> never_awaits(devtap::inbox<int>) { co_return; }
devtap::consumer<int> drains(devtap::inbox<int> in) {
  while (auto v = co_await in.next()) (void)v;
}
}  // namespace

TEST_CASE("a coroutine that returns before its first co_await never received the record that woke it: ignored") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  const auto point = rx.attach<int>(never_awaits);
  for (auto* dev : cpus.cpu_devices())
    dev->submit([point](devtap::cpu_context& ctx) {
      for (int i = 0; i < 10; ++i) ctx.tap(point, i);
    }).get();
  rx.close();
  const auto total = rx.stats().total();
  CHECK(total.records == 0);  // was 2: one per device, counted delivered
  CHECK(total.ignored == 20);
}

TEST_CASE("a coroutine factory may attach, close or destroy its receiver: no hang, attach() says what happened") {
  devtap_test::watchdog dog(60s);
  devtap::cpu_client cpus(2);
  SECTION("attach from the factory: both consumers work") {
    devtap::receiver rx({.devices = all(cpus)});
    std::optional<devtap::tap_point<long>> inner;
    std::atomic<int> longs{0};
    const auto outer = rx.attach<int>([&](devtap::inbox<int> in) {
      if (!inner) inner = rx.attach<long>([&](const long&) { ++longs; });  // hung on the table's lock before
      return drains(std::move(in));
    });
    REQUIRE(inner);
    CHECK(outer.id != inner->id);
    cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
      ctx.tap(outer, 1);
      ctx.tap(*inner, 2L);
    }).get();
    rx.close();
    CHECK(rx.stats().total().records == 2);
    CHECK(longs == 1);
  }
  SECTION("close() from the factory: attach() throws, close() has run") {
    devtap::receiver rx({.devices = all(cpus)});
    REQUIRE_THROWS_WITH(rx.attach<int>([&](devtap::inbox<int> in) {
      rx.close();
      return drains(std::move(in));
    }),
                        "devtap: attach() on receiver 'receiver' after close()");
    CHECK_THROWS_WITH(rx.attach<int>([](const int&) {}), "devtap: attach() on receiver 'receiver' after close()");
  }
  SECTION("the receiver destroyed by the factory: attach() throws, nothing is touched after") {
    auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus)});
    devtap::receiver& ref = *rx;
    CHECK_THROWS_AS(ref.attach<int>([&](devtap::inbox<int> in) {
      rx.reset();
      return drains(std::move(in));
    }),
                    std::logic_error);
    CHECK(rx == nullptr);
  }
}

TEST_CASE("receiver options that cannot work are refused at construction") {
  devtap::cpu_client cpus(1);
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .close_timeout = -5ms}),
                    "devtap: receiver 'receiver': close_timeout of -5 ms is negative (0 gives up on every device at "
                    "once; milliseconds::max() waits as long as it takes)");
  CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .close_timeout = std::chrono::milliseconds::min()}),
                  std::invalid_argument);
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .overflow = static_cast<devtap::overflow_policy>(7), .name = "p"}),
                    "devtap: receiver 'p': overflow policy 7 is none of block, drop, error");
  // 0 stays allowed: close() gives up at once, and counts what it leaves.
  devtap::receiver rx({.devices = all(cpus), .close_timeout = 0ms});
  const auto point = rx.attach<int>([](const int&) {});
  cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); }).get();
  try {
    rx.close();
  } catch (const devtap::timeout_error&) {
  }
  const auto total = rx.stats().total();
  CHECK(total.records + total.lost_at_close == 1);
}

TEST_CASE("attach() racing close(): a consumer it returns a tap point for sees its end; else attach() throws") {
  devtap_test::watchdog dog(120s);
  devtap::cpu_client cpus(2);
  int attached = 0, refused = 0;
  for (int round = 0; round < 40; ++round) {
    devtap::receiver rx({.devices = all(cpus)});
    const auto warm = rx.attach<long>([](const long&) {});
    cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) { ctx.tap(warm, 1L); }).get();
    rx.flush();  // the readers' table is current: only the racing attach changes it
    std::atomic<int> ends{0};
    std::atomic<bool> go{false};
    std::thread closer([&] {
      while (!go) std::this_thread::yield();
      rx.close();
    });
    go = true;
    bool ok = true;
    try {
      (void)rx.attach<int>([&](devtap::inbox<int> in) -> devtap::consumer<int> {
        while (auto v = co_await in.next()) (void)v;
        ++ends;
      });
    } catch (const std::logic_error&) {
      ok = false;
    }
    closer.join();
    if (ok) {
      ++attached;
      CHECK(ends == 2);  // one coroutine per device, each ended by close()
    } else {
      ++refused;
      CHECK(ends == 0);
    }
  }
  CHECK(attached + refused == 40);
}
