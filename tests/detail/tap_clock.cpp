// The cpu tap clock: the steady clock read through the TSC where the kernel keeps time with it.
// Every read lies between steady-clock reads taken around it (within the mapping's error), never
// goes back on a thread, and keeps doing so past the first millisecond (where the mapping starts)
// and across resamples, on several threads at once.
#include <devtap/detail/tap_clock.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

using devtap::detail::steady_now_ns;
using devtap::detail::tap_clock_ns;

namespace {
// What one thread saw over `duration_ns` of reads: the worst distance outside [before, after],
// the reads that went back, and how many reads it made.
struct clock_check {
  std::uint64_t worst_outside_ns = 0;
  std::uint64_t went_back = 0;
  std::uint64_t reads = 0;
};

clock_check check_for(std::uint64_t duration_ns) {
  clock_check c;
  const std::uint64_t start = steady_now_ns();
  std::uint64_t last = 0;
  for (;;) {
    const std::uint64_t before = steady_now_ns();
    std::uint64_t lowest = ~std::uint64_t{0}, highest = 0;
    for (int k = 0; k < 16; ++k) {  // mostly extrapolations (the hot path), between the two reads
      const std::uint64_t v = tap_clock_ns();
      if (v < last) ++c.went_back;
      last = v;
      lowest = std::min(lowest, v);
      highest = std::max(highest, v);
      ++c.reads;
    }
    const std::uint64_t after = steady_now_ns();
    if (lowest < before) c.worst_outside_ns = std::max(c.worst_outside_ns, before - lowest);
    if (highest > after) c.worst_outside_ns = std::max(c.worst_outside_ns, highest - after);
    if (after - start > duration_ns) return c;
  }
}
}  // namespace

TEST_CASE("tap clock: every read is the steady clock's time, within 5 µs, and never goes back") {
  INFO("the kernel keeps time with the TSC here: " << devtap::detail::tsc_keeps_time());
  // 30 ms: the thread's first millisecond (the steady clock itself), then the mapping, resampled
  // every 100 µs about 290 times.
  const clock_check c = check_for(30'000'000);
  INFO(c.reads << " reads; worst distance outside the steady clock reads around them: " << c.worst_outside_ns << " ns");
  CHECK(c.went_back == 0);
  CHECK(c.worst_outside_ns <= 5'000);
  CHECK(c.reads > 1000);
}

TEST_CASE("tap clock: threads that start at once each map it, and agree with the steady clock") {
  constexpr int threads = 4;
  std::vector<clock_check> seen(threads);
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back([&seen, i] { seen[static_cast<std::size_t>(i)] = check_for(10'000'000); });
  for (auto& t : pool) t.join();
  for (const clock_check& c : seen) {
    INFO(c.reads << " reads; worst distance outside: " << c.worst_outside_ns << " ns");
    CHECK(c.went_back == 0);
    CHECK(c.worst_outside_ns <= 5'000);
  }
}

TEST_CASE("tap clock: a thread that reads rarely (longer than a resample apart) stays on the steady clock") {
  for (int k = 0; k < 20; ++k) {
    const std::uint64_t before = steady_now_ns();
    const std::uint64_t t = tap_clock_ns();
    const std::uint64_t after = steady_now_ns();
    CHECK(t + 5'000 >= before);
    CHECK(t <= after + 5'000);
    std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
}
