#pragma once
// What the hostile tests share: a watchdog that turns a hang into a failure naming the test, a
// wait for a condition with a limit, log sinks that keep expected errors off the output, and a
// way to run a test's threads on one CPU, and a record that stops its device's stream.
#include <devtap/log.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/ring/wake.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sched.h>

namespace devtap_test {

// Aborts the whole run, naming `what`, unless destroyed within `limit`: a hang fails loudly
// instead of eating CI's time.
class watchdog {
public:
  watchdog(std::string what, std::chrono::milliseconds limit) : what_(std::move(what)) {
    thread_ = std::thread([this, limit] {
      std::unique_lock lock(mutex_);
      if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
        std::fprintf(stderr, "\nHANG: %s did not finish within %lld ms\n", what_.c_str(),
                     static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::abort();
      }
    });
  }
  // Named after the running test case.
  explicit watchdog(std::chrono::milliseconds limit)
      : watchdog(Catch::getResultCapture().getCurrentTestName(), limit) {}
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Polls `done` every millisecond until it holds or `limit` passes; says whether it held. The default
// is long: a wait that holds costs only its time, and a loaded 2-core runner under TSan is slow.
template <class F>
bool eventually(F done, std::chrono::milliseconds limit = std::chrono::milliseconds(30000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// Silences devtap's log for the test's scope (errors the test provokes on purpose).
struct quiet_log {
  quiet_log() { devtap::set_log_sink([](devtap::log_level, std::string_view) {}); }
  ~quiet_log() { devtap::set_log_sink({}); }
  quiet_log(const quiet_log&) = delete;
  quiet_log& operator=(const quiet_log&) = delete;
};

// Runs the calling thread, and every thread it starts while this lives (they inherit the mask: a
// receiver's readers, a cpu_client's workers), on one CPU: what a one-CPU container does to
// fairness between threads that a test on two cores would not see. Restores the mask at its end.
class one_cpu {
public:
  one_cpu() {
    sched_getaffinity(0, sizeof old_mask_, &old_mask_);
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &old_mask_)) {
        CPU_SET(cpu, &one);
        break;
      }
    sched_setaffinity(0, sizeof one, &one);
  }
  ~one_cpu() { sched_setaffinity(0, sizeof old_mask_, &old_mask_); }
  one_cpu(const one_cpu&) = delete;
  one_cpu& operator=(const one_cpu&) = delete;

private:
  cpu_set_t old_mask_;
};

// Keeps devtap's error lines for the test's scope (from any thread), and restores the default sink
// at its end, even when a REQUIRE fails: a sink must not outlive what it writes into.
class captured_log {
public:
  captured_log() {
    devtap::set_log_sink([this](devtap::log_level level, std::string_view line) {
      std::lock_guard lock(mutex_);
      if (level == devtap::log_level::error) errors_.emplace_back(line);
    });
  }
  ~captured_log() { devtap::set_log_sink({}); }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;
  std::vector<std::string> errors() const {
    std::lock_guard lock(mutex_);
    return errors_;
  }

private:
  mutable std::mutex mutex_;
  std::vector<std::string> errors_;
};

// Writes, at the ring's next free place, a record shorter than a header under a valid stamp, as
// damaged device memory would: that device's reader stops its stream (stats().stream_failed).
// False when the ring had no room for it.
inline bool write_malformed_record(const devtap::detail::ring_view& ring) {
  std::uint64_t pos;
  if (!devtap::detail::try_claim<devtap::detail::host_atomics>(ring, 64, pos)) return false;
  ring.header_at(pos)->length = 8;
  std::atomic_ref<std::uint64_t>(ring.header_at(pos)->stamp)
      .store(ring.stamp(pos, devtap::detail::stamp_record), std::memory_order_release);
  devtap::detail::wake_reader(ring);  // written by hand, not by commit(): ring the doorbell as commit() would
  return true;
}

}  // namespace devtap_test
