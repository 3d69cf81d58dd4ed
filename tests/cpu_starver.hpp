#pragma once
// Keeps chosen threads off the CPU while a test does something behind their back: they run at
// SCHED_IDLE on CPU 1, where a spinner of normal priority takes the CPU between hold() and
// let_go(); the test's own thread runs on CPU 0. Tests of host threads that wake late, after
// their receiver (and the next one) are gone. With one CPU it only lowers their priority.
#include <atomic>
#include <chrono>
#include <thread>

#include <sched.h>

namespace devtap_test {

class cpu_starver {
public:
  cpu_starver() {
    sched_getaffinity(0, sizeof old_mask_, &old_mask_);
    if (two_cpus()) set_cpu(0);
    spinner_ = std::thread([this] {
      if (two_cpus()) set_cpu(1);
      while (!spin_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      spinning_ = true;
      while (spin_.load(std::memory_order_relaxed)) {
      }
    });
  }
  ~cpu_starver() {
    if (spinner_.joinable() && !spinning_) hold();  // a spinner never held waits to start: start it, to stop it
    let_go();
    sched_setaffinity(0, sizeof old_mask_, &old_mask_);
  }
  cpu_starver(const cpu_starver&) = delete;
  cpu_starver& operator=(const cpu_starver&) = delete;

  /** Called by a thread to be starved: CPU 1, SCHED_IDLE. */
  static void starve_this_thread() {
    if (two_cpus()) set_cpu(1);
    sched_param none{};
    sched_setscheduler(0, SCHED_IDLE, &none);
  }
  /** The spinner takes CPU 1; returns once it runs. */
  void hold() {
    spin_ = true;
    while (!spinning_) std::this_thread::yield();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  /** The spinner stops and is joined: the starved threads run again. After hold(). */
  void let_go() {
    if (!spinner_.joinable() || !spinning_) return;
    spin_ = false;
    spinner_.join();
  }

private:
  static bool two_cpus() { return std::thread::hardware_concurrency() >= 2; }
  static void set_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof set, &set);
  }
  cpu_set_t old_mask_;
  std::atomic<bool> spin_{false}, spinning_{false};
  std::thread spinner_;
};

}  // namespace devtap_test
