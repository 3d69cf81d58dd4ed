// A receiver over devices of one's own backend that do not keep the contract of docs/backends.md:
// rings that are not what was asked for, after_pending_work callbacks run twice or run and then
// refused, a device that says host threads cannot tap it. Each gets a clear error or is made
// harmless; no device is left attached.
#include <devtap/receiver/receiver.hpp>
#include <devtap/ring/memory.hpp>

#include "../hostile.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

using namespace std::chrono_literals;

namespace {

enum class bad_ring { none, null, throws, smaller, zero, no_memory, device_only };

// A ring only the device produces into, shaped like a CUDA one: the host's view has no producer side.
struct device_only_ring final : devtap::detail::ring_allocation {
  explicit device_only_ring(std::uint64_t capacity) : memory(capacity) {
    producer = memory.producer;
    host = memory.host;
    host.producer = nullptr;
    host_can_produce = false;
    producers_wake_reader = false;
  }
  std::optional<std::uint64_t> claimed_position(std::chrono::steady_clock::time_point) const override {
    return std::atomic_ref<std::uint64_t>(memory.host.producer->tail).load(std::memory_order_acquire);
  }
  devtap::detail::host_ring_allocation memory;
};

struct own_device final : devtap::device {
  explicit own_device(int id = 0) : device(id, "own", "own:" + std::to_string(id), 0) {}
  std::unique_ptr<devtap::detail::ring_allocation> allocate_ring(std::uint64_t capacity) override {
    switch (ring) {
      case bad_ring::null: return nullptr;
      case bad_ring::throws: throw std::runtime_error("no memory on own");
      case bad_ring::smaller: return std::make_unique<devtap::detail::host_ring_allocation>(capacity / 2);
      case bad_ring::zero: {
        auto r = std::make_unique<devtap::detail::host_ring_allocation>(capacity);
        r->host.capacity = r->producer.capacity = 0;
        return r;
      }
      case bad_ring::no_memory: {
        auto r = std::make_unique<devtap::detail::host_ring_allocation>(capacity);
        r->producer.data = nullptr;
        return r;
      }
      case bad_ring::device_only: return std::make_unique<device_only_ring>(capacity);
      case bad_ring::none: break;
    }
    return std::make_unique<devtap::detail::host_ring_allocation>(capacity);
  }
  void after_pending_work(std::function<void()> fn) override {
    if (twice) {  // at once on another thread and on this one
      std::thread other([this, fn] { run_pending_work_callback(fn); });
      run_pending_work_callback(fn);
      other.join();
    } else {
      run_pending_work_callback(fn);
    }
    if (throw_after) throw std::runtime_error("lost after running it");
  }
  bool host_can_tap() const noexcept override { return tappable; }
  bad_ring ring = bad_ring::none;
  bool twice = false, throw_after = false, tappable = true;
};

}  // namespace

TEST_CASE("a ring that is not what the receiver asked for is refused at construction, naming the device") {
  devtap_test::watchdog dog(60s);
  own_device a(0), b(1), c(2);
  const auto [how, text] = GENERATE(table<bad_ring, std::string>({
      {bad_ring::null, "allocate_ring(4096) returned no ring"},
      {bad_ring::throws, "allocate_ring(4096) failed: no memory on own"},
      {bad_ring::smaller, "allocate_ring(4096) returned a ring that is not one of 4096 bytes"},
      {bad_ring::zero, "allocate_ring(4096) returned a ring that is not one of 4096 bytes"},
      {bad_ring::no_memory, "allocate_ring(4096) returned a ring that is not one of 4096 bytes"},
  }));
  // (an index: each run of the case has its own a, b and c, at addresses of their own)
  own_device* bad = std::array{&a, &b, &c}[GENERATE(0, 1, 2)];
  bad->ring = how;
  INFO(bad->name());
  // (before: a null ring crashed the constructor, a smaller or empty one hung taps or close())
  CHECK_THROWS_AS(devtap::receiver({.devices = {&a, &b, &c}, .budget_bytes = 3 * 4096, .name = "picky"}), devtap::outfeed_error);
  CHECK_THROWS_WITH(devtap::receiver({.devices = {&a, &b, &c}, .budget_bytes = 3 * 4096, .name = "picky"}),
                    "devtap: receiver 'picky': device '" + bad->name() + "': " + text +
                        (text.find("not one of") != std::string::npos ? " (a view without memory, or another capacity)" : ""));
  bad->ring = bad_ring::none;
  devtap::receiver next({.devices = {&a, &b, &c}});  // none was left attached
  CHECK_NOTHROW(next.close());
}

TEST_CASE("close()'s callback run twice at once, or run and then refused, ends the stream once") {
  devtap_test::watchdog dog(60s);
  devtap_test::quiet_log quiet;
  own_device dev;
  const bool twice = GENERATE(true, false);
  dev.twice = twice;
  dev.throw_after = !twice;
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> got{0};
    devtap::receiver rx({.devices = {&dev}});
    auto point = rx.attach<int>([&](const int&) { ++got; });
    for (int i = 0; i < 100; ++i) rx.outfeed(dev).tap(point, i);
    // Twice: TSan saw the two write the same report. Run, then refused: the report said the stream
    // ended before the work, after the callback had ended it behind that work (the refusal is logged).
    CHECK_NOTHROW(rx.close());
    CHECK(got == 100);
  }
}

TEST_CASE("a device whose host_can_tap() is false refuses host taps") {
  devtap_test::quiet_log quiet;
  own_device dev;
  dev.tappable = false;
  devtap::receiver rx({.devices = {&dev}});
  auto point = rx.attach<int>([](const int&) {});
  CHECK_THROWS_AS(rx.outfeed(dev).tap(point, 1), devtap::outfeed_error);
  CHECK_NOTHROW(rx.close());
}

TEST_CASE("a ring whose host view has no producer side, as a CUDA ring's, is accepted; host taps are refused") {
  // (review: the check of allocate_ring's ring refused every CUDA ring)
  devtap_test::watchdog dog(60s);
  own_device dev;
  dev.ring = bad_ring::device_only;
  devtap::receiver rx({.devices = {&dev}, .name = "gpu-like"});
  auto point = rx.attach<int>([](const int&) {});
  CHECK_THROWS_AS(rx.outfeed(dev).tap(point, 1), devtap::outfeed_error);
  CHECK_NOTHROW(rx.close());
}
