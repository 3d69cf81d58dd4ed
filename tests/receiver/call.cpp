// devtap::call on cpu devices: answers reach the caller that asked, in ring order with its taps,
// from many threads and devices at once; and every way a call can fail fails clearly, never hangs.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include "../hostile.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <future>
#include <optional>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <latch>
#include <mutex>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {
struct query {
  std::int32_t step;
  float loss;
};
struct answer {
  float lr;
  bool stop;
};
struct ticket {
  std::uint32_t caller;
  std::uint32_t seq;
};
struct with_values {
  std::int32_t scale;
  std::span<const float> values;
};

std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

using devtap_test::eventually;
}  // namespace

TEST_CASE("a cpu device's call gets its handler's answer, after every tap it made before the call") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .name = "train"});
  std::vector<std::atomic<int>> taps_seen(2);
  auto progress = rx.attach<int>([&](const int&, const devtap::device& d) { taps_seen[static_cast<std::size_t>(d.id())]++; });
  std::atomic<int> overtaken{0}, wrong_answers{0};  // (Catch2's CHECK is not for other threads)
  auto ask = rx.serve<query, answer>([&](const query& q, const devtap::device& d) {
    // Same reader thread as the consumer: every tap the caller made before this call was delivered.
    if (taps_seen[static_cast<std::size_t>(d.id())].load() != q.step) overtaken++;
    return answer{0.5f / static_cast<float>(q.step + 1), q.loss < 1e-3f};
  });
  auto work = [&](devtap::cpu_context& ctx) {
    int steps = 0;
    for (int step = 0; step < 200; ++step) {
      ctx.tap(progress, step);
      const answer a = ctx.call(ask, query{step + 1, step == 150 ? 0.0f : 1.0f});
      if (a.lr != 0.5f / static_cast<float>(step + 2)) wrong_answers++;
      ++steps;
      if (a.stop) break;  // the device changes course on the answer
    }
    return steps;
  };
  auto f0 = cpus.cpu_devices()[0]->submit(work);
  auto f1 = cpus.cpu_devices()[1]->submit(work);
  CHECK(f0.get() == 151);
  CHECK(f1.get() == 151);
  CHECK(overtaken == 0);
  CHECK(wrong_answers == 0);
  rx.close();
  CHECK(rx.stats().total().records == 2 * (151 + 151));  // taps and calls
  CHECK(rx.stats().total().type_mismatches == 0);
}

TEST_CASE("many threads of many devices call at once, and each gets its own answer") {
  constexpr int devices = 4, threads_per_device = 4, calls = 1500;
  devtap::cpu_client cpus(devices);
  devtap::receiver rx({.devices = all(cpus)});
  auto echo = rx.serve<ticket, ticket>([](const ticket& t) { return ticket{t.caller * 7, t.seq + 1}; });
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int d = 0; d < devices; ++d) {
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[static_cast<std::size_t>(d)]);
    for (int t = 0; t < threads_per_device; ++t)
      threads.emplace_back([&, out, caller = static_cast<std::uint32_t>(d * 100 + t)] {
        for (std::uint32_t i = 0; i < calls; ++i) {
          const devtap::call_result<ticket> r = out.call(echo, ticket{caller, i});
          if (!r.ok() || r->caller != caller * 7 || r->seq != i + 1) wrong++;
        }
      });
  }
  // The devices' own work calls too, through ctx.call, at the same time.
  std::vector<std::future<int>> works;
  for (int d = 0; d < devices; ++d)
    works.push_back(cpus.cpu_devices()[static_cast<std::size_t>(d)]->submit([&, d](devtap::cpu_context& ctx) {
      int bad = 0;
      for (std::uint32_t i = 0; i < calls; ++i) {
        const ticket r = ctx.call(echo, ticket{static_cast<std::uint32_t>(1000 + d), i});
        bad += r.caller != static_cast<std::uint32_t>(1000 + d) * 7 || r.seq != i + 1;
      }
      return bad;
    }));
  for (auto& t : threads) t.join();
  for (auto& w : works) CHECK(w.get() == 0);
  CHECK(wrong == 0);
  rx.close();
  CHECK(rx.stats().total().records == std::uint64_t{devices} * (threads_per_device + 1) * calls);
}

TEST_CASE("more callers than reply slots wait for a slot, are counted, and all get their answers") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::atomic<bool> go{false};  // the first call is held until callers wait for a slot, however late they start
  auto slow = rx.serve<ticket, ticket>([&](const ticket& t) {
    while (!go) std::this_thread::sleep_for(100us);
    std::this_thread::sleep_for(200us);
    return ticket{t.caller, t.seq * 2};
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  constexpr std::uint32_t callers = devtap::detail::reply_slot_count + 36;
  std::atomic<int> wrong{0};
  std::latch start(callers);
  std::vector<std::thread> threads;
  for (std::uint32_t c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      start.arrive_and_wait();
      for (std::uint32_t i = 0; i < 5; ++i) {
        auto r = out.call(slow, ticket{c, i});
        if (!r || r->caller != c || r->seq != i * 2) wrong++;
      }
    });
  CHECK(eventually([&] { return rx.stats().devices[0].call_slot_waits > 0; }, 10s));
  go = true;
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  rx.close();
}

TEST_CASE("a request may carry a span; the handler reads it in place") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto sum = rx.serve<with_values, double>(
      [](const with_values& v) { return v.scale * std::accumulate(v.values.begin(), v.values.end(), 0.0); });
  const std::vector<float> values{1.5f, 2.5f, 3.0f};
  const double got = cpus.cpu_devices()[0]->run(
      [&](devtap::cpu_context& ctx) { return ctx.call(sum, with_values{2, std::span<const float>(values)}); });
  CHECK(got == 14.0);
  const double empty = cpus.cpu_devices()[0]->run(
      [&](devtap::cpu_context& ctx) { return ctx.call(sum, with_values{2, {}}); });
  CHECK(empty == 0.0);
  rx.close();
}

TEST_CASE("a handler that throws fails that call with its message; later calls are answered; close() reports it") {
  devtap::cpu_client cpus(1);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::receiver rx({.devices = all(cpus), .name = "solver"});
  auto check = rx.serve<int, int>(
      [](const int& v) {
        if (v < 0) throw std::domain_error("negative step " + std::to_string(v));
        return v * 10;
      },
      "check");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    CHECK(ctx.call(check, 4) == 40);
    try {
      ctx.call(check, -3);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::handler_failed);
      CHECK(std::string(e.what()) == "devtap: call on device 'cpu:0': the handler threw: negative step -3");
    }
    CHECK(ctx.call(check, 5) == 50);
  });
  try {
    rx.close();
    FAIL("close() did not report the handler's failure");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(e.failures()[0].consumer == "check");
    CHECK(e.failures()[0].message == "negative step -3");
  }
  devtap::set_log_sink({});
  CHECK(rx.stats().total().consumer_errors == 1);
}

TEST_CASE("a call never hangs: close() gives up on a device blocked in a call, and the call fails") {
  devtap::cpu_client cpus(1);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  // Shared with the handler: the reader thread close() gave up on outlives this test's stack.
  struct flags {
    std::atomic<bool> release{false}, in_handler{false};
  };
  const auto f = std::make_shared<flags>();
  std::atomic<bool>& release = f->release;
  std::atomic<bool>& in_handler = f->in_handler;
  std::optional<devtap::receiver> rx(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  auto stuck = rx->serve<int, int>([f](const int& v) {
    f->in_handler = true;
    while (!f->release) std::this_thread::sleep_for(1ms);
    return v;
  });
  auto work = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(stuck, 1);
      return devtap::call_errc::none;
    } catch (const devtap::call_error& e) {
      return e.code();
    }
  });
  REQUIRE(eventually([&] { return in_handler.load(); }));
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  // The caller was released by the close, while the handler still runs.
  REQUIRE(work.wait_for(5s) == std::future_status::ready);
  CHECK(work.get() == devtap::call_errc::closed);
  release = true;
  rx.reset();
  devtap::set_log_sink({});
}

TEST_CASE("a call while the receiver closes normally is answered, and a call after it fails") {
  devtap::cpu_client cpus(1);
  std::optional<devtap::receiver> rx(devtap::receiver_options{.devices = all(cpus)});
  auto twice = rx->serve<int, int>([](const int& v) { return 2 * v; });
  std::atomic<int> answered{0};
  auto work = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 2000; ++i) answered += ctx.call(twice, i) == 2 * i;
  });
  rx->close();  // waits for the work queued before it, whose calls it answers
  work.get();
  CHECK(answered == 2000);
  const devtap::outfeed stale = rx->outfeed(*cpus.cpu_devices()[0]);
  const auto r = stale.call(twice, 1);
  CHECK(r.error() == devtap::call_errc::closed);
  rx.reset();
  // No receiver attached any more: the device's call says so, as its taps do.
  CHECK_THROWS_AS(cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { return ctx.call(twice, 1); }),
                  devtap::outfeed_error);
}

TEST_CASE("a member pointer serves as a handler, and as a consumer") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  // std::invocable accepts both; they used to fail to compile inside devtap (called as fn(request)).
  auto step_of = rx.serve<query, std::int32_t>(&query::step);
  struct counter {
    std::int32_t value;
    std::int32_t twice() const { return 2 * value; }
  };
  auto twice = rx.serve<counter, std::int32_t>(&counter::twice);
  std::vector<float> losses;
  auto loss = rx.attach<query>(std::function<void(const query&)>([&](const query& q) { losses.push_back(q.loss); }));
  auto seen = rx.attach<counter>(&counter::twice);  // called, its result ignored
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  const auto s = out.call(step_of, query{41, 0.5f});
  REQUIRE(s.ok());
  CHECK(*s == 41);
  const auto t = out.call(twice, counter{21});
  REQUIRE(t.ok());
  CHECK(*t == 42);
  out.tap(loss, query{1, 2.5f});
  out.tap(seen, counter{3});
  rx.close();
  CHECK(losses == std::vector<float>{2.5f});
  CHECK(rx.stats().total().records == 4);
}

TEST_CASE("calls through a point of no receiver, of another receiver, or of other types fail clearly") {
  devtap::cpu_client cpus(2);
  devtap_test::captured_log log;
  devtap::receiver rx({.devices = {cpus.cpu_devices()[0]}});
  devtap::receiver other({.devices = {cpus.cpu_devices()[1]}});
  auto ask = rx.serve<query, answer>([](const query& q) { return answer{static_cast<float>(q.step), false}; });
  auto elsewhere = other.serve<query, answer>([](const query&) { return answer{}; });
  auto consumer = rx.attach<query>([](const query&) {});
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);

  CHECK(out.call(devtap::call_point<query, answer>{}, query{}).error() == devtap::call_errc::no_handler);
  CHECK(out.call(elsewhere, query{}).error() == devtap::call_errc::no_handler);
  // The same handler, asked for another reply type (a point made by hand): refused by fingerprint.
  const devtap::call_point<query, double> wrong_reply{ask.id, devtap::call_fingerprint_v<query, double>, ask.receiver};
  CHECK(out.call(wrong_reply, query{}).error() == devtap::call_errc::type_mismatch);
  // Its fields copied as they are into other types: the call sends its own types' fingerprint, so
  // it is refused too (it was answered ok(): the ticket's bytes read as a query, and 4 bytes of the
  // 8-byte answer read as a float).
  // (A request of the same size as query's: one of another size was refused by its size already.)
  static_assert(sizeof(ticket) == sizeof(query));
  const devtap::call_point<ticket, float> forged{ask.id, ask.fingerprint, ask.receiver};
  CHECK(out.call(forged, ticket{7, 0}).error() == devtap::call_errc::type_mismatch);
  // A consumer's id used as a handler's.
  const devtap::call_point<query, answer> not_a_handler{consumer.id | devtap::detail::call_id_flag,
                                                        devtap::call_fingerprint_v<query, answer>, consumer.receiver};
  CHECK(out.call(not_a_handler, query{}).error() == devtap::call_errc::type_mismatch);
  // An id no handler has.
  const devtap::call_point<query, answer> unknown{ask.id + 40, ask.fingerprint, ask.receiver};
  CHECK(out.call(unknown, query{}).error() == devtap::call_errc::no_handler);
  // And the right point still works.
  auto r = out.call(ask, query{7, 0});
  REQUIRE(r.ok());
  CHECK(r->lr == 7.0f);
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(elsewhere, query{});
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::no_handler);
      CHECK(std::string(e.what()).find("device 'cpu:0'") != std::string::npos);
    }
  });
  try {
    rx.close();
    FAIL("close() did not report the refused calls");
  } catch (const devtap::tap_error& e) {
    std::vector<std::string> lines;
    for (const auto& f : e.failures()) lines.push_back(f.consumer + ": " + f.message);
    CHECK(lines == std::vector<std::string>{
                       "#41: 1 call(s) for unknown handler id 41 refused (answered call_errc::no_handler)",
                       "handler#1: 2 call(s) whose types do not match the handler's refused (answered call_errc::type_mismatch)",
                       "consumer#2: 1 call(s) whose types do not match the handler's refused (answered call_errc::type_mismatch)"});
  }
  other.close();
  CHECK(rx.stats().total().type_mismatches == 3);
  CHECK(rx.stats().total().unknown_ids == 1);
  // The log names the handler's id without the call flag, as close() does.
  const auto errors = log.errors();
  CHECK(std::count(errors.begin(), errors.end(),
                   "receiver 'receiver': call for unknown handler id 41 on cpu:0 (refused; logged once)") == 1);
}

TEST_CASE("a handler that calls into its own device fails at once instead of waiting for itself") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  auto inner = rx.serve<int, int>([](const int& v) { return v; });
  std::atomic<int> nested{-1};
  std::string flush_error;
  auto outer = rx.serve<int, int>([&](const int& v) {
    nested = static_cast<int>(out.call(inner, v).error());  // only this very thread could answer it
    try {
      rx.flush();
    } catch (const std::logic_error& e) {
      flush_error = e.what();
    }
    return v + 1;
  });
  CHECK(out.call(outer, 5).value() == 6);
  CHECK(nested == static_cast<int>(devtap::call_errc::reentrant));
  CHECK(flush_error.find("flush() called from a consumer of this receiver") != std::string::npos);
  rx.close();
}

TEST_CASE("a consumer that taps into its own full ring gets an error, not a deadlock") {
  devtap::cpu_client cpus(1);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024});
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::atomic<int> written{0};
  std::string error;
  devtap::tap_point<std::array<std::uint8_t, 100>> sink{};
  sink = rx.attach<std::array<std::uint8_t, 100>>([](const std::array<std::uint8_t, 100>&) {});
  auto trigger = rx.attach<int>([&](const int&) {
    try {
      for (int i = 0; i < 100; ++i, ++written) out.tap(sink, std::array<std::uint8_t, 100>{});
    } catch (const devtap::outfeed_error& e) {
      error = e.what();
    }
  });
  out.tap(trigger, 1);
  rx.flush();
  CHECK(written > 0);
  CHECK(written < 100);  // a 1 KiB ring holds fewer than 100 records of 124 bytes
  CHECK(error == "devtap: a consumer or handler tapped into the full ring of device 'cpu:0' of its own receiver: it "
                 "would wait for space that only the receiver's readers free, and they may be waiting for it (nothing "
                 "was written; tap from another thread, or use overflow_policy::drop)");
  rx.close();
  devtap::set_log_sink({});
}

TEST_CASE("under overflow_policy::drop a call into a full ring fails at once, counted as a drop") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024, .overflow = devtap::overflow_policy::drop});
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::latch entered(1);
  std::atomic<bool> release{false};
  auto block = rx.attach<int>([&](const int&) {
    entered.count_down();
    while (!release) std::this_thread::sleep_for(1ms);
  });
  auto twice = rx.serve<int, int>([](const int& v) { return 2 * v; });
  out.tap(block, 0);
  entered.wait();  // the reader is held in the consumer: nothing is freed
  for (int i = 0; i < 100; ++i) out.tap(block, i);  // fills the ring; the rest is dropped
  const auto dropped = rx.stats().devices[0].dropped_records;
  CHECK(dropped > 0);
  CHECK(out.call(twice, 3).error() == devtap::call_errc::ring_full);
  CHECK(rx.stats().devices[0].dropped_records == dropped + 1);
  release = true;
  rx.flush();
  CHECK(out.call(twice, 4).value() == 8);  // space again once the reader moved on
  rx.close();
}

TEST_CASE("call_result says why there is no answer") {
  devtap::call_result<int> none;
  CHECK_FALSE(none.ok());
  CHECK_FALSE(static_cast<bool>(none));
  CHECK(none.error() == devtap::call_errc::closed);
  CHECK(*none == 0);
  devtap::call_result<int> ok(5);
  CHECK(ok.ok());
  CHECK(*ok == 5);
  CHECK(ok.error() == devtap::call_errc::none);
}

TEST_CASE("a handler that calls another device of its receiver is refused: readers waiting on each other would never move") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  const devtap::outfeed to_cpu1 = rx.outfeed(*cpus.cpu_devices()[1]);
  auto plain = rx.serve<int, int>([](const int& v) { return v; });
  std::atomic<int> nested{-1};
  auto across = rx.serve<int, int>(
      [&](const int& v) {
        nested = static_cast<int>(to_cpu1.call(plain, v).error());
        return v;
      },
      devtap::shared);
  CHECK(rx.outfeed(*cpus.cpu_devices()[0]).call(across, 3).value() == 3);
  CHECK(nested == static_cast<int>(devtap::call_errc::reentrant));
  // The same call from an ordinary thread is answered.
  CHECK(to_cpu1.call(plain, 4).value() == 4);
  rx.close();
}

TEST_CASE("a receiver destroyed from device work while another device's work waits in a call: the call fails, nothing freed is read") {
  devtap::cpu_client cpus(2);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  for (int round = 0; round < 20; ++round) {
    struct flags {
      std::atomic<bool> in_handler{false}, go{false};
    };
    const auto f = std::make_shared<flags>();
    std::optional<devtap::receiver> rx(devtap::receiver_options{.devices = all(cpus)});
    auto slow = rx->serve<int, int>([f](const int& v) {
      f->in_handler = true;
      while (!f->go) std::this_thread::yield();
      return v;
    });
    auto caller = cpus.cpu_devices()[1]->submit([&](devtap::cpu_context& ctx) {
      try {
        return ctx.call(slow, 1);
      } catch (const devtap::call_error& e) {
        return e.code() == devtap::call_errc::closed ? -1 : -2;
      }
    });
    while (!f->in_handler) std::this_thread::yield();
    cpus.cpu_devices()[0]->run([&] {
      rx.reset();  // from a device's own work: the receiver abandons its streams (ASan watches the caller)
      f->go = true;
    });
    const int r = caller.get();
    CHECK((r == 1 || r == -1));
  }
  devtap::set_log_sink({});
}
