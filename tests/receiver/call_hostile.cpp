// Hostile tests of devtap::call on cpu devices: timeouts and closes that race callers, handlers
// that throw, stall or call back into their receiver, slot exhaustion, size boundaries, floods.
// Every test states the documented rule it checks (docs/call.md unless said otherwise); a test
// whose rule is not written down says "undocumented". A hang is caught by a watchdog that aborts
// the run with the test's name, instead of hanging it.
// Two defects were found this way and fixed: a host caller woken after its receiver was destroyed
// touched a freed ring (now pinned: detail::ring_pin), and a hand-made call id carrying the stamp
// flag had its request read as a stamp and answered in another caller's slot.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include "../cpu_starver.hpp"
#include "../hostile.hpp"
#include "../temp_file.hpp"
#include "../thread_failure.hpp"
#include <fstream>
#include <sstream>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

struct blob {
  std::span<const std::uint8_t> bytes;
};
struct blob_sum {
  std::uint64_t size;
  std::uint64_t sum;
};
struct big_reply {
  std::array<std::uint8_t, devtap::detail::max_reply_bytes> b;
};
static_assert(sizeof(big_reply) == 224);
struct tiny_reply {
  std::uint8_t v;
};
struct flag_req {
  bool on;
  std::int32_t n;
};

std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

using devtap_test::eventually;
using devtap_test::one_cpu;
using devtap_test::quiet_log;
using devtap_test::watchdog;

std::string pattern(std::size_t n) {
  std::string s(n, ' ');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + i % 26);
  return s;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sizes

// docs/call.md: "the reply is a trivially copyable, default-constructible value of at most
// devtap::detail::max_reply_bytes (224) bytes" -- the largest and the smallest replies round-trip
// byte for byte, also in a slot that held a long failure message just before.
TEST_CASE("hostile call: replies of 224 bytes and of 1 byte come back byte for byte, after a long error in the same slot") {
  watchdog dog("reply sizes", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto big = rx.serve<std::uint32_t, big_reply>([](const std::uint32_t& seed) {
    if (seed == 0) throw std::runtime_error(pattern(1000));
    big_reply r;
    for (std::size_t i = 0; i < r.b.size(); ++i) r.b[i] = static_cast<std::uint8_t>(seed * 31 + i * 7);
    return r;
  });
  auto tiny = rx.serve<std::uint32_t, tiny_reply>([](const std::uint32_t& v) { return tiny_reply{static_cast<std::uint8_t>(v ^ 0x5a)}; });
  auto yes = rx.serve<std::uint32_t, bool>([](const std::uint32_t& v) { return v % 2 == 1; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  for (std::uint32_t round = 0; round < 50; ++round) {
    CHECK(out.call(big, 0u).error() == devtap::call_errc::handler_failed);  // fills the slot with 224 message bytes
    const auto r = out.call(big, round + 1);
    REQUIRE(r.ok());
    bool same = true;
    for (std::size_t i = 0; i < r->b.size(); ++i) same = same && r->b[i] == static_cast<std::uint8_t>((round + 1) * 31 + i * 7);
    CHECK(same);
    const auto t = out.call(tiny, round);
    REQUIRE(t.ok());
    CHECK(t->v == static_cast<std::uint8_t>(round ^ 0x5a));
    const auto y = out.call(yes, round);
    REQUIRE(y.ok());
    CHECK(*y == (round % 2 == 1));
  }
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);  // the 50 failures
}

// docs/call.md: "A request larger than the ring takes: call_errc::too_large", and
// layout.hpp: "Largest record (header included) a ring accepts: the whole ring".
TEST_CASE("hostile call: a request exactly as large as the ring takes is answered; one byte more is too_large") {
  watchdog dog("request size limit", 10s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096});
  auto sum = rx.serve<blob, blob_sum>([](const blob& b) {
    blob_sum s{b.bytes.size(), 0};
    for (auto v : b.bytes) s.sum += v;
    return s;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  const std::uint64_t capacity = out.ring().capacity;
  REQUIRE(capacity == 4096);
  std::size_t largest = 0;
  std::vector<std::uint8_t> data(capacity + 16);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint8_t>(i * 13 + 1);
  for (std::size_t n = 0; n <= capacity; ++n) {
    const blob b{std::span<const std::uint8_t>(data.data(), n)};
    const std::uint64_t bytes =
        devtap::detail::record_bytes(sizeof(devtap::detail::call_request) + devtap::detail::encoded_size(b));
    if (bytes <= devtap::detail::max_record_bytes(capacity)) largest = n;
  }
  REQUIRE(largest > 4000);
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, largest - 1, largest}) {
    const auto r = out.call(sum, blob{std::span<const std::uint8_t>(data.data(), n)});
    INFO("n = " << n);
    REQUIRE(r.ok());
    std::uint64_t expect = 0;
    for (std::size_t i = 0; i < n; ++i) expect += data[i];
    CHECK(r->size == n);
    CHECK(r->sum == expect);
  }
  CHECK(out.call(sum, blob{std::span<const std::uint8_t>(data.data(), largest + 1)}).error() == devtap::call_errc::too_large);
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(sum, blob{std::span<const std::uint8_t>(data.data(), largest + 1)});
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::too_large);
    }
    CHECK(ctx.call(sum, blob{std::span<const std::uint8_t>(data.data(), largest)}).size == largest);
  });
  rx.close();
  CHECK(rx.stats().total().records == 5);  // 5 answered; the 2 too_large were never sent
}

// docs/call.md: "ctx.call throws devtap::call_error with code() == call_errc::handler_failed and the
// handler's message (cut to 224 bytes in the slot) ... the failure is also kept for close(), which
// throws tap_error listing it".
TEST_CASE("hostile call: handler messages of 0, 1, 223, 224, 225 and 1000 bytes are cut at 224 for the caller, whole for close()") {
  watchdog dog("message sizes", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .name = "msgs"});
  auto fail = rx.serve<std::uint32_t, int>([](const std::uint32_t& n) -> int { throw std::runtime_error(pattern(n)); }, "fail");
  const std::vector<std::uint32_t> sizes{0, 1, 223, 224, 225, 1000};
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (std::uint32_t n : sizes) {
      INFO("message of " << n << " bytes");
      try {
        ctx.call(fail, n);
        FAIL("no call_error");
      } catch (const devtap::call_error& e) {
        CHECK(e.code() == devtap::call_errc::handler_failed);
        CHECK(std::string(e.what()) == "devtap: call on device 'cpu:0': the handler threw: " + pattern(std::min<std::uint32_t>(n, 224)));
      }
    }
  });
  try {
    rx.close();
    FAIL("close() did not report the failures");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == sizes.size());
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      CHECK(e.failures()[i].consumer == "fail");
      CHECK(e.failures()[i].message == pattern(sizes[i]));
    }
  }
}

// Undocumented (call.md speaks of "the handler's message"): a handler that throws something that
// is not a std::exception still fails only that call, and close() still reports it.
TEST_CASE("hostile call: a handler that throws a non-std exception fails that call clearly; the next is answered") {
  watchdog dog("non-std throw", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto odd = rx.serve<int, int>([](const int& v) -> int {
    if (v < 0) throw 42;
    return v + 1;
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(odd, -1);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::handler_failed);
      CHECK(std::string(e.what()).find("unknown exception") != std::string::npos);
    }
    CHECK(ctx.call(odd, 1) == 2);
  });
  try {
    rx.close();
    FAIL("close() did not report the failure");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(e.failures()[0].message == "unknown exception");
  }
}

// A user exception whose what() is null: the caller and close() say so (strlen(nullptr) on the
// reader before; helper report of session 35).
struct no_message : std::exception {
  const char* what() const noexcept override { return nullptr; }
};

TEST_CASE("hostile call: a handler's exception whose what() is null is reported as one with no message") {
  watchdog dog("null what", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto odd = rx.serve<int, int>([](const int& v) -> int {
    if (v <= 1) throw no_message();
    return v;
  });
  const auto count = rx.attach<short>([](const short& v) {
    if (v == 0) throw no_message();
  }, "count");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int v : {0, 1}) {
      try {
        ctx.call(odd, v);
        FAIL("no call_error");
      } catch (const devtap::call_error& e) {
        CHECK(e.code() == devtap::call_errc::handler_failed);
        CHECK_THAT(e.what(), Catch::Contains("an exception with no message"));
      }
    }
    CHECK(ctx.call(odd, 2) == 2);
    ctx.tap(count, short{0});
  });
  try {
    rx.close();
    FAIL("close() did not report the failures");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 3);
    for (const auto& f : e.failures()) CHECK(f.message == "an exception with no message");
  }
}

// docs/call.md: "a handler that takes or returns other types than the caller's point says so
// (call_errc::type_mismatch), it never decodes the bytes as something else" and "counted in
// type_mismatches, reported by close()". A request of the right type whose bool is neither 0 nor 1
// does not decode as a Req.
TEST_CASE("hostile call: a request whose bytes do not decode as the handler's Req is refused as type_mismatch, counted, reported") {
  watchdog dog("undecodable request", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::atomic<int> ran{0};
  auto h = rx.serve<flag_req, int>([&](const flag_req& r) {
    ++ran;
    return r.n;
  });
  flag_req bad{};
  const unsigned char two = 2;
  std::memcpy(static_cast<void*>(&bad.on), &two, 1);
  bad.n = 9;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(h, bad);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::type_mismatch);
    }
    CHECK(ctx.call(h, flag_req{true, 5}) == 5);
  });
  CHECK(ran == 1);
  try {
    rx.close();
    FAIL("close() did not report the refused call");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 1);
    CHECK(e.failures()[0].message.find("type") != std::string::npos);
  }
  CHECK(rx.stats().total().type_mismatches == 1);
  CHECK(rx.stats().total().records == 1);
}

// ---------------------------------------------------------------------------------------------
// Handlers that call back into their receiver

// docs/call.md: "flush(), barrier() and close() from there throw logic_error as before", and "A
// handler that throws fails that call".
TEST_CASE("hostile call: a handler that calls close(), barrier() or flush() of its own receiver fails that call, and nothing hangs") {
  watchdog dog("handler closes", 15s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .name = "self"});
  auto h = rx.serve<int, int>([&](const int& what) -> int {
    if (what == 0) rx.close();
    else if (what == 1) rx.barrier();
    else if (what == 2) rx.flush();
    return what;
  });
  for (int what : {0, 1, 2}) {
    INFO("what = " << what);
    const auto r = rx.outfeed(*cpus.cpu_devices()[static_cast<std::size_t>(what % 2)]).call(h, what);
    CHECK(r.error() == devtap::call_errc::handler_failed);
  }
  CHECK(rx.outfeed(*cpus.cpu_devices()[0]).call(h, 7).value() == 7);  // the receiver is still open
  try {
    rx.close();
    FAIL("close() did not report the handler's failures");
  } catch (const devtap::tap_error& e) {
    CHECK(e.failures().size() == 3);
    for (const auto& f : e.failures()) CHECK(f.message.find("called from a consumer of this receiver") != std::string::npos);
  }
}

// Undocumented (a demanding user's expectation): a handler may serve() a new handler and attach a
// consumer on its own receiver; the new points work at once.
TEST_CASE("hostile call: a handler that serves a new handler of its own receiver: the new point answers") {
  watchdog dog("serve from handler", 10s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::optional<devtap::call_point<int, int>> made;
  std::mutex made_mutex;
  auto maker = rx.serve<int, int>([&](const int& v) {
    auto p = rx.serve<int, int>([v](const int& x) { return x * v; });
    std::lock_guard lock(made_mutex);
    made = p;
    return 1;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  REQUIRE(out.call(maker, 3).value() == 1);
  devtap::call_point<int, int> p;
  {
    std::lock_guard lock(made_mutex);
    REQUIRE(made);
    p = *made;
  }
  CHECK(out.call(p, 5).value() == 15);
  rx.close();
}

// docs/outfeed/receiver.hpp: the destructor "Closes if close() was not called; never throws". From a
// consumer it abandons the streams (receiver_impl.hpp). docs/call.md: "A call never hangs ... the call
// fails with call_errc::closed". Undocumented for a handler destroying its own receiver: the asking
// caller gets its answer or closed, the other device's waiting caller gets closed, nothing freed is read.
TEST_CASE("hostile call: a handler that destroys its own receiver while other callers wait") {
  watchdog dog("handler destroys receiver", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  for (int round = 0; round < 10; ++round) {
    struct shared_flags {
      std::atomic<bool> other_in{false}, go{false}, killed{false};
      std::unique_ptr<devtap::receiver> rx;
    };
    auto f = std::make_shared<shared_flags>();
    f->rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus)});
    auto slow = f->rx->serve<int, int>([f](const int& v) {
      f->other_in = true;
      while (!f->go) std::this_thread::yield();
      return v;
    });
    auto killer = f->rx->serve<int, int>([f](const int& v) {
      while (!f->other_in) std::this_thread::yield();
      f->rx.reset();  // from the reader of device 0, while device 1's caller waits in `slow`
      f->go = true;
      f->killed = true;
      return v;
    });
    auto code = [](auto&& fn) {
      try {
        return fn() >= 0 ? 0 : -5;
      } catch (const devtap::call_error& e) {
        return static_cast<int>(e.code());
      }
    };
    auto waiting = cpus.cpu_devices()[1]->submit([&](devtap::cpu_context& ctx) { return code([&] { return ctx.call(slow, 1); }); });
    auto asking = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) { return code([&] { return ctx.call(killer, 2); }); });
    REQUIRE(waiting.wait_for(5s) == std::future_status::ready);
    REQUIRE(asking.wait_for(5s) == std::future_status::ready);
    const int w = waiting.get(), a = asking.get();
    CHECK((w == 0 || w == static_cast<int>(devtap::call_errc::closed)));
    CHECK((a == 0 || a == static_cast<int>(devtap::call_errc::closed)));
    // No receiver any more: "After close(), ctx.call throws outfeed_error as a tap does".
    // The destructor runs on the reader: wait for it before the devices may go (test end).
    REQUIRE(eventually([&] { return f->killed.load(); }));
    CHECK_THROWS_AS(cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { return ctx.call(slow, 1); }), devtap::outfeed_error);
    f->go = true;
  }
}

// docs/call.md: "A handler or consumer that calls through any device of its own receiver ... gets
// call_errc::reentrant at once". A merged consumer (its helper thread) is such a consumer.
TEST_CASE("hostile call: a merged consumer that calls its own receiver gets reentrant, not a hang") {
  watchdog dog("merged consumer calls", 10s);
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = 1ms});
  auto h = rx.serve<int, int>([](const int& v) { return v; });
  const devtap::outfeed out0 = rx.outfeed(*cpus.cpu_devices()[0]);
  std::atomic<int> seen{0}, reentrant{0};
  auto p = rx.attach<int>(
      [&](const int& v) {
        ++seen;
        if (out0.call(h, v).error() == devtap::call_errc::reentrant) ++reentrant;
      },
      devtap::merged);
  for (int i = 0; i < 5; ++i) rx.outfeed(*cpus.cpu_devices()[static_cast<std::size_t>(i % 2)]).tap(p, i);
  REQUIRE(eventually([&] { return seen.load() == 5; }));  // delivered by the readers or the helper, before close()
  rx.close();
  CHECK(reentrant == 5);
}

// ---------------------------------------------------------------------------------------------
// Closes, destruction and timeouts racing callers

// docs/call.md: "Many threads of a device and many devices call at once ... When all of a device's
// slots are in use, a caller waits for one" and "A call never hangs: When the receiver closes ...
// while a caller waits, the call fails with call_errc::closed". Every call is answered correctly or
// fails closed; every call record is delivered (a normal close answers what was sent before it).
TEST_CASE("hostile call: close() while 100 host threads and the device's work exhaust the reply slots") {
  watchdog dog("close vs slot waiters", 120s);
  devtap::cpu_client cpus(1);
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus)});
  std::atomic<std::uint64_t> handled{0};
  auto slow = rx->serve<std::uint64_t, std::uint64_t>([&](const std::uint64_t& v) {
    ++handled;
    std::this_thread::sleep_for(50us);
    return v * 3;
  });
  const devtap::outfeed out = rx->outfeed(*cpus.cpu_devices()[0]);
  constexpr int threads = 100;
  std::atomic<std::uint64_t> ok{0}, closed{0}, wrong{0};
  std::latch start(threads + 1);
  std::vector<std::thread> callers;
  for (int t = 0; t < threads; ++t)
    callers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (std::uint64_t i = 0;; ++i) {
        const std::uint64_t v = static_cast<std::uint64_t>(t) << 32 | i;
        const auto r = out.call(slow, v);
        if (r.ok()) {
          (*r == v * 3 ? ok : wrong)++;
        } else {
          (r.error() == devtap::call_errc::closed ? closed : wrong)++;
          return;
        }
      }
    });
  auto work = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
    std::uint64_t answered = 0;
    for (std::uint64_t i = 0; i < 50; ++i) answered += ctx.call(slow, i) == i * 3;
    return answered;
  });
  start.arrive_and_wait();
  // Callers waiting for a slot when close() runs (on a loaded runner they may start late).
  REQUIRE(eventually([&] { return rx->stats().devices[0].call_slot_waits > 0; }, 10s));
  // The device's 50 calls compete with 100 callers for the slots (took up to 4.5 s under TSan on a
  // loaded runner): close() once they are answered, within its default 10 s for the device.
  REQUIRE(work.wait_for(60s) == std::future_status::ready);
  rx->close();  // after the device's work: its 50 calls are answered
  for (auto& t : callers) t.join();
  CHECK(work.get() == 50);
  CHECK(wrong == 0);
  CHECK(closed == threads);
  CHECK(rx->stats().devices[0].call_slot_waits > 0);
  CHECK(rx->stats().total().records == ok + 50);
  CHECK(handled == ok + 50);
}

// docs/call.md: "When the receiver closes, or gives up on the device at close_timeout, while a
// caller waits, the call fails with call_errc::closed (cpu: call_error), even if the handler is still
// running; close() never waits on a device blocked in a call longer than its timeout."
TEST_CASE("hostile call: close() times out on 3 devices whose handler is stuck; every waiting caller, of work and threads, fails closed") {
  watchdog dog("close timeout with stuck handler", 30s);
  quiet_log quiet;
  devtap::cpu_client cpus(3);
  struct flags {
    std::atomic<bool> release{false};
    std::atomic<int> inside{0};
  };
  auto f = std::make_shared<flags>();
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 300ms});
  auto stuck = rx->serve<int, int>([f](const int& v) {
    ++f->inside;
    while (!f->release) std::this_thread::sleep_for(1ms);
    return v;
  });
  std::atomic<int> ok{0}, closed{0}, other{0};
  auto classify = [&](devtap::call_errc e) { (e == devtap::call_errc::none ? ok : e == devtap::call_errc::closed ? closed : other)++; };
  std::vector<std::future<void>> works;
  std::vector<std::thread> threads;
  for (auto* dev : cpus.cpu_devices()) {
    works.push_back(dev->submit([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 3; ++i) {
        try {
          ctx.call(stuck, i);
          classify(devtap::call_errc::none);
        } catch (const devtap::call_error& e) {
          classify(e.code());
          return;
        }
      }
    }));
    const devtap::outfeed out = rx->outfeed(*dev);
    for (int t = 0; t < 4; ++t) threads.emplace_back([&, out, t] { classify(out.call(stuck, t).error()); });
  }
  REQUIRE(eventually([&] { return f->inside.load() == 3; }));
  // Every caller is waiting once each device's 5 calls (its work's and 4 threads') hold a reply slot;
  // waited for, not slept for: a work that started after close() would be refused, not failed closed.
  const auto all_calls_placed = [&] {
    for (auto* dev : cpus.cpu_devices()) {
      int n = 0;
      for (auto& word : rx->outfeed(*dev).ring().producer->reply_slots_taken)
        n += std::popcount(std::atomic_ref<std::uint32_t>(word).load());
      if (n != 5) return false;
    }
    return true;
  };
  REQUIRE(eventually(all_calls_placed, 10s));
  const auto t0 = std::chrono::steady_clock::now();
  try {
    rx->close();
    FAIL("close() did not time out");
  } catch (const devtap::timeout_error& e) {
    CHECK(e.devices().size() == 3);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);  // bounded (300 ms and each stuck reader's grace), not hung
  for (auto& w : works) REQUIRE(w.wait_for(10s) == std::future_status::ready);
  for (auto& t : threads) t.join();
  CHECK(ok == 0);
  CHECK(other == 0);
  CHECK(closed == 3 * 5);
  f->release = true;
  rx.reset();
}

// As above, through the destructor rather than close(): "Closes if close() was not called; never
// throws" (receiver.hpp) and "A call never hangs".
TEST_CASE("hostile call: destroying the receiver while callers wait on a stuck handler releases them all") {
  watchdog dog("destroy with stuck handler", 30s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  struct flags {
    std::atomic<bool> release{false};
    std::atomic<int> inside{0};
  };
  auto f = std::make_shared<flags>();
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  auto stuck = rx->serve<int, int>(
      [f](const int& v) {
        ++f->inside;
        while (!f->release) std::this_thread::sleep_for(1ms);
        return v;
      },
      devtap::shared);  // one at a time: the second device's call waits for the lock
  std::atomic<int> closed{0}, other{0};
  std::vector<std::thread> threads;
  for (auto* dev : cpus.cpu_devices()) {
    const devtap::outfeed out = rx->outfeed(*dev);
    for (int t = 0; t < 70; ++t)  // more than the 64 slots of a device
      threads.emplace_back([&, out, t] { (out.call(stuck, t).error() == devtap::call_errc::closed ? closed : other)++; });
  }
  REQUIRE(eventually([&] { return f->inside.load() == 1; }));
  std::this_thread::sleep_for(50ms);
  const auto t0 = std::chrono::steady_clock::now();
  rx.reset();
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);  // bounded, not hung
  for (auto& t : threads) t.join();
  CHECK(closed == 140);
  CHECK(other == 0);
  f->release = true;
}

// docs/call.md: "A call never hangs: When the receiver ... gives up on the device at close_timeout,
// while a caller waits, the call fails with call_errc::closed". Here the caller waits not for an
// answer but for room in a full ring (overflow_policy::block) behind a stuck consumer.
TEST_CASE("hostile call: a call blocked on a full ring behind a stuck consumer fails closed when close() gives up") {
  watchdog dog("call blocked in claim", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  struct flags {
    std::atomic<bool> release{false}, in{false};
  };
  auto f = std::make_shared<flags>();
  auto rx = std::make_unique<devtap::receiver>(
      devtap::receiver_options{.devices = all(cpus), .budget_bytes = 1024, .close_timeout = 200ms});
  auto block = rx->attach<int>([f](const int&) {
    f->in = true;
    while (!f->release) std::this_thread::sleep_for(1ms);
  });
  auto twice = rx->serve<int, int>([](const int& v) { return 2 * v; });
  const devtap::outfeed out = rx->outfeed(*cpus.cpu_devices()[0]);
  std::atomic<int> taps_written{0};
  std::atomic<bool> tap_failed{false};
  std::thread flooder([&] {
    try {
      for (int i = 0; i < 1000; ++i, ++taps_written) out.tap(block, i);
    } catch (const devtap::outfeed_error&) {
      tap_failed = true;
    }
  });
  REQUIRE(eventually([&] { return f->in.load(); }));
  std::this_thread::sleep_for(50ms);  // the flooder fills the ring and waits
  auto call = std::async(std::launch::async, [&] { return out.call(twice, 1).error(); });
  CHECK(call.wait_for(50ms) == std::future_status::timeout);  // waiting for room
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  REQUIRE(call.wait_for(3s) == std::future_status::ready);
  CHECK(call.get() == devtap::call_errc::closed);
  flooder.join();
  CHECK(tap_failed);
  f->release = true;
  rx.reset();
}

// receiver.hpp: flush() "Throws timeout_error after close_timeout"; barrier() is "Bounded by
// close_timeout". docs/call.md: the caller gets its handler's answer. A timeout of flush or barrier
// must not cancel the call in flight.
TEST_CASE("hostile call: flush() and barrier() time out while a slow call is in flight; the call still gets its answer") {
  watchdog dog("flush timeout", 20s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .close_timeout = 100ms});
  std::atomic<bool> in{false}, release{false};
  auto slow = rx.serve<int, int>([&](const int& v) {
    in = true;
    while (!release) std::this_thread::sleep_for(1ms);  // held, not slept: both timeouts fire first on any machine
    return v + 100;
  });
  auto work = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) { return ctx.call(slow, 1); });
  REQUIRE(eventually([&] { return in.load(); }));
  CHECK_THROWS_AS(rx.flush(), devtap::timeout_error);
  CHECK_THROWS_AS(rx.barrier(), devtap::timeout_error);
  release = true;
  REQUIRE(work.wait_for(10s) == std::future_status::ready);
  CHECK(work.get() == 101);
  rx.close();
}

// docs/call.md: "a call through a copy of the closed receiver's outfeed gets call_errc::closed";
// device.hpp: a closed receiver's ring is kept "alive until the next one closes on this device".
// "A point of another receiver, of a closed one, or of none: call_errc::no_handler (a host caller
// learns it before anything is sent, and nothing is counted)".
TEST_CASE("hostile call: calls after close and after destruction, and a closed receiver's point on its successor") {
  watchdog dog("after close", 10s);
  devtap::cpu_client cpus(1);
  auto rx1 = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus)});
  auto p1 = rx1->serve<int, int>([](const int& v) { return v; });
  const devtap::outfeed stale = rx1->outfeed(*cpus.cpu_devices()[0]);
  CHECK(stale.call(p1, 1).value() == 1);
  rx1->close();
  CHECK(stale.call(p1, 2).error() == devtap::call_errc::closed);
  auto serve_after_close = [&] { return rx1->serve<int, int>([](const int& v) { return v; }); };
  CHECK_THROWS_AS(serve_after_close(), std::logic_error);
  rx1.reset();
  CHECK(stale.call(p1, 3).error() == devtap::call_errc::closed);  // the ring is retired, still alive

  devtap::receiver rx2({.devices = all(cpus)});
  auto p2 = rx2.serve<int, int>([](const int& v) { return -v; });
  REQUIRE(p2.id == p1.id);  // same id, other receiver
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(p1, 4);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::no_handler);
    }
    CHECK(ctx.call(p2, 4) == -4);
  });
  CHECK(rx2.outfeed(*cpus.cpu_devices()[0]).call(p1, 5).error() == devtap::call_errc::no_handler);
  CHECK_NOTHROW(rx2.close());  // nothing was sent, nothing is reported
  CHECK(rx2.stats().total().unknown_ids == 0);
  CHECK(rx2.stats().total().records == 1);
}

// docs/call.md: "When the receiver closes ... while a caller waits, the call fails with
// call_errc::closed" and device.hpp: "a host thread still inside a tap when its receiver was
// destroyed touches live memory, of a ring nobody reads, and leaves with an error". A host thread
// that is inside a call when its receiver closes must not touch freed memory when the next receiver
// on the device opens and closes at once (ASan watches).
TEST_CASE("hostile call: host callers still inside a call while their receiver is destroyed and the next one on the device closes") {
  watchdog dog("successor closes under callers", 120s);
  devtap::cpu_client cpus(1);
  // 40 host threads each make ONE call while the receiver is open; the handler holds the first, so
  // all 40 have committed their requests and sleep on their slots' bells. The callers live on CPU 1
  // at SCHED_IDLE; a spinner of normal priority then holds CPU 1, the handler is released (every call
  // is answered, every caller is woken but not yet run), and this thread, on CPU 0, destroys the
  // receiver (a normal close) and opens and closes the next receiver of the device -- which frees the
  // ring the first one retired (device::retire_ring). Then the spinner stops and the callers return
  // from their calls.
  for (int round = 0; round < 5; ++round) {  // each round caught it about every other time (ASan)
    devtap_test::cpu_starver starver;
    auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus)});
    auto release = std::make_shared<std::atomic<bool>>(false);
    auto h = rx->serve<int, int>([release](const int& v) {
      while (!*release) std::this_thread::sleep_for(1ms);
      return v;
    });
    const devtap::outfeed out = rx->outfeed(*cpus.cpu_devices()[0]);
    constexpr int callers_count = 40;
    std::atomic<int> wrong{0}, returned{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < callers_count; ++t)
      callers.emplace_back([&, out, t] {
        devtap_test::cpu_starver::starve_this_thread();
        const auto r = out.call(h, t);  // one call, made while the receiver is open
        // Answered; or, where this caller had not yet sent its request when the CPU was taken
        // (a loaded machine), closed, as documented.
        if (r.ok() ? *r != t : r.error() != devtap::call_errc::closed) ++wrong;
        ++returned;
      });
    auto slots_taken = [&] {
      int n = 0;
      for (auto& word : out.ring().producer->reply_slots_taken) n += std::popcount(std::atomic_ref<std::uint32_t>(word).load());
      return n;
    };
    REQUIRE(eventually([&] { return slots_taken() == callers_count; }, 10s));  // callers at SCHED_IDLE
    // Committed, spun, and asleep on their bells (a fixed 100 ms left them all still spinning on a
    // loaded machine, and the round tested nothing); where SCHED_IDLE threads get no CPU in 5 s,
    // the round goes on and says so.
    auto asleep = [&] {
      int n = 0;
      for (auto& slot : out.ring().consumer->replies)
        n += std::atomic_ref<std::uint32_t>(slot.header.caller_sleeps).load() != 0;
      return n;
    };
    if (!eventually([&] { return asleep() == callers_count; }, 5s))
      WARN("round " << round << ": " << asleep() << " of " << callers_count << " callers asleep on their bells");
    CHECK(returned == 0);
    starver.hold();
    *release = true;  // the reader answers all 40 and rings their bells; CPU 1 is the spinner's
    rx.reset();       // a normal close: every call was answered
    { devtap::receiver next({.devices = all(cpus)}); }  // its close frees the ring rx retired, unless pinned
    starver.let_go();
    for (auto& t : callers) t.join();
    CHECK(wrong == 0);
    CHECK(returned == callers_count);
  }
}

// ---------------------------------------------------------------------------------------------
// Floods and accounting

// docs/call.md: "Under overflow_policy::drop ... a full ring: call_errc::ring_full (counted as a
// dropped record)"; outfeed.md/stats: every record is delivered or counted as dropped.
TEST_CASE("hostile call: calls while two taps flood the ring under overflow_policy::drop: every record delivered or counted") {
  watchdog dog("drop flood", 30s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .overflow = devtap::overflow_policy::drop});
  std::atomic<std::uint64_t> consumed{0}, handled{0};
  auto sink = rx.attach<std::uint64_t>([&](const std::uint64_t&) { ++consumed; });
  auto h = rx.serve<std::uint64_t, std::uint64_t>([&](const std::uint64_t& v) {
    ++handled;
    return ~v;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  constexpr std::uint64_t taps_each = 30000, calls_each = 1500;
  std::atomic<std::uint64_t> ok{0}, full{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (std::uint64_t i = 0; i < taps_each; ++i) out.tap(sink, i);
    });
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (std::uint64_t i = 0; i < calls_each; ++i) {
        const auto r = out.call(h, i);
        if (r.ok()) (*r == ~i ? ok : wrong)++;
        else (r.error() == devtap::call_errc::ring_full ? full : wrong)++;
      }
    });
  for (auto& t : threads) t.join();
  rx.close();
  const auto st = rx.stats().total();
  CHECK(wrong == 0);
  CHECK(handled == ok);
  CHECK(st.records == consumed + handled);
  CHECK(st.records + st.dropped_records == 2 * taps_each + 2 * calls_each);
  CHECK(st.lost_at_close == 0);
}

// docs/call.md: "Order. ... consumers see the records the caller taps after the answer after it",
// and, under the default overflow_policy::block, lossless: every tap and every call is delivered.
TEST_CASE("hostile call: calls from 3 threads while 2 taps flood a small ring under block: all answered, all delivered") {
  watchdog dog("block flood", 30s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 512});
  std::atomic<std::uint64_t> consumed{0};
  auto sink = rx.attach<std::uint64_t>([&](const std::uint64_t&) { ++consumed; });
  auto h = rx.serve<std::uint64_t, std::uint64_t>([](const std::uint64_t& v) { return v * 2 + 1; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  constexpr std::uint64_t taps_each = 20000, calls_each = 1000;
  std::atomic<std::uint64_t> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&] {
      for (std::uint64_t i = 0; i < taps_each; ++i) out.tap(sink, i);
    });
  for (int t = 0; t < 3; ++t)
    threads.emplace_back([&] {
      for (std::uint64_t i = 0; i < calls_each; ++i) {
        const auto r = out.call(h, i);
        if (!r.ok() || *r != i * 2 + 1) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  rx.close();
  CHECK(wrong == 0);
  CHECK(consumed == 2 * taps_each);
  CHECK(rx.stats().total().records == 2 * taps_each + 3 * calls_each);
  CHECK(rx.stats().total().dropped_records == 0);
}

// docs/call.md: "Under overflow_policy::drop or error, a full ring: call_errc::ring_full (counted as
// a dropped record; error also sets the sticky error close() reports)".
TEST_CASE("hostile call: under overflow_policy::error a call into a full ring is ring_full, counted, and close() reports it") {
  watchdog dog("error policy", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1024, .overflow = devtap::overflow_policy::error});
  std::latch entered(1);
  std::atomic<bool> release{false};
  auto block = rx.attach<int>([&](const int&) {
    entered.count_down();
    while (!release) std::this_thread::sleep_for(1ms);
  });
  auto twice = rx.serve<int, int>([](const int& v) { return 2 * v; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  out.tap(block, 0);
  entered.wait();
  try {
    for (int i = 0; i < 200; ++i) out.tap(block, i);
  } catch (const devtap::outfeed_error&) {
  }
  const auto before = rx.stats().devices[0].dropped_records;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    try {
      ctx.call(twice, 1);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::ring_full);
    }
  });
  CHECK(rx.stats().devices[0].dropped_records == before + 1);
  release = true;
  rx.flush();
  CHECK(out.call(twice, 4).value() == 8);
  try {
    rx.close();
    FAIL("close() did not report the full ring");
  } catch (const devtap::tap_error& e) {
    bool ring_full = false;
    for (const auto& f : e.failures()) ring_full = ring_full || f.message.find("full") != std::string::npos;
    CHECK(ring_full);
  }
}

// docs/call.md: "serve<Req, Rep>(fn, devtap::shared) runs them one at a time".
TEST_CASE("hostile call: a shared handler called from 4 devices at once never runs twice at the same time") {
  watchdog dog("shared handler", 30s);
  devtap::cpu_client cpus(4);
  devtap::receiver rx({.devices = all(cpus)});
  std::atomic<int> inside{0}, most{0};
  long long plain_total = 0;  // no atomics: the lock must order it
  auto h = rx.serve<int, int>(
      [&](const int& v) {
        const int now = ++inside;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        plain_total += v;
        std::this_thread::sleep_for(5us);
        --inside;
        return v;
      },
      devtap::shared);
  std::vector<std::future<int>> works;
  for (auto* dev : cpus.cpu_devices())
    works.push_back(dev->submit([&](devtap::cpu_context& ctx) {
      int bad = 0;
      for (int i = 1; i <= 300; ++i) bad += ctx.call(h, i) != i;
      return bad;
    }));
  for (auto& w : works) CHECK(w.get() == 0);
  rx.close();
  CHECK(most == 1);
  CHECK(plain_total == 4LL * 300 * 301 / 2);
}

// Undocumented: a handler and a consumer of the same request type, under the same name, on the
// same device: taps reach the consumer, calls the handler, and close() reports the failures of both.
TEST_CASE("hostile call: a consumer and a handler of the same type under the same name stay apart") {
  watchdog dog("same name", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::atomic<int> consumed{0}, handled{0};
  auto tp = rx.attach<int>(
      [&](const int& v) {
        ++consumed;
        if (v == -1) throw std::runtime_error("consumer failed");
      },
      "same");
  auto cp = rx.serve<int, int>(
      [&](const int& v) {
        ++handled;
        if (v == -1) throw std::runtime_error("handler failed");
        return v;
      },
      "same");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 10; ++i) {
      ctx.tap(tp, i);
      CHECK(ctx.call(cp, i) == i);
    }
    ctx.tap(tp, -1);
    CHECK_THROWS_AS(ctx.call(cp, -1), devtap::call_error);
  });
  try {
    rx.close();
    FAIL("close() did not report");
  } catch (const devtap::tap_error& e) {
    std::vector<std::string> messages;
    for (const auto& f : e.failures()) messages.push_back(f.message);
    CHECK(messages.size() == 2);
    CHECK(std::find(messages.begin(), messages.end(), "consumer failed") != messages.end());
    CHECK(std::find(messages.begin(), messages.end(), "handler failed") != messages.end());
  }
  CHECK(consumed == 11);
  CHECK(handled == 11);
}

// docs/call.md ("Cycles devtap cannot see"): two receivers whose handlers call each other's
// devices wait for each other until close() gives up on the stuck handler; then every call returns.
TEST_CASE("hostile call: handlers of two receivers that call each other's devices wait until close() gives up") {
  watchdog dog("cross-receiver cycle", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  auto a = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = {cpus.cpu_devices()[0]}, .close_timeout = 300ms});
  auto b = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = {cpus.cpu_devices()[1]}, .close_timeout = 300ms});
  const devtap::outfeed to_a = a->outfeed(*cpus.cpu_devices()[0]);
  const devtap::outfeed to_b = b->outfeed(*cpus.cpu_devices()[1]);
  auto leaf_a = a->serve<int, int>([](const int& v) { return v; });
  std::atomic<int> b_inner{-1};
  std::atomic<bool> cycle_formed{false};
  auto via_b = b->serve<int, int>([&, to_a, leaf_a](const int& v) {
    cycle_formed = true;  // a's reader is in via_a, waiting for this handler, which now waits for a's reader
    b_inner = static_cast<int>(to_a.call(leaf_a, v).error());
    return v;
  });
  std::atomic<int> a_inner{-1};
  auto via_a = a->serve<int, int>([&, to_b, via_b](const int& v) {
    a_inner = static_cast<int>(to_b.call(via_b, v).error());
    return v;
  });
  auto r = std::async(std::launch::async, [&] { return to_a.call(via_a, 1).error(); });
  REQUIRE(eventually([&] { return cycle_formed.load(); }, 10s));  // before close(), however loaded the runner
  CHECK(r.wait_for(200ms) == std::future_status::timeout);  // the cycle: no error, a wait
  CHECK_THROWS(a->close());  // gives up on the handler stuck in the cycle, and says so
  REQUIRE(r.wait_for(5s) == std::future_status::ready);
  // closed, or answered: once a's close failed b's handler's call, the cycle unwinds and a's handler
  // may answer before the reader is given up on.
  const devtap::call_errc code = r.get();
  CHECK((code == devtap::call_errc::closed || code == devtap::call_errc::none));
  // a's close failed b's handler's call; that thread may store the code after `r` is ready
  CHECK(eventually([&] { return b_inner == static_cast<int>(devtap::call_errc::closed); }, 10s));
  a.reset();
  b.reset();
}

// docs/call.md: "Order. A call travels through the device's ring like a tap, so its handler sees
// every record its caller tapped before the call, in order" -- except through a merged consumer,
// which holds records back up to merge_lag (said there too): it sees them all by close().
TEST_CASE("hostile call: a handler sees the records its caller tapped before the call; a merged consumer sees them by close()") {
  watchdog dog("merged order", 20s);
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = 50ms});
  std::atomic<int> seen{0}, seen_merged{0};
  auto p = rx.attach<int>([&](const int&) { ++seen; }, "each");
  auto m = rx.attach<int>([&](const int&) { ++seen_merged; }, devtap::merged, "merged");
  std::atomic<int> overtaken{0};
  auto h = rx.serve<int, int>([&](const int& taps_before) {
    if (seen.load() != taps_before) ++overtaken;
    return 0;
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 5; ++i) {
      ctx.tap(p, i);
      ctx.tap(m, i);
      ctx.call(h, i + 1);
    }
  });
  rx.close();
  CHECK(seen == 5);
  CHECK(overtaken == 0);
  CHECK(seen_merged == 5);
}

// docs/timeline.md (trace file): "tap | instant event ... cat tap (call for calls)". Calls, a handler
// that throws and a refused call, with a trace file and a recording: both are written, close() reports.
TEST_CASE("hostile call: calls with a trace file and a recording, including failed and refused calls") {
  watchdog dog("sinks", 20s);
  quiet_log quiet;
  devtap_test::temp_file trace("hostile-call.json"), rec("hostile-call.devtap");
  devtap::cpu_client cpus(2);
  {
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .trace_file = trace.path, .record_file = rec.path});
    auto h = rx.serve<int, int>(
        [](const int& v) {
          if (v < 0) throw std::runtime_error("negative");
          return v;
        },
        "answerer");
    auto tp = rx.attach<int>([](const int&) {}, "ints");
    const devtap::call_point<int, double> wrong{h.id, devtap::call_fingerprint_v<int, double>, h.receiver};
    for (auto* dev : cpus.cpu_devices())
      dev->run([&](devtap::cpu_context& ctx) {
        for (int i = 0; i < 50; ++i) {
          ctx.tap(tp, i);
          CHECK(ctx.call(h, i) == i);
        }
        CHECK_THROWS_AS(ctx.call(h, -1), devtap::call_error);
        CHECK_THROWS_AS(ctx.call(wrong, 1), devtap::call_error);
      });
    CHECK_THROWS_AS(rx.close(), devtap::tap_error);
    CHECK(rx.stats().total().records == 2 * 100);
  }
  std::ifstream in(trace.path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("\"cat\":\"call\"") != std::string::npos);
  CHECK(text.str().find("answerer") != std::string::npos);
  std::ifstream r(rec.path, std::ios::binary | std::ios::ate);
  CHECK(r.tellg() > 0);
}

// layout.hpp: "A record above half the ring may have to wait for the ring to drain". A call whose
// request takes almost the whole ring, while two threads flood the ring with small taps under
// `block`: a demanding user expects it answered while the flood goes on. On one CPU (as here) it
// waited as long as the flood went on, until a waiting claim above half the ring held the others off.
TEST_CASE("hostile call: a call as large as the ring, while small taps flood it, is answered before the flood ends") {
  watchdog dog("big call under flood", 30s);
  one_cpu pinned;  // every thread below on one CPU: where the flood won every race for the space
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096});
  std::atomic<std::uint64_t> consumed{0};
  auto sink = rx.attach<std::uint64_t>([&](const std::uint64_t&) { ++consumed; });
  auto size = rx.serve<blob, std::uint64_t>([](const blob& b) { return std::uint64_t{b.bytes.size()}; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::vector<std::uint8_t> data(3900, 7);
  std::atomic<bool> stop{false};
  std::vector<std::thread> flooders;
  for (int t = 0; t < 2; ++t)
    flooders.emplace_back([&] {
      for (std::uint64_t i = 0; !stop; ++i) out.tap(sink, i);
    });
  std::this_thread::sleep_for(20ms);
  auto call = std::async(std::launch::async, [&] { return out.call(size, blob{std::span<const std::uint8_t>(data)}); });
  const bool answered_during_flood = call.wait_for(10s) == std::future_status::ready;  // (the flood goes on meanwhile)
  stop = true;
  for (auto& t : flooders) t.join();
  REQUIRE(call.wait_for(5s) == std::future_status::ready);
  const auto r = call.get();
  CHECK(r.ok());
  CHECK(*r == data.size());
  CHECK(answered_during_flood);
  rx.close();
}

// docs/call.md: "When all of a device's slots are in use, a caller waits for one, and that is
// counted (device_stats::call_slot_waits)" -- once per call that waited, and each still gets its answer.
TEST_CASE("hostile call: exactly the calls that found all 64 slots taken are counted in call_slot_waits") {
  watchdog dog("slot wait count", 20s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::atomic<bool> release{false};
  auto held = rx.serve<int, int>([&](const int& v) {
    while (!release) std::this_thread::sleep_for(1ms);
    return v + 1;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < static_cast<int>(devtap::detail::reply_slot_count); ++t)
    threads.emplace_back([&, t] { wrong += out.call(held, t).value() != t + 1; });
  std::this_thread::sleep_for(300ms);  // every slot taken, the first call in the handler
  CHECK(rx.stats().devices[0].call_slot_waits == 0);
  for (int t = 0; t < 10; ++t) threads.emplace_back([&, t] { wrong += out.call(held, 100 + t).value() != 101 + t; });
  // No slot frees while the handler is held: exactly 10 of the 74 calls wait, whichever threads run
  // first; waited for, not slept for (threads start late on a loaded machine).
  CHECK(eventually([&] { return rx.stats().devices[0].call_slot_waits == 10; }));
  std::this_thread::sleep_for(50ms);
  CHECK(rx.stats().devices[0].call_slot_waits == 10);
  release = true;
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  rx.close();
  CHECK(rx.stats().total().records == devtap::detail::reply_slot_count + 10);
}

// docs/call.md: waiting callers get slots in turn. Before, a caller that had just given its slot
// back took it again at once: the device work's one call waited 0.3-1.6 s while 64 host threads,
// calling back to back, made 14 000-47 000 calls. Counted, not timed: with turns, the others finish
// the calls they hold slots for, those of the callers queued ahead, and a window's worth.
TEST_CASE("hostile call: a caller waiting for a slot is not starved by callers that call back to back") {
  watchdog dog("slot turns", 60s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto echo = rx.serve<int, int>([](const int& v) { return v + 1; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  std::atomic<bool> stop{false};
  std::atomic<long> calls{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  const int callers = static_cast<int>(devtap::detail::reply_slot_count) + 8;
  for (int t = 0; t < callers; ++t)
    threads.emplace_back([&, t] {
      while (!stop) {
        wrong += out.call(echo, t).value() != t + 1;
        calls.fetch_add(1, std::memory_order_relaxed);
      }
    });
  CHECK(eventually([&] { return calls.load() > 10 * callers; }));  // every slot busy, callers queued
  long during = -1;
  for (int round = 0; round < 3; ++round) {  // the device's own work, as a training loop's step
    const long before = calls.load();
    CHECK(cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { return ctx.call(echo, 1000); }) == 1001);
    during = std::max(during, calls.load() - before);
  }
  stop = true;
  for (auto& t : threads) t.join();
  rx.close();
  CHECK(wrong == 0);
  INFO("the most calls the others made while the device's call waited: " << during);
  CHECK(during < 20 * callers);
}

// receiver.hpp: close() "Throws timeout_error (devices that did not finish)"; docs/call.md: "A call
// never hangs". With a zero close_timeout, close() gives up at once on devices whose work is in the
// middle of calls: each call is answered or fails closed, and nothing hangs or is touched after.
TEST_CASE("hostile call: close_timeout of 0 while device work and host threads call in a loop") {
  watchdog dog("zero close timeout", 30s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  for (int round = 0; round < 5; ++round) {
    auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 0ms});
    auto h = rx->serve<int, int>([](const int& v) { return v ^ 0x55; });
    std::atomic<int> wrong{0};
    std::vector<std::future<void>> works;
    std::vector<std::thread> threads;
    for (auto* dev : cpus.cpu_devices()) {
      works.push_back(dev->submit([&](devtap::cpu_context& ctx) {
        for (int i = 0;; ++i) {
          try {
            if (ctx.call(h, i) != (i ^ 0x55)) ++wrong;
          } catch (const devtap::call_error& e) {
            if (e.code() != devtap::call_errc::closed) ++wrong;
            return;
          }
        }
      }));
      const devtap::outfeed out = rx->outfeed(*dev);
      threads.emplace_back([&, out] {
        for (int i = 0;; ++i) {
          const auto r = out.call(h, i);
          if (!r.ok()) {
            if (r.error() != devtap::call_errc::closed) ++wrong;
            return;
          }
          if (*r != (i ^ 0x55)) ++wrong;
        }
      });
    }
    std::this_thread::sleep_for(20ms);
    try {
      rx->close();
    } catch (const devtap::timeout_error&) {  // allowed: it gave up at once
    }
    for (auto& w : works) REQUIRE(w.wait_for(5s) == std::future_status::ready);
    for (auto& t : threads) t.join();
    CHECK(wrong == 0);
    rx.reset();
  }
}

// Undocumented: two threads close() the receiver at once while callers wait; both return (one
// closes, the other waits for it), every call is answered or fails closed.
TEST_CASE("hostile call: two threads close() at once while calls are in flight") {
  watchdog dog("double close", 20s);
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  auto h = rx.serve<int, int>([](const int& v) {
    std::this_thread::sleep_for(100us);
    return -v;
  });
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (auto* dev : cpus.cpu_devices())
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, out = rx.outfeed(*dev)] {
        for (int i = 1;; ++i) {
          const auto r = out.call(h, i);
          if (!r.ok()) {
            if (r.error() != devtap::call_errc::closed) ++wrong;
            return;
          }
          if (*r != -i) ++wrong;
        }
      });
  std::this_thread::sleep_for(20ms);
  auto second = std::async(std::launch::async, [&] { rx.close(); });
  rx.close();
  REQUIRE(second.wait_for(5s) == std::future_status::ready);
  second.get();
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
}

// docs/call.md ("How it works"): the caller waits "spin, yield, then sleep on the slot's bell", the
// reader rings the bell "if the caller sleeps", and an idle reader sleeps too (the ring's doorbells).
// Calls at random moments, to an idle reader and with handlers slow enough that the caller sleeps,
// are each answered promptly: a lost wake-up shows as a call far slower than its handler.
TEST_CASE("hostile call: sporadic calls to a sleeping reader, from sleeping callers, are all answered promptly") {
  watchdog dog("lost wake-ups", 60s);
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  auto h = rx.serve<std::uint32_t, std::uint32_t>([](const std::uint32_t& us) {
    if (us != 0) std::this_thread::sleep_for(std::chrono::microseconds(us));
    return us + 1;
  });
  std::atomic<int> slow{0}, wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t, out = rx.outfeed(*cpus.cpu_devices()[static_cast<std::size_t>(t % 2)])] {
      std::uint32_t x = 12345u + static_cast<std::uint32_t>(t);
      for (int i = 0; i < 150; ++i) {
        x = x * 1103515245u + 12345u;
        const std::uint32_t pause_us = (x >> 8) % 3000, handler_us = (x >> 20) % 3 == 0 ? 0 : (x >> 4) % 800;
        std::this_thread::sleep_for(std::chrono::microseconds(pause_us));  // the reader goes to sleep
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = out.call(h, handler_us);
        if (!r.ok() || *r != handler_us + 1) ++wrong;
        // A lost wake-up never ends (the bell has no timeout); 5 s leaves room for a loaded machine.
        if (std::chrono::steady_clock::now() - t0 > 5s) ++slow;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  CHECK(slow == 0);
  rx.close();
}

// ring/call.hpp: "A caller's sequence is one past the slot's last answer, so an answer is recognised
// by one equality". The 32-bit sequence wraps after 2^32 calls through a slot; the calls around the
// wrap are answered like any other (the slots' counters are set near the wrap by hand).
TEST_CASE("hostile call: calls through slots whose sequence wraps around 2^32 are answered") {
  watchdog dog("sequence wrap", 10s);
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto h = rx.serve<int, int>([](const int& v) { return v * 5; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  REQUIRE(out.call(h, 1).value() == 5);  // the reader is running and idle now
  for (auto& slot : out.ring().consumer->replies)
    std::atomic_ref<std::uint32_t>(slot.header.answered).store(0xFFFFFFFEu, std::memory_order_seq_cst);
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const auto r = out.call(h, t * 100 + i);
        if (!r.ok() || *r != (t * 100 + i) * 5) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(wrong == 0);
  rx.close();
}

namespace {
struct two_words {
  std::uint64_t a;
  std::uint64_t b;
};
struct spanned {
  std::span<const std::uint64_t> values;
};
}  // namespace

// docs/call.md: "The reader answers every call record it cannot hand to a handler (unknown id, other
// types, a consumer's id) with the error, so a wrong point costs one round trip, never a hang", and
// "A point of another receiver, of a closed one, or of none: call_errc::no_handler". A point made by
// hand whose id carries the stamp flag (tap_info.hpp's stamped_id_flag, which host taps refuse), on a
// receiver with timestamps: the call must fail clearly, and must not answer another caller's slot.
TEST_CASE("hostile call: a hand-made point with the stamp flag in its id, on a receiver with timestamps, is refused") {
  watchdog dog("stamped forged point", 30s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  auto h = rx.serve<two_words, std::uint64_t>([](const two_words& w) { return w.a + w.b; });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  REQUIRE(out.call(h, two_words{1, 2}).value() == 3);

  SECTION("the forged call itself fails instead of waiting for ever") {
    const devtap::call_point<two_words, std::uint64_t> forged{h.id | devtap::detail::stamped_id_flag, h.fingerprint, h.receiver};
    auto r = std::async(std::launch::async, [&] { return out.call(forged, two_words{5, 6}).error(); });
    const bool returned = r.wait_for(10s) == std::future_status::ready;  // at once; 10 s on a loaded runner
    CHECK(returned);
    try {
      rx.close();  // ends the wait if it hung: the call then fails closed
    } catch (const devtap::tap_error&) {  // it reports the forged call as "answered call_errc::type_mismatch"
    }
    REQUIRE(r.wait_for(5s) == std::future_status::ready);
    const auto code = r.get();
    CHECK(code == devtap::call_errc::no_handler);  // refused before anything is sent
  }
  SECTION("the forged call does not answer another caller's slot") {
    // A request the reader, once it strips 16 "stamp" bytes, reads as {call_request{slot 1, the
    // victim's sequence}, values{1000, 2000}}: the handler runs on it and answers slot 1.
    auto sum = rx.serve<spanned, std::uint64_t>([](const spanned& s) {
      std::uint64_t total = 0;
      for (auto v : s.values) total += v;
      return total;
    });
    std::atomic<int> released{0};
    std::latch entered(1);
    auto block = rx.attach<int>([&](const int& k) {
      entered.count_down();
      while (released.load() <= k) std::this_thread::sleep_for(1ms);
    });
    out.tap(block, 0);
    entered.wait();  // the reader is held: what follows queues in the ring
    // The forger takes the lowest free slot (0); the victim, after it, slot 1 with this sequence:
    const std::uint64_t victim_sequence =
        std::atomic_ref<std::uint32_t>(out.ring().consumer->replies[1].header.answered).load() + 1;
    const std::vector<std::uint64_t> smuggled{1 | victim_sequence << 32, 2, 1000, 2000};
    const devtap::call_point<spanned, std::uint64_t> forged{sum.id | devtap::detail::stamped_id_flag, sum.fingerprint, sum.receiver};
    auto forger = std::async(std::launch::async, [&] { return out.call(forged, spanned{std::span<const std::uint64_t>(smuggled)}).error(); });
    std::this_thread::sleep_for(100ms);
    out.tap(block, 1);  // holds the reader again after the forged record
    const std::vector<std::uint64_t> mine{1, 2, 3};
    auto victim = std::async(std::launch::async, [&] { return out.call(sum, spanned{std::span<const std::uint64_t>(mine)}); });
    std::this_thread::sleep_for(100ms);
    released = 1;  // the reader reads the forged record, then waits in the second block
    std::this_thread::sleep_for(200ms);
    released = 2;
    REQUIRE(victim.wait_for(5s) == std::future_status::ready);
    const auto v = victim.get();
    CHECK(v.error() == devtap::call_errc::none);
    CHECK(*v == 6);  // its own answer, not the forger's 3000
    const bool forger_returned = forger.wait_for(10s) == std::future_status::ready;
    CHECK(forger_returned);
    try {
      rx.close();
    } catch (const devtap::tap_error&) {
    }
    REQUIRE(forger.wait_for(5s) == std::future_status::ready);
    forger.get();
  }
}

namespace {
struct call_probe {
  devtap::outfeed out;
  devtap::call_point<int, int> point;
  std::atomic<int>* reentrant;
};
call_probe* g_probe = nullptr;  // the coroutine below reads it (a coroutine factory takes only its inbox)

devtap::consumer<int> calling_coroutine(devtap::inbox<int> in) {
  while (auto v = co_await in.next())
    if (g_probe->out.call(g_probe->point, *v).error() == devtap::call_errc::reentrant) ++*g_probe->reentrant;
}
}  // namespace

// docs/call.md: "A handler or consumer that calls through any device of its own receiver
// (rx.outfeed(dev).call(...) from inside it) gets call_errc::reentrant at once" -- a coroutine
// consumer too, on its own device and on the other one.
TEST_CASE("hostile call: a coroutine consumer that calls its own receiver's devices gets reentrant") {
  watchdog dog("coroutine reentrant", 10s);
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  auto h = rx.serve<int, int>([](const int& v) { return v; });
  std::atomic<int> reentrant{0};
  call_probe probe{rx.outfeed(*cpus.cpu_devices()[1]), h, &reentrant};
  g_probe = &probe;
  auto p = rx.attach<int>(calling_coroutine);
  for (auto* dev : cpus.cpu_devices())
    for (int i = 0; i < 5; ++i) rx.outfeed(*dev).tap(p, i);
  rx.flush();
  CHECK(reentrant == 10);
  rx.close();
  g_probe = nullptr;
}

// docs/call.md: "a handler that takes or returns other types than the caller's point says so ... it
// never decodes the bytes as something else"; outfeed.md: a record that does not match its consumer's
// type is skipped and counted. A *tap* aimed by hand at a handler's id (with the request's type, or
// with the call's own fingerprint) never runs the handler, and is counted and reported.
TEST_CASE("hostile call: taps aimed by hand at a handler's id never run it, and are counted") {
  watchdog dog("tap at handler", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::atomic<int> ran{0};
  auto h = rx.serve<int, int>([&](const int& v) {
    ++ran;
    return v;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  const std::uint32_t index = h.id & ~devtap::detail::call_id_flag;
  out.tap(devtap::tap_point<int>{index, devtap::type_fingerprint_v<int>, h.receiver}, 1);
  out.tap(devtap::tap_point<int>{index, h.fingerprint, h.receiver}, 2);
  CHECK_THROWS_AS(out.tap(devtap::tap_point<int>{h.id, h.fingerprint, h.receiver}, 3), devtap::outfeed_error);  // the call flag
  CHECK(out.call(h, 4).value() == 4);
  rx.flush();
  CHECK(ran == 1);
  CHECK(rx.stats().total().type_mismatches == 2);
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
}

// docs/call.md ("Cycles devtap cannot see"): a handler that waits for device work whose call comes
// back to the handler's own device waits until close() gives up on it; then the calls return.
TEST_CASE("hostile call: a handler that waits for device work calling back into its own device waits until close() gives up") {
  watchdog dog("indirect self call", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 300ms});
  auto inner = rx->serve<int, int>([](const int& v) { return v + 1; });
  std::atomic<int> inner_code{-1};
  std::atomic<bool> cycle_formed{false};
  auto outer = rx->serve<int, int>([&, inner](const int& v) {
    return cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      cycle_formed = true;  // the reader is in `outer`, which waits for this work's call to be answered
      try {
        return ctx.call(inner, v);
      } catch (const devtap::call_error& e) {
        inner_code = static_cast<int>(e.code());
        return -1;
      }
    });
  });
  const devtap::outfeed out = rx->outfeed(*cpus.cpu_devices()[0]);
  auto r = std::async(std::launch::async, [&] { return out.call(outer, 1); });
  REQUIRE(eventually([&] { return cycle_formed.load(); }, 10s));  // before close(), however loaded the runner
  CHECK(r.wait_for(200ms) == std::future_status::timeout);  // waits: no error
  CHECK_THROWS(rx->close());  // gives up on the stuck handler, and says so
  REQUIRE(r.wait_for(5s) == std::future_status::ready);
  const devtap::call_errc code = r.get().error();  // closed, or answered once the inner call was failed
  CHECK((code == devtap::call_errc::closed || code == devtap::call_errc::none));
  // the handler's thread may store the code after `r` is ready
  CHECK(eventually([&] { return inner_code == static_cast<int>(devtap::call_errc::closed); }, 10s));
  rx.reset();
}

// docs/call.md: "A handler that throws fails that call ... the failure is also kept for close(), which
// throws tap_error listing it"; outfeed.md: close() lists 16 failures per device and point name and
// counts the rest in one entry -- a consumer and a handler of the same name share those 16.
TEST_CASE("hostile call: a handler's failure after a same-named consumer failed 16 times is counted in close()'s last entry") {
  watchdog dog("shared failure cap", 10s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto tp = rx.attach<int>([](const int&) { throw std::runtime_error("consumer failed"); }, "same");
  auto cp = rx.serve<int, int>([](const int&) -> int { throw std::runtime_error("the handler's own failure"); }, "same");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 16; ++i) ctx.tap(tp, i);
    try {
      ctx.call(cp, 1);
      FAIL("no call_error");
    } catch (const devtap::call_error& e) {
      CHECK(std::string(e.what()).find("the handler's own failure") != std::string::npos);  // the caller is told
    }
  });
  try {
    rx.close();
    FAIL("close() did not report");
  } catch (const devtap::tap_error& e) {
    INFO(e.what());
    REQUIRE(e.failures().size() == 17);
    CHECK(e.failures().back().message == "1 more exception(s), not kept (17 in all)");
  }
}

// outfeed.md: "After close() has returned or thrown, no consumer is called again ... That holds for
// a shared consumer or handler too: a reader that was waiting for its lock while another device's
// call ran counts its record in lost_at_close instead of calling it (a caller gets call_errc::closed)."
// Device 0's call holds the shared handler past close_timeout while device 1's reader waits for the
// lock; once close() has thrown, the handler is released. Before the fix it then ran device 1's call
// (after close() had thrown: with its state freed by then, a use-after-free under ASan).
TEST_CASE("hostile call: a shared handler is not called again once close() gave up on the device waiting for it") {
  watchdog dog("shared handler after close", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  std::atomic<bool> release{false}, close_done{false};
  std::atomic<int> calls{0}, calls_after_close{0};
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  auto h = rx->serve<int, int>(
      [&](const int& v) {
        ++calls;
        if (close_done) ++calls_after_close;
        while (v == 0 && !release) std::this_thread::sleep_for(1ms);
        return v;
      },
      devtap::shared);
  const auto ask = [&](devtap::cpu_device& dev, int v) {
    return dev.submit([&h, v](devtap::cpu_context& ctx) {
      try {
        return ctx.call(h, v) == v ? -1 : -2;
      } catch (const devtap::call_error& e) {
        return static_cast<int>(e.code());
      }
    });
  };
  auto first = ask(*cpus.cpu_devices()[0], 0);
  while (calls == 0) std::this_thread::sleep_for(1ms);
  auto second = ask(*cpus.cpu_devices()[1], 1);
  std::this_thread::sleep_for(50ms);  // device 1's reader is waiting for the handler's lock by now
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  close_done = true;
  CHECK(first.get() == static_cast<int>(devtap::call_errc::closed));
  CHECK(second.get() == static_cast<int>(devtap::call_errc::closed));
  release = true;
  for (int i = 0; i < 2000 && rx->stats().devices[0].lost_at_close + rx->stats().devices[1].lost_at_close == 0; ++i)
    std::this_thread::sleep_for(1ms);  // the readers count what they leave once the handler returns
  std::this_thread::sleep_for(100ms);
  CHECK(calls == 1);
  CHECK(calls_after_close == 0);
  CHECK(rx->stats().devices[1].lost_at_close == 1);  // device 1's call: counted, never handled
  rx.reset();
}

// The same rule for a shared callable consumer and a shared coroutine (outfeed.md).
TEST_CASE("hostile call: a shared consumer is not called again once close() gave up on the device waiting for it") {
  watchdog dog("shared consumer after close", 20s);
  quiet_log quiet;
  const bool coroutine = GENERATE(false, true);
  INFO((coroutine ? "coroutine" : "callable"));
  devtap::cpu_client cpus(2);
  std::atomic<bool> release{false}, close_done{false};
  std::atomic<int> calls{0}, calls_after_close{0};
  const auto take = [&](int v) {
    ++calls;
    if (close_done) ++calls_after_close;
    while (v == 0 && !release) std::this_thread::sleep_for(1ms);
  };
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  devtap::tap_point<int> tp;
  if (coroutine)
    tp = rx->attach<int>(
        [&](devtap::inbox<int> in) -> devtap::consumer<int> {
          while (auto v = co_await in.next()) take(*v);
        },
        devtap::shared);
  else
    tp = rx->attach<int>([&](const int& v) { take(v); }, devtap::shared);
  rx->outfeed(*cpus.cpu_devices()[0]).tap(tp, 0);
  while (calls == 0) std::this_thread::sleep_for(1ms);
  rx->outfeed(*cpus.cpu_devices()[1]).tap(tp, 1);
  std::this_thread::sleep_for(50ms);
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  close_done = true;
  release = true;
  for (int i = 0; i < 2000 && rx->stats().devices[1].lost_at_close == 0; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);
  CHECK(calls == 1);
  CHECK(calls_after_close == 0);
  CHECK(rx->stats().devices[1].lost_at_close == 1);
  rx.reset();
}

// outfeed.md: "close() then gives the readers it gave up on one more 100 ms, all together ... it
// returns within close_timeout + 100 ms however many devices are stuck". It gave each stuck reader
// 100 ms in turn: 32 stuck devices took at least 3.2 s. Bound loosely (sanitizers, a busy machine):
// what is checked is that the wait does not grow with the number of devices.
TEST_CASE("hostile call: close() gives up on 32 devices stuck in handlers in one grace period, not one each") {
  watchdog dog("close grace", 30s);
  quiet_log quiet;
  constexpr std::size_t devices = 32;
  devtap::cpu_client cpus(devices);
  std::atomic<bool> release{false};
  std::atomic<std::size_t> stuck{0}, left{0};
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 10ms});
  auto h = rx->serve<int, int>([&](const int& v) {
    ++stuck;
    while (!release) std::this_thread::sleep_for(1ms);
    ++left;  // (the last this handler touches: the test waits for it before its locals go)
    return v;
  });
  std::vector<std::future<void>> work;
  for (auto* dev : cpus.cpu_devices())
    work.push_back(dev->submit([&h](devtap::cpu_context& ctx) {
      try {
        (void)ctx.call(h, 1);
      } catch (const devtap::call_error&) {
      }
    }));
  while (stuck < devices) std::this_thread::sleep_for(1ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took < 2s);
  release = true;
  for (auto& w : work) w.get();
  rx.reset();
  // The readers close() gave up on are not joined: their handlers may still be looking at `release`.
  while (left < devices) std::this_thread::sleep_for(1ms);
}

// errors.hpp: reentrant is "called from a handler or consumer of the same receiver"; a handler
// answering device 0 that calls device 1 of its receiver is refused, and the message says so (it
// said "of that same device").
TEST_CASE("hostile call: a handler calling another device of its receiver is told it is its own receiver") {
  watchdog dog("reentrant message", 10s);
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  auto inner = rx.serve<int, int>([](const int& v) { return v; });
  std::string message;
  auto outer = rx.serve<int, int>([&](const int& v) {
    try {
      (void)devtap::cpu_context(*cpus.cpu_devices()[1]).call(inner, v);
    } catch (const devtap::call_error& e) {
      CHECK(e.code() == devtap::call_errc::reentrant);
      message = e.what();
    }
    return v;
  });
  CHECK(*rx.outfeed(*cpus.cpu_devices()[0]).call(outer, 1) == 1);
  rx.close();
  CHECK(message == "devtap: call on device 'cpu:1' from a consumer or handler of its own receiver: it could wait for "
                   "itself (call from another thread)");
}

// outfeed.md: a scope record counts once; "a reader that was waiting for its lock ... counts its
// record in lost_at_close instead of calling it". A scope record a plain scope consumer took and a
// shared one then refused (close() gave up meanwhile) was in records and in lost_at_close.
TEST_CASE("hostile call: a scope record taken by one consumer and refused by a shared one counts once") {
  watchdog dog("scope given up", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(2);
  std::atomic<bool> release{false}, blocked{false};
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  rx->attach<devtap::scope_event>([](const devtap::scope_event&) {});
  rx->attach<devtap::scope_event>(
      [&](const devtap::scope_event&, const devtap::device& d) {
        if (d.name() != "cpu:0") return;
        blocked = true;
        while (!release) std::this_thread::sleep_for(1ms);
      },
      devtap::shared);
  cpus.cpu_devices()[0]->run([](devtap::cpu_context& ctx) { auto s = ctx.scope("a"); });  // stuck at its first record
  while (!blocked) std::this_thread::sleep_for(1ms);
  cpus.cpu_devices()[1]->run([](devtap::cpu_context& ctx) { auto s = ctx.scope("b"); });
  std::this_thread::sleep_for(50ms);  // cpu:1's reader waits for the shared consumer's lock
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  release = true;
  for (int i = 0; i < 2000 && !rx->stats().devices[0].lost_at_close; ++i) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(100ms);
  const auto d = rx->stats().devices[1];
  CHECK(d.records + d.lost_at_close + d.consumer_errors == 2);  // its scope's two records, once each
  rx.reset();
}

// outfeed.md: "Nor is a coroutine given its end by such a reader". One coroutine's end took longer
// than close_timeout; the reader then gave the next coroutine its end after close() had thrown.
TEST_CASE("hostile call: once close() gave up during one consumer's end, no other consumer gets its end") {
  watchdog dog("end after give-up", 20s);
  quiet_log quiet;
  devtap::cpu_client cpus(1);
  std::atomic<bool> release{false}, close_done{false};
  std::atomic<int> late{0};
  auto rx = std::make_unique<devtap::receiver>(devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms});
  auto a = rx->attach<int>([&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (co_await in.next()) {
    }
    while (!release) std::this_thread::sleep_for(1ms);  // its end: long work
  });
  auto b = rx->attach<int>([&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (co_await in.next()) {
    }
    if (close_done) ++late;
  });
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    ctx.tap(a, 1);
    ctx.tap(b, 2);
  });
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  close_done = true;
  release = true;
  std::this_thread::sleep_for(300ms);
  CHECK(late == 0);
  rx.reset();
}

// A call through a default-constructed outfeed is refused (no_handler) and says why.
TEST_CASE("hostile call: a call through an empty outfeed says the outfeed is empty") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  auto h = rx.serve<int, int>([](const int& v) { return v; });
  std::string message;
  const auto r = devtap::detail::host_call(devtap::outfeed{}, h, 1, &message);
  CHECK(r.error() == devtap::call_errc::no_handler);
  CHECK(message == "devtap: call through an empty outfeed (default-constructed: it feeds no device; nothing was sent)");
  auto tp = rx.attach<int>([](const int&) {});
  CHECK_THROWS_WITH(devtap::outfeed{}.tap(tp, 1),
                    "devtap: tap through an empty outfeed (default-constructed: it feeds no device; nothing was written)");
  rx.close();
}

// docs/call.md: "a waiter that is not running holds up no slot". Eight waiters that are not running
// (SCHED_IDLE on a CPU a spinner holds) took the eight tickets of the window; a caller of normal
// priority then waited, with every slot free, until one of them was let run (33 to 64 ms; helper
// report of session 35). It now takes a free slot first: it is served before any of them.
TEST_CASE("hostile call: waiters that are not running do not keep a newcomer from free reply slots") {
  devtap_test::watchdog dog(60s);
  devtap_test::cpu_starver starver;  // this thread (and threads it makes from now on): CPU 0
  devtap::cpu_client cpus(1);
  auto gate = std::make_shared<std::atomic<bool>>(false);
  devtap::receiver rx({.devices = all(cpus)});
  auto echo = rx.serve<int, int>([gate](const int& v) {
    while (!*gate) std::this_thread::sleep_for(1ms);
    return v;
  });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  devtap::detail::ring_producer_side* producer = out.ring().producer;
  const auto load = [](std::uint32_t& word) { return std::atomic_ref<std::uint32_t>(word).load(); };
  std::atomic<int> bad{0};
  std::vector<std::thread> holders, starved;
  for (int t = 0; t < 64; ++t)
    holders.emplace_back([&, t] {
      const auto r = out.call(echo, t);
      if (!r.ok() || *r != t) ++bad;
    });
  REQUIRE(devtap_test::eventually([&] { return devtap::detail::free_reply_slots(out.ring()) == 0; }, 20s));
  for (int t = 0; t < 8; ++t)
    starved.emplace_back([&, t] {
      devtap_test::cpu_starver::starve_this_thread();
      const auto r = out.call(echo, 100 + t);
      if (!r.ok() || *r != 100 + t) ++bad;
    });
  REQUIRE(devtap_test::eventually([&] { return load(producer->slot_tickets_issued) == 8; }, 20s));
  starver.hold();  // the eight waiters no longer run
  *gate = true;    // the 64 are answered and give their slots back
  for (auto& t : holders) t.join();
  const std::uint32_t served_before = load(producer->slot_tickets_served);
  const auto r = out.call(echo, 7);  // behind the eight tickets
  const std::uint32_t served_after = load(producer->slot_tickets_served);
  starver.let_go();
  for (auto& t : starved) t.join();
  CHECK((r.ok() && *r == 7));
  CHECK(served_after - served_before == 1);  // its own: none of the eight went first
  CHECK(bad == 0);
  rx.close();
}

// "A call never hangs" (call.md). A receiver whose reader thread cannot start gives up on its
// devices in its constructor; work that found its outfeed meanwhile and called on it (a hand-made
// point: no handler's point exists yet) waited for ever, as giving up closed the ring only as far
// as ring_ending, and a caller gives up at ring_reader_gone (hostile review, session 38).
TEST_CASE("a call committed while the receiver's reader thread cannot start fails closed, not hangs") {
#if defined(DEVTAP_TEST_RUNTIME_STARTS_THREADS)
  SUCCEED("not under a sanitizer: its runtime starts the threads, pthread_create is not replaced");
#else
  devtap_test::watchdog dog("a reader that cannot start", 30s);
  devtap_test::quiet_log quiet;
  devtap::cpu_client cpus(1);
  std::atomic<bool> calling{false};
  auto work = cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) -> int {
    for (;;) {  // waits for the receiver below to attach
      std::optional<devtap::outfeed> out;
      try {
        out.emplace(ctx.device().attached_outfeed("probe"));
      } catch (const devtap::outfeed_error&) {
        std::this_thread::sleep_for(20us);
        continue;
      }
      const devtap::call_point<int, int> forged{devtap::detail::call_id_flag | 1u, 0, out->receiver_id()};
      calling = true;
      try {
        return ctx.call(forged, 1);
      } catch (const devtap::call_error& e) {
        return -static_cast<int>(e.code());
      } catch (const devtap::outfeed_error&) {
        return -100;  // (refused before its request was written: also no hang)
      }
    }
  });
  threads_until_failure = 0;      // the only device's reader
  failing_thread_takes_ms = 300;  // meanwhile the work commits its call
  try {
    devtap::receiver rx({.devices = all(cpus)});
    FAIL("the receiver opened although its reader thread could not start");
  } catch (const devtap::outfeed_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("could not start its readers"));
  }
  threads_until_failure = -1;
  failing_thread_takes_ms = 0;
  CHECK(calling.load());
  REQUIRE(work.wait_for(10s) == std::future_status::ready);
  CHECK(work.get() == -static_cast<int>(devtap::call_errc::closed));
#endif
}
