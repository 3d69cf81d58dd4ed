#pragma once
// The clock of a cpu tap's stamp (receiver_options::timestamps): the host's steady clock, read
// faster. std::chrono::steady_clock costs ~20-30 ns a call (the vDSO fences the TSC read), which
// is more than a whole 16-byte tap. Where the kernel itself keeps time with the TSC, each thread
// reads the TSC alone and maps it onto the steady clock with a sample pair it refreshes every
// 100 µs, at a rate measured over its whole life (as absl's cycle clock does); elsewhere, and in a
// thread's first millisecond, it is the steady clock itself. Values never go back on a thread.
// docs/timeline.md, "The cpu tap clock".
#include <devtap/config.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** Now on the host's steady clock, in ns since its epoch. */
inline std::uint64_t steady_now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

/** Whether the kernel keeps time with the TSC (its clocksource), so the TSC is invariant and the
 *  same on every CPU: read once per process. */
inline bool tsc_keeps_time() noexcept {
#if DEVTAP_HAS_TSC
  static const bool usable = [] {
    std::FILE* f = std::fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f == nullptr) return false;
    char name[16] = {};
    const std::size_t n = std::fread(name, 1, sizeof name - 1, f);
    std::fclose(f);
    return n >= 3 && std::strncmp(name, "tsc", 3) == 0 && (n == 3 || name[3] == '\n');
  }();
  return usable;
#else
  return false;
#endif
}

#if DEVTAP_HAS_TSC
/** One thread's mapping of the TSC onto the steady clock. */
class tsc_mapping {
public:
  std::uint64_t now_ns() noexcept {
    const std::uint64_t since = __builtin_ia32_rdtsc() - base_tsc_;
    std::uint64_t ns = since < resample_ticks_ ? base_ns_ + static_cast<std::uint64_t>(static_cast<double>(since) * ns_per_tick_)
                                               : slow_now_ns();
    if (ns < last_ns_) ns = last_ns_;  // a new sample may sit a few ns behind the extrapolation
    last_ns_ = ns;
    return ns;
  }

  /** The steady-clock time the rate is first measured over, and how far an extrapolation runs. */
  static constexpr std::uint64_t rate_span_ns = 1'000'000, resample_ns = 100'000;

private:
  // A (TSC, steady clock) pair taken close together: the narrowest of three tries; false if even
  // that one was interrupted (wider than 1 µs at the rate known so far, or 10^4 ticks before).
  bool sample(std::uint64_t& tsc, std::uint64_t& ns) const noexcept {
    std::uint64_t width = ~std::uint64_t{0};
    for (int k = 0; k < 3; ++k) {
      const std::uint64_t before = __builtin_ia32_rdtsc();
      const std::uint64_t t = steady_now_ns();
      const std::uint64_t after = __builtin_ia32_rdtsc();
      if (after - before < width) {
        width = after - before;
        tsc = before + width / 2;
        ns = t;
      }
    }
    const double limit = ns_per_tick_ > 0 ? 1000.0 / ns_per_tick_ : 10'000.0;
    return static_cast<double>(width) < limit;
  }

  std::uint64_t slow_now_ns() noexcept {
    std::uint64_t tsc = 0, ns = 0;
    if (first_ns_ == 0) {  // the thread's first stamp: where the rate will be measured from
      if (sample(tsc, ns)) first_tsc_ = tsc, first_ns_ = ns;
      return steady_now_ns();
    }
    if (ns_per_tick_ == 0 && steady_now_ns() - first_ns_ < rate_span_ns) return steady_now_ns();  // too soon to measure
    if (!sample(tsc, ns) || tsc <= first_tsc_ || ns <= first_ns_) {
      resample_ticks_ = 0;  // try again at the next stamp
      return steady_now_ns();
    }
    ns_per_tick_ = static_cast<double>(ns - first_ns_) / static_cast<double>(tsc - first_tsc_);  // over the thread's life
    base_tsc_ = tsc;
    base_ns_ = ns;
    resample_ticks_ = static_cast<std::uint64_t>(static_cast<double>(resample_ns) / ns_per_tick_);
    return ns;
  }

  std::uint64_t base_tsc_ = 0, base_ns_ = 0;    // the last sample
  std::uint64_t first_tsc_ = 0, first_ns_ = 0;  // the first: the rate is measured from it
  double ns_per_tick_ = 0;                      // 0 until measured over rate_span_ns
  std::uint64_t resample_ticks_ = 0;            // 0: no extrapolation (the slow path decides)
  std::uint64_t last_ns_ = 0;                   // what this thread read last
};
#endif

/** Now on the host's steady clock, in ns since its epoch, for a cpu tap's stamp (see the top). */
inline std::uint64_t tap_clock_ns() noexcept {
#if DEVTAP_HAS_TSC
  if (tsc_keeps_time()) {
    thread_local tsc_mapping mapping;
    return mapping.now_ns();
  }
#endif
  return steady_now_ns();
}

}  // namespace detail
DEVTAP_END_NAMESPACE
