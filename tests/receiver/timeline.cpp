// Timestamps and tap_info (receiver_options::timestamps): when and where each record was made, the
// device's tap count with its gaps, for callables and coroutines; and what tap_info says without.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <catch2/catch.hpp>

#include "../hostile.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <stdexcept>
#include <latch>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using clock_type = devtap::tap_info::clock;

namespace {
std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

struct seen {
  int value;
  std::string device;
  clock_type::time_point time;
  clock_type::time_point received;
  std::uint64_t sequence;
  bool stamped;
};
}  // namespace

TEST_CASE("with timestamps, each record carries when it was tapped and its device's tap count") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .name = "stamped", .timestamps = true});
  std::mutex mutex;
  std::vector<std::vector<seen>> got(2);
  auto point = rx.attach<int>([&](const int& v, const devtap::tap_info& info) {
    const auto now = clock_type::now();
    std::lock_guard lock(mutex);
    got[static_cast<std::size_t>(info.device.id())].push_back(
        {v, info.device.name(), info.time, now, info.sequence, info.stamped});
  });
  const auto before = clock_type::now();
  auto work = [&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 2000; ++i) ctx.tap(point, i);
  };
  auto f0 = cpus.cpu_devices()[0]->submit(work);
  auto f1 = cpus.cpu_devices()[1]->submit(work);
  f0.get();
  f1.get();
  rx.close();
  const auto after = clock_type::now();
  for (std::size_t d = 0; d < 2; ++d) {
    REQUIRE(got[d].size() == 2000);
    for (std::size_t i = 0; i < got[d].size(); ++i) {
      const seen& s = got[d][i];
      CHECK(s.stamped);
      CHECK(s.device == "cpu:" + std::to_string(d));
      CHECK(s.sequence == i);  // one producer, nothing dropped: 0, 1, 2, ...
      CHECK(s.value == static_cast<int>(i));
      CHECK(s.time >= before);
      CHECK(s.time <= s.received);  // tapped before it was handed over
      if (i > 0) CHECK(s.time >= got[d][i - 1].time);  // one device's times never go back
    }
    CHECK(got[d].back().time <= after);
  }
}

TEST_CASE("a coroutine reads in.info() for its current value") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  std::vector<devtap::tap_info> infos;
  std::vector<double> values;
  auto point = rx.attach<double>([&](devtap::inbox<double> in) -> devtap::consumer<double> {
    while (auto v = co_await in.next()) {
      infos.push_back(in.info());
      values.push_back(*v);
    }
  });
  const auto t0 = clock_type::now();
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 10; ++i) {
      ctx.tap(point, i * 0.5);
      std::this_thread::sleep_for(1ms);
    }
  });
  rx.close();
  REQUIRE(infos.size() == 10);
  for (std::size_t i = 0; i < infos.size(); ++i) {
    CHECK(infos[i].stamped);
    CHECK(infos[i].sequence == i);
    CHECK(&infos[i].device == cpus.cpu_devices()[0]);
    CHECK(infos[i].time >= t0);
    if (i > 0) CHECK(infos[i].time - infos[i - 1].time >= 1ms);  // the device slept between its taps
  }
}

namespace {
// One cpu device with a small ring under `drop` and timestamps, whose consumer keeps each record's
// sequence number and holds the reader inside the record 0 until `release` is set.
struct held_under_drop {
  devtap::cpu_client cpus{1};
  devtap::receiver rx{{.devices = all(cpus), .budget_bytes = 1024, .overflow = devtap::overflow_policy::drop,
                       .timestamps = true}};
  std::latch entered{1};
  std::atomic<bool> release{false};
  std::vector<std::uint64_t> sequences;
  devtap::tap_point<std::uint64_t> point = rx.attach<std::uint64_t>([this](const std::uint64_t& v, const devtap::tap_info& info) {
    if (v == 0) {
      entered.count_down();
      while (!release) std::this_thread::sleep_for(1ms);
    }
    sequences.push_back(info.sequence);
  });
  devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
};
}  // namespace

TEST_CASE("a tap that is dropped still uses its sequence number: the consumer sees the gap") {
  held_under_drop h;
  auto& [cpus, rx, entered, release, sequences, point, out] = h;
  out.tap(point, std::uint64_t{0});
  entered.wait();  // the reader is held: the ring fills and later taps are dropped
  for (std::uint64_t i = 1; i < 200; ++i) out.tap(point, i);
  const std::uint64_t dropped = rx.stats().devices[0].dropped_records;
  release = true;
  rx.close();
  REQUIRE(dropped > 0);
  REQUIRE(sequences.size() == 200 - dropped);
  std::uint64_t gaps = 0;
  for (std::size_t i = 1; i < sequences.size(); ++i) {
    REQUIRE(sequences[i] > sequences[i - 1]);
    gaps += sequences[i] - sequences[i - 1] - 1;
  }
  gaps += 199 - sequences.back();  // drops after the last record delivered
  CHECK(gaps == dropped);
}

TEST_CASE("without timestamps, tap_info says when the record was handed over, and its place in the stream") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  std::mutex mutex;
  std::vector<std::vector<std::pair<std::uint64_t, bool>>> got(2);
  std::atomic<int> early{0};
  const auto t0 = clock_type::now();
  auto point = rx.attach<int>(
      [&](const int&, const devtap::tap_info& info) {
        if (info.time < t0) early++;
        std::lock_guard lock(mutex);
        got[static_cast<std::size_t>(info.device.id())].emplace_back(info.sequence, info.stamped);
      },
      devtap::shared);
  auto work = [&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 500; ++i) ctx.tap(point, i);
  };
  auto f0 = cpus.cpu_devices()[0]->submit(work);
  auto f1 = cpus.cpu_devices()[1]->submit(work);
  f0.get();
  f1.get();
  rx.close();
  CHECK(early == 0);
  for (const auto& device : got) {
    REQUIRE(device.size() == 500);
    for (std::size_t i = 0; i < device.size(); ++i) {
      CHECK(device[i].first == i);
      CHECK_FALSE(device[i].second);
    }
  }
}

TEST_CASE("stamped records keep their types checked, and their sizes limited, as any other") {
  devtap::cpu_client cpus(1);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024, .timestamps = true});
  int ints = 0;
  auto point = rx.attach<int>([&](const int&) { ++ints; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  out.tap(point, 1);
  out.tap(devtap::tap_point<std::int64_t>{point.id, point.fingerprint, point.receiver}, std::int64_t{2});  // 8 bytes
  // The stamp takes 16 of the ring's bytes: 1024 - 24 - 16 is the largest value.
  using largest = std::array<char, 1024 - 24 - 16>;
  int large = 0;
  auto large_point = rx.attach<largest>([&](const largest&) { ++large; });
  CHECK_NOTHROW(out.tap(large_point, largest{}));
  CHECK_THROWS_AS(out.tap(devtap::tap_point<std::array<char, 1024 - 24 - 15>>{}, std::array<char, 1024 - 24 - 15>{}),
                  devtap::outfeed_error);
  out.tap(point, 3);
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);  // the mismatch is reported
  devtap::set_log_sink({});
  CHECK(ints == 2);
  CHECK(large == 1);
  CHECK(rx.stats().total().type_mismatches == 1);
}

TEST_CASE("a merged consumer gets every device's records in the order they were tapped") {
  constexpr int devices = 4, per_device = 400;
  devtap::cpu_client cpus(devices);
  // A lag far above any pause here: order then never depends on how fast each reader runs (under
  // a sanitizer a reader may fall 10 ms behind, and a device that seems quiet lets later records by).
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = 5s});
  std::vector<std::pair<clock_type::time_point, int>> order;  // called one record at a time: no lock needed
  std::vector<int> per(devices, 0);
  std::vector<std::uint64_t> next_sequence(devices, 0);
  int out_of_sequence = 0;
  auto point = rx.attach<int>(
      [&](const int& v, const devtap::tap_info& info) {
        const auto d = static_cast<std::size_t>(info.device.id());
        order.emplace_back(info.time, v);
        ++per[d];
        if (info.sequence != next_sequence[d]++) ++out_of_sequence;
      },
      devtap::merged);
  std::vector<std::future<void>> works;
  for (int d = 0; d < devices; ++d)
    works.push_back(cpus.cpu_devices()[static_cast<std::size_t>(d)]->submit([&, d](devtap::cpu_context& ctx) {
      for (int i = 0; i < per_device; ++i) {
        ctx.tap(point, d * 100000 + i);
        if (i % 50 == d) std::this_thread::sleep_for(200us);  // the devices drift apart and back
      }
    }));
  for (auto& w : works) w.get();
  rx.close();
  REQUIRE(order.size() == std::size_t{devices} * per_device);
  for (std::size_t i = 1; i < order.size(); ++i) REQUIRE(order[i].first >= order[i - 1].first);
  for (int n : per) CHECK(n == per_device);
  CHECK(out_of_sequence == 0);
}

TEST_CASE("a merged coroutine sees the end once, after every device ended; a quiet device does not hold the rest") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .name = "merge", .timestamps = true, .merge_lag = 20ms});
  std::atomic<int> got{0};
  std::atomic<int> ends{0};
  auto point = rx.attach<int>(
      [&](devtap::inbox<int> in) -> devtap::consumer<int> {
        while (auto v = co_await in.next()) got++;
        ends++;
      },
      devtap::merged);
  // cpu:0 taps once and goes quiet; cpu:1's later records must still come through, after about
  // merge_lag, long before close().
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
  cpus.cpu_devices()[1]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 10; ++i) ctx.tap(point, i);
  });
  CHECK(devtap_test::eventually([&] { return got == 11; }, 10s));
  CHECK(ends == 0);
  rx.close();
  CHECK(ends == 1);
}

TEST_CASE("merged without timestamps is refused when attached, naming the option") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .name = "plain"});
  CHECK_THROWS_WITH(rx.attach<int>([](const int&) {}, devtap::merged),
                    "devtap: attach(fn, devtap::merged) on receiver 'plain' needs receiver_options::timestamps = true "
                    "(records are merged by the time they were tapped)");
  rx.close();
}

TEST_CASE("a merged consumer that throws is reported by close(), and the others records still arrive") {
  devtap::cpu_client cpus(2);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  int seen = 0;
  auto point = rx.attach<int>(
      [&](const int& v) {
        ++seen;
        if (v == 7) throw std::runtime_error("seven");
      },
      devtap::merged, "merged");
  for (auto* d : cpus.cpu_devices())
    d->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 10; ++i) ctx.tap(point, i);
    });
  try {
    rx.close();
    FAIL("close() did not report the merged consumer's failure");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 2);
    for (const auto& f : e.failures()) {
      CHECK(f.consumer == "merged");
      CHECK(f.message == "seven");
    }
  }
  devtap::set_log_sink({});
  CHECK(seen == 20);
  CHECK(rx.stats().total().consumer_errors == 2);
}

TEST_CASE("records a merged consumer still holds when close() gives up on a device are delivered by close()") {
  devtap::cpu_client cpus(2);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  struct flags {
    std::atomic<bool> release{false}, blocked{false};
  };
  const auto f = std::make_shared<flags>();
  std::atomic<int> merged_got{0};
  {
    // A lag far beyond the close timeout: only close() can let cpu:1's records by the stuck cpu:0.
    devtap::receiver rx({.devices = all(cpus), .close_timeout = 3s, .timestamps = true, .merge_lag = 60s});
    auto stuck = rx.attach<int>([f](const int&) {
      f->blocked = true;
      while (!f->release) std::this_thread::sleep_for(1ms);
    });
    auto point = rx.attach<int>([&](const int&) { merged_got++; }, devtap::merged);
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(stuck, 0); });  // cpu:0's reader is held
    cpus.cpu_devices()[1]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 10; ++i) ctx.tap(point, i);
    });
    while (!f->blocked) std::this_thread::sleep_for(1ms);
    CHECK_THROWS_AS(rx.close(), devtap::timeout_error);
    CHECK(merged_got == 10);  // by close() itself, not later, not never
  }
  f->release = true;
  devtap::set_log_sink({});
}

TEST_CASE("a merged consumer that taps into its receiver's full ring gets an error, not a deadlock") {
  devtap::cpu_client cpus(2);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2048, .timestamps = true});
  const devtap::outfeed to_cpu1 = rx.outfeed(*cpus.cpu_devices()[1]);
  auto sink = rx.attach<std::array<std::uint8_t, 64>>([](const std::array<std::uint8_t, 64>&) {});
  std::atomic<int> refused{0};
  auto echo = rx.attach<int>(
      [&](const int&) {
        try {
          for (int i = 0; i < 100; ++i) to_cpu1.tap(sink, std::array<std::uint8_t, 64>{});
        } catch (const devtap::outfeed_error&) {
          refused++;
        }
      },
      devtap::merged);
  for (auto* d : cpus.cpu_devices())
    d->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 20; ++i) ctx.tap(echo, i);
    });
  rx.close();  // returns: nothing waits on itself
  devtap::set_log_sink({});
  CHECK(refused > 0);
}

TEST_CASE("a merged consumer places a device's unstamped records at their arrival, not before everything") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = 5s});
  std::vector<int> order;
  auto point = rx.attach<int>([&](const int& v) { order.push_back(v); }, devtap::merged);
  // cpu:0 taps without stamps (as a CUDA kernel does), through an outfeed on its ring made so.
  const devtap::outfeed stamped0 = rx.outfeed(*cpus.cpu_devices()[0]);
  const devtap::outfeed unstamped0(stamped0.ring(), stamped0.policy(), "cpu:0", true, stamped0.receiver_id(), false);
  rx.outfeed(*cpus.cpu_devices()[1]).tap(point, 1);  // stamped, first
  std::this_thread::sleep_for(5ms);
  unstamped0.tap(point, 2);  // later: it must not sort before cpu:1's record
  rx.flush();  // cpu:0's reader has read it (its arrival is stamped) before 3 is tapped, however late it ran
  rx.outfeed(*cpus.cpu_devices()[1]).tap(point, 3);
  rx.close();
  CHECK(order == std::vector<int>{1, 2, 3});
}

TEST_CASE("ids with the stamp or call bits are no consumer's; a huge merge lag does not overflow") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = std::chrono::milliseconds::max()});
  std::vector<int> got;
  auto point = rx.attach<int>([&](const int& v) { got.push_back(v); }, devtap::merged);
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  CHECK_THROWS_AS(out.tap(devtap::tap_point<int>{point.id | devtap::detail::stamped_id_flag, point.fingerprint, point.receiver}, 5),
                  devtap::outfeed_error);
  out.tap(point, 1);
  std::this_thread::sleep_for(20ms);
  CHECK(got.empty());  // cpu:1 has shown nothing and not ended: held (a lag of max() is not zero)
  rx.close();
  CHECK(got == std::vector<int>{1});
}

namespace {
struct call_seen {
  std::uint64_t sequence;
  clock_type::time_point time;
  clock_type::time_point handled;
  bool stamped;
  const devtap::device* device;
};
}  // namespace

TEST_CASE("with timestamps, a call carries when it was made and its number among the device's taps") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  std::vector<std::pair<int, devtap::tap_info>> taps;  // (reader thread only)
  std::vector<call_seen> calls;
  auto point = rx.attach<int>([&](const int& v, const devtap::tap_info& info) { taps.emplace_back(v, info); });
  auto ask = rx.serve<int, int>([&](const int& q, const devtap::tap_info& info) {
    calls.push_back({info.sequence, info.time, clock_type::now(), info.stamped, &info.device});
    return q * 2;
  });
  const auto before = clock_type::now();
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 100; ++i) {
      ctx.tap(point, i);
      CHECK(ctx.call(ask, i) == 2 * i);
    }
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  CHECK(*out.call(ask, 7) == 14);  // a host thread's call through the outfeed is stamped too
  rx.close();
  REQUIRE(taps.size() == 100);
  REQUIRE(calls.size() == 101);
  for (std::size_t i = 0; i < 100; ++i) {
    CHECK(taps[i].second.sequence == 2 * i);  // tap, call, tap, call: one count, no gap
    CHECK(calls[i].sequence == 2 * i + 1);
    CHECK(calls[i].stamped);
    CHECK(calls[i].device == cpus.cpu_devices()[0]);
    CHECK(calls[i].time >= taps[i].second.time);  // made after the tap before it,
    CHECK(calls[i].time <= calls[i].handled);     // and before its handler ran
    if (i + 1 < 100) CHECK(calls[i].time <= taps[i + 1].second.time);
  }
  CHECK(calls.front().time >= before);
  CHECK(calls.back().sequence == 200);
  CHECK(calls.back().stamped);
}

TEST_CASE("without timestamps, a call's tap_info says when it was handed over and its place in the stream") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::vector<std::uint64_t> sequences;
  std::vector<bool> stamped;
  auto point = rx.attach<int>([&](const int&, const devtap::tap_info& info) { sequences.push_back(info.sequence); });
  auto ask = rx.serve<int, int>([&](const int& q, const devtap::tap_info& info) {
    sequences.push_back(info.sequence);
    stamped.push_back(info.stamped);
    return q + 1;
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 10; ++i) {
      ctx.tap(point, i);
      ctx.tap(point, i);
      CHECK(ctx.call(ask, i) == i + 1);
    }
  });
  rx.close();
  REQUIRE(sequences.size() == 30);
  for (std::size_t i = 0; i < sequences.size(); ++i) CHECK(sequences[i] == i);
  CHECK(stamped == std::vector<bool>(10, false));
}

TEST_CASE("a call that finds the ring full under drop still uses its number: the next record shows the gap") {
  held_under_drop h;
  auto& [cpus, rx, entered, release, sequences, point, out] = h;
  auto ask = rx.serve<std::uint64_t, std::uint64_t>([](const std::uint64_t& q) { return q; });
  out.tap(point, std::uint64_t{0});
  entered.wait();  // the reader is held
  std::uint64_t tapped = 1;
  while (rx.stats().devices[0].dropped_records == 0) out.tap(point, tapped++);  // until the ring is full
  CHECK(out.call(ask, std::uint64_t{5}).error() == devtap::call_errc::ring_full);  // number `tapped`
  release = true;
  rx.flush();  // the ring drains
  out.tap(point, std::uint64_t{999});
  rx.close();
  REQUIRE(sequences.size() >= 2);
  CHECK(sequences.back() == tapped + 1);  // the call took `tapped`, the dropped tap before it tapped - 1
  CHECK(rx.stats().devices[0].dropped_records == 2);
}

TEST_CASE("a stamped call on a receiver without timestamps is refused in its own slot, not left waiting") {
  devtap_test::watchdog dog(30s);
  devtap_test::captured_log log;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto ask = rx.serve<int, int>([](const int& q) { return q; });
  const devtap::outfeed plain = rx.outfeed(*cpus.cpu_devices()[0]);
  REQUIRE(*plain.call(ask, 1) == 1);
  // An outfeed that stamps on this receiver's ring (the ring's flag says a stamp comes first): the
  // reader keeps the flag in the id (no handler has it) and answers the slot after the stamp.
  const devtap::outfeed stamping(plain.ring(), plain.policy(), "cpu:0", true, plain.receiver_id(), true);
  auto r = std::async(std::launch::async, [&] { return stamping.call(ask, 2).error(); });
  REQUIRE(r.wait_for(10s) == std::future_status::ready);
  CHECK(r.get() == devtap::call_errc::no_handler);
  CHECK(*plain.call(ask, 3) == 3);  // the slots still work
  // Reported under the id it was meant for, saying why: the stamp flag is not part of the id.
  CHECK_THROWS_WITH(rx.close(), Catch::Contains("[cpu:0] #1: 1 call(s) for unknown handler id 1 (stamped, and this "
                                                "receiver takes no timestamps) refused (answered call_errc::no_handler)"));
  CHECK(rx.stats().devices[0].unknown_ids == 1);
  // The log names it the same way, once (the flags are not part of the id).
  CHECK(log.errors() == std::vector<std::string>{"receiver 'receiver': call for unknown handler id 1 (stamped, and this "
                                                 "receiver takes no timestamps) on cpu:0 (refused; logged once)"});
}
