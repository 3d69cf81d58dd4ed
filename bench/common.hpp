#pragma once
// Shared pieces of the CPU benchmarks: clocks, waiting, the record source, the checksum that makes
// every consumer read every byte, and summary statistics. Not part of devtap.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>

namespace bench {

/** The in-flight byte budget every pipeline gets (devtap: its ring, headers included). */
inline constexpr std::size_t budget_bytes = std::size_t{1} << 20;

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/** How the hand-built peers wait: spin, then yield (never sleep: their best case for throughput). */
struct backoff {
  unsigned n = 0;
  void pause() {
    if (n < 64) {
      ++n;
      cpu_relax();
    } else {
      std::this_thread::yield();
    }
  }
  void reset() { n = 0; }
};

/** Keeps the compiler from dropping a store nobody reads (the memcpy reference). */
inline void clobber(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

/** Reads every byte of [p, p+n) (n a multiple of 8) as 64-bit words and sums them. */
inline std::uint64_t checksum(const void* p, std::size_t n) {
  const unsigned char* b = static_cast<const unsigned char*>(p);
  std::uint64_t s = 0;
  for (std::size_t i = 0; i < n; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, b + i, 8);
    s += w;
  }
  return s;
}

/** A fixed-size record of S bytes (what 16 B and 256 B taps carry; peers' slots at every size). */
template <std::size_t S>
using record = std::array<std::uint64_t, S / 8>;

/** Where producers take their records from: a 1 MiB pool of pseudo-random words, cycled through.
 *  Record i is the S bytes at (i mod records-per-pool) * S. Knows the checksum of any range. */
class source {
public:
  explicit source(std::size_t record_size, std::size_t pool_bytes = std::size_t{1} << 20)
      : size_(record_size), per_pool_(pool_bytes / record_size), words_(pool_bytes / 8) {
    std::uint64_t x = 0x9e3779b97f4a7c15ull ^ record_size;
    for (auto& w : words_) {  // splitmix64
      x += 0x9e3779b97f4a7c15ull;
      std::uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      w = z ^ (z >> 31);
    }
    prefix_.assign(per_pool_ + 1, 0);
    for (std::size_t k = 0; k < per_pool_; ++k) prefix_[k + 1] = prefix_[k] + checksum(at(k), size_);
  }

  std::size_t size() const { return size_; }
  const std::byte* at(std::uint64_t i) const {
    return reinterpret_cast<const std::byte*>(words_.data()) + (i % per_pool_) * size_;
  }
  /** Checksum of records [first, first + count). */
  std::uint64_t expected(std::uint64_t first, std::uint64_t count) const { return upto(first + count) - upto(first); }

private:
  std::uint64_t upto(std::uint64_t n) const { return (n / per_pool_) * prefix_[per_pool_] + prefix_[n % per_pool_]; }
  std::size_t size_;
  std::size_t per_pool_;
  std::vector<std::uint64_t> words_;
  std::vector<std::uint64_t> prefix_;
};

/** Record `i` of the pool as a fixed-size record (the pool is 8-byte aligned). */
template <std::size_t S>
const record<S>& record_at(const source& src, std::uint64_t i) {
  return *reinterpret_cast<const record<S>*>(src.at(i));
}

/** One timed run: `records` went from producers to the consumer in `seconds`; `sum` is what it read. */
struct sample {
  double seconds = 0;
  std::uint64_t records = 0;
  std::uint64_t sum = 0;
};

/** Records of [0, n) split over `producers`: producer p gets [first(p), first(p + 1)). */
inline std::uint64_t share_first(std::uint64_t n, int producers, int p) { return n * static_cast<std::uint64_t>(p) / static_cast<std::uint64_t>(producers); }

/** Median, min and max of a set of figures. */
struct summary {
  double median = 0, min = 0, max = 0;
  std::size_t runs = 0;
  /** (max - min) / median: how noisy the runs were. */
  double spread() const { return median > 0 ? (max - min) / median : 0; }
};

inline summary summarize(std::vector<double> v) {
  summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.runs = v.size();
  s.min = v.front();
  s.max = v.back();
  const std::size_t m = v.size() / 2;
  s.median = v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
  return s;
}

/** Median and quartiles of a few ratios (NaN when there are none). */
struct quartiles {
  double median = NAN, q1 = NAN, q3 = NAN;
  std::size_t n = 0;
};

inline quartiles quartiles_of(std::vector<double> v) {
  quartiles q;
  if (v.empty()) return q;
  std::sort(v.begin(), v.end());
  auto at = [&v](double p) {  // linear interpolation between the closest ranks
    const double x = p * static_cast<double>(v.size() - 1);
    const auto i = static_cast<std::size_t>(x);
    return i + 1 < v.size() ? v[i] + (x - static_cast<double>(i)) * (v[i + 1] - v[i]) : v[i];
  };
  q.median = at(0.5);
  q.q1 = at(0.25);
  q.q3 = at(0.75);
  q.n = v.size();
  return q;
}

/** p-th percentile (0..1) of samples, nearest rank. */
inline double percentile(std::vector<std::uint64_t>& v, double p) {
  if (v.empty()) return 0;
  std::size_t k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return static_cast<double>(v[k]);
}

/** CPU time (user + system) this process has used so far, in seconds. */
inline double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return s(ru.ru_utime) + s(ru.ru_stime);
}

/** Where threads run. With pinning on (the default on 2+ CPUs) the consumer gets a CPU of its own (the
 *  last allowed one) and the producers share the first: the same topology for every pipeline, and no
 *  run where the scheduler happens to stack producer and consumer on one CPU. */
struct placement {
  static placement& get() {
    static placement p;
    return p;
  }
  bool enabled = false;
  int producer_cpu = -1, consumer_cpu = -1;

  void init(bool want) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (!want || sched_getaffinity(0, sizeof set, &set) != 0) return;
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) {
        if (producer_cpu < 0) producer_cpu = c;
        consumer_cpu = c;
      }
    enabled = producer_cpu >= 0 && consumer_cpu != producer_cpu;
  }
  static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  /** Call on a producer thread / the consumer thread. */
  void producer() const {
    if (enabled) pin(producer_cpu);
  }
  void consumer() const {
    if (enabled) pin(consumer_cpu);
  }
};

/** Starts producers and consumer together: they spin on `go`, the timer starts when it is set. */
struct start_gate {
  std::atomic<bool> go{false};
  void wait() const {
    backoff b;
    while (!go.load(std::memory_order_acquire)) b.pause();
  }
  std::uint64_t open() {
    const std::uint64_t t = now_ns();
    go.store(true, std::memory_order_release);
    return t;
  }
};

}  // namespace bench
