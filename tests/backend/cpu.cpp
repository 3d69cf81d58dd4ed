// The cpu backend: devices that run work on their own threads.
#include "test_backends.hpp"
#include "../thread_failure.hpp"

#include <devtap/backend/cpu.hpp>
#include <devtap/errors.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <iterator>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

using devtap::cpu_client;
using devtap::cpu_context;
using devtap::cpu_device;

namespace {

struct work_failed : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

static_assert(devtap::backend_policy<devtap::cpu_backend>);
static_assert(devtap::cpu_backend::name == "cpu" && devtap::cpu_backend::priority == 0 && devtap::cpu_backend::required);
static_assert(devtap::cpu_work<void (*)()>);
static_assert(devtap::cpu_work<int (*)(cpu_context&)>);
static_assert(!devtap::cpu_work<int>);
static_assert(!devtap::cpu_work<void (*)(int)>);

TEST_CASE("cpu client: devices, names, platform", "[cpu]") {
  cpu_client c(3, {1, 2});
  CHECK(c.platform() == "cpu");
  CHECK(c.device_count() == 3);
  CHECK(c.process_index() == 1);
  CHECK(c.process_count() == 2);
  for (int i = 0; i < 3; ++i) {
    const devtap::device& d = *c.local_devices()[static_cast<std::size_t>(i)];
    CHECK(d.id() == i);
    CHECK(d.platform() == "cpu");
    CHECK(d.name() == "cpu:" + std::to_string(i));
    CHECK(d.process_index() == 1);
    CHECK(d.host_can_tap());
    CHECK(&d == c.cpu_devices()[static_cast<std::size_t>(i)]);
  }
  CHECK_THROWS_AS(cpu_client(0), devtap::backend_error);
  CHECK_THROWS_WITH(cpu_client(0), "devtap::cpu_client(0): needs at least one device");
  CHECK_THROWS_WITH(cpu_client(-1), "devtap::cpu_client(-1): needs at least one device");
  // Before, no bound: cpu_client(INT_MAX) reserved 16 GiB, then started threads till the system refused.
  CHECK_THROWS_WITH(cpu_client(1025), "devtap::cpu_client(1025): at most 1024 devices (one thread each)");
  CHECK_THROWS_AS(cpu_client(std::numeric_limits<int>::max()), devtap::backend_error);
  CHECK(cpu_client(1024).device_count() == 1024);
}

TEST_CASE("a cpu client whose device thread cannot start says which, and leaves no thread behind", "[cpu]") {
#if defined(DEVTAP_TEST_RUNTIME_STARTS_THREADS)
  SUCCEED("not under a sanitizer: its runtime starts the threads, pthread_create is not replaced");
#else
  // Before, a bare std::system_error ("Resource temporarily unavailable") without devtap's name.
  const auto threads = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/task"), std::filesystem::directory_iterator());
  };
  const auto before = threads();
  for (const int failing : {0, 2}) {
    threads_until_failure = failing;
    CHECK_THROWS_WITH(cpu_client(3), "devtap::cpu_client(3): cannot start the thread of device cpu:" +
                                          std::to_string(failing) + ": " + std::system_error(EAGAIN, std::generic_category()).what());
    threads_until_failure = -1;
    CHECK(threads() == before);  // the devices made before the failure were joined
  }
  cpu_client c(3);  // a new client starts as usual
  CHECK(c.cpu_devices()[2]->run([] { return 7; }) == 7);
#endif
}

TEST_CASE("run: returns the result, with or without a context", "[cpu]") {
  cpu_client c(1);
  cpu_device& d = *c.cpu_devices()[0];
  CHECK(d.run([] { return 42; }) == 42);
  CHECK(d.run([](cpu_context& ctx) { return &ctx.device(); }) == &d);
  int touched = 0;
  d.run([&] { touched = 1; });  // void work
  CHECK(touched == 1);
  int value = 7;
  int& ref = d.run([&]() -> int& { return value; });  // references come back as references
  CHECK(&ref == &value);
  auto moved = d.run([p = std::make_unique<int>(5)] { return *p; });  // move-only work
  CHECK(moved == 5);
}

TEST_CASE("run: rethrows the work's exception in the caller", "[cpu]") {
  cpu_client c(1);
  cpu_device& d = *c.cpu_devices()[0];
  CHECK_THROWS_AS(d.run([] { throw work_failed("bad step"); }), work_failed);
  CHECK_THROWS_WITH(d.run([](cpu_context&) -> int { throw work_failed("bad step 2"); }), "bad step 2");
  CHECK(d.run([] { return 1; }) == 1);  // the device carries on
}

TEST_CASE("submit: futures, in submission order, exceptions in the future", "[cpu]") {
  cpu_client c(1);
  cpu_device& d = *c.cpu_devices()[0];
  std::vector<int> order;  // touched only by the device thread
  std::vector<std::future<int>> results;
  for (int i = 0; i < 100; ++i)
    results.push_back(d.submit([&order, i] {
      order.push_back(i);
      return i * i;
    }));
  for (int i = 0; i < 100; ++i) CHECK(results[static_cast<std::size_t>(i)].get() == i * i);
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[static_cast<std::size_t>(i)] = i;
  CHECK(order == expected);

  auto failing = d.submit([](cpu_context&) -> int { throw work_failed("late"); });
  CHECK_THROWS_AS(failing.get(), work_failed);
  auto move_only = d.submit([p = std::make_unique<int>(9)](cpu_context&) { return *p; });
  CHECK(move_only.get() == 9);
}

TEST_CASE("each device has its own thread", "[cpu]") {
  cpu_client c(4);
  std::set<std::thread::id> ids;
  for (cpu_device* d : c.cpu_devices()) {
    const auto a = d->run([] { return std::this_thread::get_id(); });
    const auto b = d->run([] { return std::this_thread::get_id(); });
    CHECK(a == b);
    CHECK(a != std::this_thread::get_id());
    ids.insert(a);
  }
  CHECK(ids.size() == 4);
}

TEST_CASE("devices run concurrently", "[cpu]") {
  cpu_client c(2);
  std::promise<void> ping;
  std::promise<void> pong;
  // Device 0 waits for device 1: only possible if they run at the same time.
  auto a = c.cpu_devices()[0]->submit([&] {
    ping.set_value();
    return pong.get_future().wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  });
  auto b = c.cpu_devices()[1]->submit([&] {
    ping.get_future().wait();
    pong.set_value();
  });
  b.get();
  CHECK(a.get());
}

TEST_CASE("run from the device's own thread runs at once instead of deadlocking", "[cpu]") {
  cpu_client c(1);
  cpu_device& d = *c.cpu_devices()[0];
  CHECK(d.run([&d](cpu_context&) { return d.run([] { return 3; }) + 1; }) == 4);
}

TEST_CASE("after_pending_work runs behind the queued work", "[cpu]") {
  cpu_client c(1);
  cpu_device& d = *c.cpu_devices()[0];
  std::atomic<int> done{0};
  for (int i = 0; i < 10; ++i)
    d.submit([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      done.fetch_add(1);
    });
  std::promise<int> seen;
  d.after_pending_work([&] { seen.set_value(done.load()); });
  CHECK(seen.get_future().get() == 10);
}

TEST_CASE("an after_pending_work callback that throws is logged, not fatal", "[cpu]") {
  devtap_test::log_capture log;
  cpu_client c(1);
  cpu_device& d = *c.cpu_devices()[0];
  d.after_pending_work([] { throw work_failed("callback broke"); });
  CHECK(d.run([] { return 1; }) == 1);
  CHECK(log.count(devtap::log_level::error, "cpu:0: after_pending_work callback threw: callback broke") == 1);
  d.after_pending_work([] { throw 42; });  // not a std::exception
  CHECK(d.run([] { return 2; }) == 2);
  CHECK(log.count(devtap::log_level::error, "cpu:0: after_pending_work callback threw an unknown exception") == 1);
  CHECK(log.lines(devtap::log_level::error).size() == 2);
}

TEST_CASE("destroying a client runs queued work, then joins its threads", "[cpu]") {
  std::atomic<int> done{0};
  std::vector<std::future<void>> results;
  {
    cpu_client c(2);
    for (int i = 0; i < 50; ++i)
      for (cpu_device* d : c.cpu_devices())
        results.push_back(d->submit([&done] {
          std::this_thread::sleep_for(std::chrono::microseconds(100));
          done.fetch_add(1);
        }));
  }
  CHECK(done == 100);
  for (auto& r : results) CHECK_NOTHROW(r.get());  // no broken promises
}

TEST_CASE("destroying a client keeps every device until no queue holds work: work on one may use another", "[cpu]") {
  std::future<int> result;
  std::atomic<int> chained{0};
  {
    cpu_client c(3);
    cpu_device* d0 = c.cpu_devices()[0];
    cpu_device* d1 = c.cpu_devices()[1];
    cpu_device* d2 = c.cpu_devices()[2];
    // Queued on cpu:0 while cpu:1 and cpu:2 are idle: the destructor destroyed them (last first)
    // before cpu:0 ran this, which then used freed devices (ASan: heap-use-after-free).
    result = d0->submit([d1, d2, &chained] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      return d1->run([d2, &chained] {
        (void)d2->submit([&chained] { chained = 1; });  // queued on cpu:2 from cpu:1's work, late
        return 7;
      });
    });
  }
  CHECK(result.get() == 7);
  CHECK(chained == 1);
}

TEST_CASE("a client destroyed from its own device's work keeps its devices, threads and all", "[cpu]") {
  devtap_test::log_capture log;
  auto c = std::make_unique<cpu_client>(2);
  cpu_device& d1 = *c->cpu_devices()[1];
  // It used to join its own thread (std::terminate: "Resource deadlock avoided"), as std::exit from
  // device work did with a function-local static client.
  d1.submit([&c] { c.reset(); }).get();
  CHECK(c == nullptr);
  CHECK(log.count(devtap::log_level::warn,
                  "cpu_client destroyed from the work of its device 'cpu:1': its 2 device(s) are kept, threads and "
                  "all, until the process exits") == 1);
  CHECK(d1.run([] { return 7; }) == 7);  // kept: it still runs work
}

TEST_CASE("allocate_ring gives a host ring the host may tap", "[cpu]") {
  cpu_client c(1);
  auto ring = c.cpu_devices()[0]->allocate_ring(4096);
  REQUIRE(ring);
  CHECK(ring->host.capacity == 4096);
  CHECK(ring->host_can_produce);
  CHECK(ring->producers_wake_reader);
}

TEST_CASE("DEVTAP_CPU_DEVICES parsing", "[cpu]") {
  using devtap::detail::cpu_device_count_from;
  CHECK(cpu_device_count_from(nullptr) == 1);
  CHECK(cpu_device_count_from("") == 1);
  CHECK(cpu_device_count_from("4") == 4);
  CHECK(cpu_device_count_from("1024") == 1024);
  CHECK(cpu_device_count_from(" 2") == 2);  // as a shell or a Windows tool may write it
  CHECK(cpu_device_count_from("3\r\n") == 3);
  CHECK(cpu_device_count_from(" \t") == 1);  // blank: as unset
  for (const char* bad : {"0", "-1", "-0", "-4", "+2", "abc", "2x", "2 2", "1025", "99999999999"})
    CHECK_THROWS_AS(cpu_device_count_from(bad), devtap::backend_error);
  CHECK_THROWS_WITH(cpu_device_count_from("abc"),
                    "DEVTAP_CPU_DEVICES='abc' is not a valid device count (expected an integer from 1 to 1024)");
  // A control byte or a non-ASCII one is shown (a no-break space looked like a space the trim missed).
  CHECK_THROWS_WITH(cpu_device_count_from("4\x1b[2J\xc2\xa0"),
                    "DEVTAP_CPU_DEVICES='4\\x1b[2J\\xc2\\xa0' is not a valid device count (expected an integer from 1 to 1024)");
}

TEST_CASE("as_cpu_device and as_cpu_client check the backend", "[cpu]") {
  cpu_client c(1);
  CHECK(&devtap::as_cpu_device(*c.local_devices()[0]) == c.cpu_devices()[0]);
  CHECK(&devtap::as_cpu_client(c) == &c);
  devtap_test::fake_client other("fake", 1);
  CHECK_THROWS_WITH(devtap::as_cpu_device(*other.local_devices()[0]), "Device 'fake:0' is not a cpu device");
  CHECK_THROWS_WITH(devtap::as_cpu_client(other), "Backend 'fake' is not the cpu backend");
}
