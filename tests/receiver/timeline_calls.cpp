// Hostile tests of stamped calls (receiver_options::timestamps = true): the size limit with the
// stamp, each overflow policy, mixed stamping and plain producers, refusals, throwing and shared
// handlers, numbers without gaps over taps, scopes and calls (and in the recording), close() racing
// callers, a close_timeout behind a stuck handler, the too_large message, generic handlers.
#include <devtap/backend/cpu.hpp>
#include <devtap/print_host.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/receiver/recording.hpp>
#include <devtap/replay.hpp>

#include <catch2/catch.hpp>

#include "../hostile.hpp"
#include "../temp_file.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <latch>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>
#include <typeinfo>

using namespace std::chrono_literals;
using devtap_test::eventually;
using devtap_test::quiet_log;
using devtap_test::watchdog;
namespace d = devtap::detail;

namespace {
struct blob {
  std::span<const std::uint8_t> bytes;
};
std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto v = c.local_devices();
  return {v.begin(), v.end()};
}

// One cpu device with a 1 KiB ring under `policy` and timestamps. The consumer of `block` keeps each
// record's number and holds the reader inside the record 0 until `release`; the handler `twice`
// answers 2 * v and keeps its call's number too.
struct held_reader {
  explicit held_reader(devtap::overflow_policy policy)
      : rx({.devices = all(cpus), .budget_bytes = 1024, .overflow = policy, .timestamps = true}) {}
  devtap::cpu_client cpus{1};
  devtap::receiver rx;
  std::latch entered{1};
  std::atomic<bool> release{false};
  std::vector<std::uint64_t> seqs;
  devtap::tap_point<int> block = rx.attach<int>([this](const int& v, const devtap::tap_info& info) {
    if (v == 0) {
      entered.count_down();
      while (!release) std::this_thread::sleep_for(1ms);
    }
    seqs.push_back(info.sequence);
  });
  devtap::call_point<int, int> twice = rx.serve<int, int>([this](const int& v, const devtap::tap_info& info) {
    seqs.push_back(info.sequence);
    return 2 * v;
  });
  devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
};
}  // namespace

TEST_CASE("stamped: the largest request the ring takes is 16 bytes smaller with timestamps; refusals take no number") {
  watchdog dog("stamped size", 20s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .timestamps = true});
  std::vector<std::uint64_t> seqs;
  auto sum = rx.serve<blob, std::uint64_t>([&](const blob& b, const devtap::tap_info& info) {
    seqs.push_back(info.sequence);
    std::uint64_t s = 0;
    for (auto v : b.bytes) s += v;
    return s + b.bytes.size();
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  const std::uint64_t capacity = out.ring().capacity;
  std::vector<std::uint8_t> data(capacity + 64, 1);
  std::size_t largest = 0, largest_plain = 0;
  for (std::size_t n = 0; n <= capacity; ++n) {
    const blob b{std::span<const std::uint8_t>(data.data(), n)};
    const auto enc = d::encoded_size(b);
    if (d::record_bytes(sizeof(d::tap_stamp) + sizeof(d::call_request) + enc) <= d::max_record_bytes(capacity)) largest = n;
    if (d::record_bytes(sizeof(d::call_request) + enc) <= d::max_record_bytes(capacity)) largest_plain = n;
  }
  INFO("largest " << largest << " largest unstamped " << largest_plain);
  CHECK(largest_plain == largest + 16);
  for (std::size_t n : {largest - 8, largest - 1, largest}) {
    INFO("n = " << n);
    const auto r = out.call(sum, blob{std::span<const std::uint8_t>(data.data(), n)});
    REQUIRE(r.ok());
    CHECK(*r == 2 * n);
  }
  for (std::size_t n : {largest + 1, largest + 8, largest + 16, largest_plain + 1}) {
    INFO("n = " << n);
    CHECK(out.call(sum, blob{std::span<const std::uint8_t>(data.data(), n)}).error() == devtap::call_errc::too_large);
  }
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    CHECK_THROWS_AS(ctx.call(sum, blob{std::span<const std::uint8_t>(data.data(), largest + 1)}), devtap::call_error);
    CHECK(ctx.call(sum, blob{std::span<const std::uint8_t>(data.data(), largest)}) == 2 * largest);
  });
  rx.close();
  CHECK(seqs == std::vector<std::uint64_t>{0, 1, 2, 3});  // the too_large calls used no number
  CHECK(out.ring().producer->taps == 4);
}

TEST_CASE("stamped: under overflow_policy::error a stamped call into a full ring is ring_full, its number a gap") {
  watchdog dog("stamped error", 20s);
  quiet_log quiet;
  held_reader h(devtap::overflow_policy::error);
  auto& [cpus, rx, entered, release, seqs, block, twice, out] = h;
  out.tap(block, 0);
  entered.wait();
  int tapped = 1;
  try {
    for (; tapped < 500; ++tapped) out.tap(block, tapped);
  } catch (const devtap::outfeed_error&) {
  }
  // taps 0..tapped-1 written, tap `tapped` refused (its number used)
  const auto before = rx.stats().devices[0].dropped_records;
  CHECK(out.call(twice, 1).error() == devtap::call_errc::ring_full);
  CHECK(rx.stats().devices[0].dropped_records == before + 1);
  release = true;
  rx.flush();
  CHECK(out.call(twice, 4).value() == 8);
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
  REQUIRE(seqs.size() == static_cast<std::size_t>(tapped) + 1);
  for (int i = 0; i < tapped; ++i) CHECK(seqs[static_cast<std::size_t>(i)] == static_cast<std::uint64_t>(i));
  CHECK(seqs.back() == static_cast<std::uint64_t>(tapped) + 2);  // the refused tap and call left 2 gaps
}

TEST_CASE("stamped: under block a stamped call waits for room behind a stuck consumer and is answered") {
  watchdog dog("stamped block", 20s);
  held_reader h(devtap::overflow_policy::block);
  auto& [cpus, rx, entered, release, seqs, block, twice, out] = h;
  out.tap(block, 0);
  entered.wait();
  auto filler = std::async(std::launch::async, [&] {
    for (int i = 1; i < 200; ++i) out.tap(block, i);
  });
  std::this_thread::sleep_for(100ms);
  auto caller = std::async(std::launch::async, [&] { return out.call(twice, 21); });
  std::this_thread::sleep_for(100ms);
  release = true;
  filler.get();
  REQUIRE(caller.wait_for(10s) == std::future_status::ready);
  CHECK(caller.get().value() == 42);
  rx.close();
  std::vector<std::uint64_t> sorted = seqs;
  std::sort(sorted.begin(), sorted.end());
  REQUIRE(sorted.size() == 201);
  for (std::size_t i = 0; i < sorted.size(); ++i) CHECK(sorted[i] == i);
}

TEST_CASE("stamped: a stamping and a plain producer on one ring of a stamped receiver are both answered") {
  watchdog dog("stamped mixed", 20s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  std::vector<std::pair<int, bool>> got;
  auto h = rx.serve<int, int>([&](const int& v, const devtap::tap_info& info) {
    got.emplace_back(v, info.stamped);
    return v + 1;
  });
  const devtap::outfeed stamping = rx.outfeed(*cpus.cpu_devices()[0]);
  REQUIRE(stamping.timestamps());
  const devtap::outfeed plain(stamping.ring(), stamping.policy(), "cpu:0", true, stamping.receiver_id(), false);
  for (int i = 0; i < 20; ++i) {
    CHECK(*(i % 2 ? plain : stamping).call(h, i) == i + 1);
  }
  rx.close();
  REQUIRE(got.size() == 20);
  for (int i = 0; i < 20; ++i) {
    CHECK(got[i].first == i);
    CHECK(got[i].second == (i % 2 == 0));
  }
}

TEST_CASE("stamped: refused calls (wrong types, other receiver's point) are answered in their slot and counted") {
  watchdog dog("stamped refused", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver other({.devices = all(cpus), .name = "other"});
  auto foreign = other.serve<int, int>([](const int& v) { return v; });
  other.close();
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  std::vector<std::uint64_t> seqs;
  auto h = rx.serve<int, int>([&](const int& v, const devtap::tap_info& info) {
    seqs.push_back(info.sequence);
    return v;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  const devtap::call_point<int, double> wrong_rep{h.id, devtap::call_fingerprint_v<int, double>, h.receiver};
  const devtap::call_point<std::uint64_t, int> wrong_req{h.id, devtap::call_fingerprint_v<std::uint64_t, int>, h.receiver};
  CHECK(*out.call(h, 1) == 1);                                        // 0
  CHECK(out.call(wrong_rep, 2).error() == devtap::call_errc::type_mismatch);  // 1
  CHECK(out.call(wrong_req, std::uint64_t{3}).error() == devtap::call_errc::type_mismatch);  // 2
  CHECK(out.call(foreign, 4).error() == devtap::call_errc::no_handler);  // refused before: no number
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    CHECK_THROWS_AS(ctx.call(wrong_rep, 5), devtap::call_error);  // 3
    CHECK(ctx.call(h, 6) == 6);                                    // 4
  });
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
  CHECK(seqs == std::vector<std::uint64_t>{0, 4});
  const auto st = rx.stats().devices[0];
  CHECK(st.type_mismatches == 3);
  CHECK(st.unknown_ids == 0);
  CHECK(st.dropped_records == 0);
}

TEST_CASE("stamped: a handler taking tap_info that throws fails that call; the next is answered") {
  watchdog dog("stamped throws", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  auto h = rx.serve<int, int>([](const int& v, const devtap::tap_info& info) -> int {
    if (v < 0) throw std::runtime_error("negative at " + std::to_string(info.sequence));
    return static_cast<int>(info.sequence);
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    CHECK(ctx.call(h, 1) == 0);
    try {
      ctx.call(h, -1);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::handler_failed);
      CHECK(std::string(e.what()).find("negative at 1") != std::string::npos);
    }
    CHECK(ctx.call(h, 1) == 2);
  });
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
}

TEST_CASE("stamped: a shared handler with tap_info across 3 devices: each device's numbers from 0, no gap") {
  watchdog dog("stamped shared", 30s);
  devtap::cpu_client cpus(3);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  std::vector<std::vector<std::uint64_t>> seqs(3);  // the shared lock orders it
  std::atomic<int> inside{0}, most{0}, unstamped{0};  // (Catch2's CHECK is not for reader threads)
  auto h = rx.serve<int, int>(
      [&](const int& v, const devtap::tap_info& info) {
        const int now = ++inside;
        if (now > most) most = now;
        seqs[static_cast<std::size_t>(info.device.id())].push_back(info.sequence);
        unstamped += !info.stamped;
        --inside;
        return v;
      },
      devtap::shared);
  auto point = rx.attach<int>([](const int&) {}, devtap::shared);
  std::vector<std::future<int>> works;
  for (auto* dev : cpus.cpu_devices())
    works.push_back(dev->submit([&](devtap::cpu_context& ctx) {
      int bad = 0;
      for (int i = 0; i < 200; ++i) {
        ctx.tap(point, i);
        bad += ctx.call(h, i) != i;
      }
      return bad;
    }));
  for (auto& w : works) CHECK(w.get() == 0);
  rx.close();
  CHECK(most == 1);
  CHECK(unstamped == 0);
  for (std::size_t dv = 0; dv < 3; ++dv) {
    REQUIRE(seqs[dv].size() == 200);
    for (std::size_t i = 0; i < 200; ++i) CHECK(seqs[dv][i] == 2 * i + 1);
  }
}

TEST_CASE("stamped: taps, scopes and calls from 4 threads of one device: the recording's numbers are 0..n-1, no gap") {
  watchdog dog("stamped gapless", 60s);
  devtap_test::temp_file rec("stamped-gapless.devtap"), trace("stamped-gapless.json");
  devtap::cpu_client cpus(1);
  std::uint64_t handled = 0;
  std::uint32_t call_id = 0, tap_id = 0;
  constexpr int threads = 4, rounds = 300;
  {
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .trace_file = trace.path, .record_file = rec.path});
    auto point = rx.attach<int>([](const int&) {}, "ints");
    auto h = rx.serve<int, int>([&](const int& v) { ++handled; return v; }, "asker");
    call_id = h.id;
    tap_id = point.id;
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < rounds; ++i) {
          devtap::scope_guard g(out, "s");  // begin + end: 2 numbers
          out.tap(point, i);
          if (*out.call(h, t * 1000 + i) != t * 1000 + i) ++bad;
        }
      });
    for (auto& th : ts) th.join();
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 50; ++i) {
        ctx.tap(point, i);
        CHECK(ctx.call(h, i) == i);
      }
    });
    rx.close();
    CHECK(bad == 0);
  }
  CHECK(handled == threads * rounds + 50);
  d::recording_reader file(rec.path);
  CHECK(file.timestamps());
  std::vector<std::uint64_t> seqs;
  std::uint64_t calls = 0, taps = 0, unstamped = 0, other = 0;
  file.for_each([&](const d::recorded_entry& e) {
    if (e.is_line || e.is_marker) return;
    if (!e.stamp.stamped) ++unstamped;
    seqs.push_back(e.stamp.sequence);
    if (e.id == call_id) {
      ++calls;
      CHECK(e.bytes == sizeof(d::call_request) + sizeof(int));  // the stamp is not in the payload
    } else if (e.id == tap_id) {
      ++taps;
    } else {
      ++other;
    }
  });
  CHECK(unstamped == 0);
  CHECK(calls == threads * rounds + 50);
  CHECK(taps == threads * rounds + 50);
  CHECK(other == 2 * threads * rounds);
  std::sort(seqs.begin(), seqs.end());
  REQUIRE(seqs.size() == 4 * threads * rounds + 100);
  std::uint64_t gaps = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) gaps += seqs[i] != i;
  CHECK(gaps == 0);
  // replay: the tap point's values come back; the call point is listed
  devtap::replay rp(rec.path);
  std::uint64_t replayed = 0;
  rp.attach<int>("ints", [&](const int&) { ++replayed; });
  const auto stats = rp.run();
  CHECK(replayed == threads * rounds + 50);
  CHECK(stats.records == seqs.size());
  CHECK(stats.undecodable == 0);
}

TEST_CASE("stamped: calls from host threads racing close(): every caller returns, answered or closed") {
  watchdog dog("stamped close race", 60s);
  quiet_log quiet;
  for (int round = 0; round < 20; ++round) {
    devtap::cpu_client cpus(2);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2048,
                         .close_timeout = std::chrono::milliseconds(round % 3 == 0 ? 0 : 50), .timestamps = true});
    // Owned by the handler: a reader close() gave up on may still be inside it after this round.
    auto answered = std::make_shared<std::atomic<std::uint64_t>>(0);
    auto h = rx.serve<int, int>([answered, round](const int& v, const devtap::tap_info& info) {
      if (round % 4 == 1 && v % 7 == 0) std::this_thread::sleep_for(2ms);
      (void)info;
      ++*answered;
      return v;
    });
    auto point = rx.attach<int>([](const int&) {});
    std::vector<std::thread> ts;
    std::atomic<int> wrong{0}, ok{0}, closed{0};
    for (int t = 0; t < 6; ++t)
      ts.emplace_back([&, t] {
        const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[static_cast<std::size_t>(t % 2)]);
        for (int i = 0; i < 400; ++i) {
          try {
            out.tap(point, i);
          } catch (const std::exception&) {
          }
          const auto r = out.call(h, i);
          if (r.ok()) {
            ++ok;
            if (*r != i) ++wrong;
          } else if (r.error() == devtap::call_errc::closed) {
            ++closed;
          } else {
            ++wrong;
          }
        }
      });
    std::this_thread::sleep_for(std::chrono::milliseconds(round % 5));
    try {
      rx.close();
    } catch (const devtap::tap_error&) {
    } catch (const devtap::timeout_error&) {  // close_timeout: documented
    } catch (const std::exception& e) {
      FAIL_CHECK("close() threw " << typeid(e).name() << ": " << e.what());
    }
    for (auto& th : ts) th.join();
    CHECK(wrong == 0);
    CHECK(ok + closed == 6 * 400);
  }
}

TEST_CASE("stamped: close_timeout fires while a stamped call waits on a stuck handler; the caller fails closed") {
  watchdog dog("stamped close_timeout", 30s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .close_timeout = 100ms, .timestamps = true});
  // Owned by the handler: the reader close() gave up on may still run it after this test's scope.
  auto release = std::make_shared<std::atomic<bool>>(false);
  auto in_handler = std::make_shared<std::latch>(1);
  auto h = rx.serve<int, int>([release, in_handler](const int& v, const devtap::tap_info&) {
    if (v == 0) {
      in_handler->count_down();
      while (!*release) std::this_thread::sleep_for(1ms);
    }
    return v;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  auto first = std::async(std::launch::async, [&] { return out.call(h, 0); });
  in_handler->wait();
  auto second = std::async(std::launch::async, [&] { return out.call(h, 1); });
  std::this_thread::sleep_for(50ms);
  CHECK_THROWS_AS(rx.close(), devtap::timeout_error);  // the handler is stuck past close_timeout
  REQUIRE(second.wait_for(5s) == std::future_status::ready);
  CHECK(second.get().error() == devtap::call_errc::closed);
  *release = true;
  REQUIRE(first.wait_for(5s) == std::future_status::ready);
  const auto r = first.get();
  CHECK((r.error() == devtap::call_errc::closed || (r.ok() && *r == 0)));
}

TEST_CASE("stamped: too_large names the largest request a call can send, with and without timestamps") {
  for (const bool stamps : {false, true}) {
    INFO("timestamps " << stamps);
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .timestamps = stamps});
    auto h = rx.serve<blob, std::uint64_t>([](const blob& b) { return std::uint64_t{b.bytes.size()}; });
    std::vector<std::uint8_t> data(8192, 1);
    std::size_t largest_sent = 0;  // the largest encoded request answered
    bool refused = false;
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (std::size_t n = 3900; n < 4096 && !refused; ++n) {
        try {
          ctx.call(h, blob{std::span<const std::uint8_t>(data.data(), n)});
          largest_sent = d::encoded_size(blob{std::span<const std::uint8_t>(data.data(), n)});
        } catch (const devtap::call_error& e) {
          refused = true;
          CHECK(e.code() == devtap::call_errc::too_large);
          INFO(e.what());
          CHECK(std::string(e.what()).find("(" + std::to_string(largest_sent) + " bytes)") != std::string::npos);
        }
      }
    });
    rx.close();
    CHECK(refused);
  }
}

TEST_CASE("stamped: a generic handler `(const Req&, const auto&)` is given the device, as a generic consumer is") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  // Its body uses the device: instantiating it with a tap_info would not compile.
  auto h = rx.serve<int, int>([](const int& q, const auto& dev) { return q + 10 * static_cast<int>(dev.id()); });
  CHECK(*rx.outfeed(*cpus.cpu_devices()[0]).call(h, 1) == 1);
  CHECK(*rx.outfeed(*cpus.cpu_devices()[1]).call(h, 1) == 11);
  rx.close();
}

TEST_CASE("stamped: prints, scopes, taps and calls of one device share one gapless count") {
  devtap_test::watchdog dog("print gapless", 60s);
  devtap_test::temp_file rec("print-calls.devtap");
  devtap::cpu_client cpus(1);
  constexpr int threads = 3, rounds = 200;
  std::mutex m;
  std::vector<std::uint64_t> live;  // numbers seen live by handler, tap consumer and scope consumer
  std::size_t lines = 0;
  std::uint32_t call_id = 0;
  {
    devtap::receiver rx({.devices = {cpus.local_devices()[0]}, .timestamps = true, .record_file = rec.path});
    auto ch = devtap::attach_print(rx, {.sink = [&](std::string_view) { std::lock_guard l(m); ++lines; }});
    auto point = rx.attach<int>([&](const int&, const devtap::tap_info& i) { std::lock_guard l(m); live.push_back(i.sequence); });
    rx.attach<devtap::scope_event>([&](const devtap::scope_event&, const devtap::tap_info& i) {
      std::lock_guard l(m);
      live.push_back(i.sequence);
    });
    auto h = rx.serve<int, int>([&](const int& v, const devtap::tap_info& i) {
      std::lock_guard l(m);
      live.push_back(i.sequence);
      return v;
    }, "asker");
    call_id = h.id;
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
    std::vector<std::thread> ts;
    std::atomic<int> bad{0};
    for (int t = 0; t < threads; ++t)
      ts.emplace_back([&, t] {
        devtap::printer p = ch.on(out);
        for (int i = 0; i < rounds; ++i) {
          devtap::scope_guard g(out, "s");
          devtap::print<"thread {} round {}">(p, t, i);
          out.tap(point, i);
          if (*out.call(h, i) != i) ++bad;
        }
      });
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      devtap::printer p(ctx, ch);
      for (int i = 0; i < rounds; ++i) {
        devtap::print<"work {}">(p, i);
        if (ctx.call(h, i) != i) ++bad;
      }
    });
    for (auto& th : ts) th.join();
    rx.close();
    CHECK(bad == 0);
  }
  const std::size_t expected = threads * rounds * 5 + 2 * rounds;
  CHECK(lines == threads * rounds + rounds);
  CHECK(live.size() == expected - lines);
  d::recording_reader file(rec.path);
  std::vector<std::uint64_t> seqs;
  std::size_t calls = 0, unstamped = 0;
  file.for_each([&](const d::recorded_entry& e) {
    if (e.is_line || e.is_marker) return;
    unstamped += !e.stamp.stamped;
    calls += e.id == call_id;
    seqs.push_back(e.stamp.sequence);
  });
  CHECK(unstamped == 0);
  CHECK(calls == threads * rounds + rounds);
  std::sort(seqs.begin(), seqs.end());
  REQUIRE(seqs.size() == expected);
  std::size_t gaps = 0;
  for (std::size_t i = 0; i < seqs.size(); ++i) gaps += seqs[i] != i;
  CHECK(gaps == 0);
}
