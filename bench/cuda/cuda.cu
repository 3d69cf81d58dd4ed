// GPU benchmark of the CUDA outfeed (docs/cuda.md, issue 5). A program, not a timed test.
//
//   devtap-bench-cuda [--smoke] [--csv FILE] [--compare-csv FILE] [--mib-per-cell N] [--latency-samples N]
//
// In one run, side by side:
//  1. cudaMemcpy device-to-host into pinned memory: the bandwidth reference;
//  2. in-kernel taps of 16 B ... 64 KiB payloads, end to end (kernel launch -> every record
//     consumed by a host consumer that reads every byte), per-thread `tap` (warp-aggregated
//     claims) and, for spans, `warp_tap`; taps/s, GB/s and the ratio to the copy;
//  3. latency: (a) in-kernel round trip tap -> consumer -> the kernel sees the consumer's
//     acknowledgement (GPU clock), next to a bare ping-pong over mapped pinned memory (the
//     floor); (b) host-measured kernel launch -> host code runs: a tap's consumer vs
//     cudaLaunchHostFunc after the kernel;
//  4. the CPU an idle receiver of a GPU costs (it polls: CUDA producers cannot wake it);
//  5. opening a receiver on the GPU (pinned, mapped ring) at 1, 16, 64 MiB and the default budget;
//  6. peers per record size: kernel + one cudaMemcpy D2H afterwards (not live), a mapped-memory
//     mailbox (one record at a time), one launch + cudaLaunchHostFunc per record; --compare-csv
//     writes devtap's rows and theirs with the columns of docs/bench-cpu.csv plus `device`.
// Prints a table; writes every figure to a CSV (default bench-cuda.csv). Exits 77 without a GPU.
#include <devtap/devtap.hpp>

#include <cuda/atomic>
#include <cuda_runtime.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

#define BENCH_CUDA(call)                                                                                     \
  do {                                                                                                       \
    const cudaError_t bench_status_ = (call);                                                                \
    if (bench_status_ != cudaSuccess)                                                                        \
      throw std::runtime_error(std::string(#call) + ": " + cudaGetErrorString(bench_status_));                \
  } while (0)

// ---- options and output ---------------------------------------------------------------------

struct options {
  bool smoke = false;
  std::string csv = "bench-cuda.csv";
  std::string compare_csv;  // the bench-cpu.csv columns (+ device): devtap against its peers
  std::size_t mib_per_cell = 512;
  int latency_samples = 2000;
};

struct row {
  std::string section, method;
  std::uint64_t size = 0, records = 0;
  double seconds = 0, per_second = 0, gbps = 0, ratio = 0, p50_us = 0, p99_us = 0;
  std::string note;
};

std::vector<row> rows;

row make_row(std::string section, std::string method, std::uint64_t size, std::uint64_t records, double seconds = 0) {
  row r;
  r.section = std::move(section);
  r.method = std::move(method);
  r.size = size;
  r.records = records;
  r.seconds = seconds;
  return r;
}

void print_row(const row& r) {
  std::printf("%-10s %-26s %8llu %11llu %9.4f %12.4g %9.3f %7.3f %9.2f %9.2f  %s\n", r.section.c_str(), r.method.c_str(),
              static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(r.records), r.seconds,
              r.per_second, r.gbps, r.ratio, r.p50_us, r.p99_us, r.note.c_str());
  std::fflush(stdout);
  rows.push_back(r);
}

void write_csv(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::printf("cannot write %s\n", path.c_str());
    return;
  }
  std::fprintf(f, "section,method,size_bytes,records,seconds,per_second,GB_per_s,ratio_to_copy,p50_us,p99_us,note\n");
  for (const auto& r : rows)
    std::fprintf(f, "%s,%s,%llu,%llu,%.6f,%.6g,%.4f,%.4f,%.3f,%.3f,\"%s\"\n", r.section.c_str(), r.method.c_str(),
                 static_cast<unsigned long long>(r.size), static_cast<unsigned long long>(r.records), r.seconds,
                 r.per_second, r.gbps, r.ratio, r.p50_us, r.p99_us, r.note.c_str());
  std::fclose(f);
  std::printf("wrote %s\n", path.c_str());
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

// ---- kernels --------------------------------------------------------------------------------

template <int N>
struct blob {  // a raw record of exactly N payload bytes
  std::uint64_t w[N / 8];
};

__device__ inline std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

template <int N>
__global__ void tap_raw(devtap::outfeed out, devtap::tap_point<blob<N>> p, std::uint64_t per_thread) {
  const std::uint64_t gid = blockIdx.x * blockDim.x + threadIdx.x;
  blob<N> b;
#pragma unroll
  for (int k = 0; k < N / 8; ++k) b.w[k] = gid * 0x9e3779b97f4a7c15ull + k;
  for (std::uint64_t i = 0; i < per_thread; ++i) {
    b.w[0] = i;
    out.tap(p, b);
  }
}

__global__ void tap_span(devtap::outfeed out, devtap::tap_point<std::span<const std::byte>> p, const std::byte* src,
                         std::size_t bytes, std::uint64_t per_thread, std::uint64_t src_records) {
  const std::uint64_t gid = blockIdx.x * blockDim.x + threadIdx.x;
  for (std::uint64_t i = 0; i < per_thread; ++i)
    out.tap(p, std::span<const std::byte>(src + ((gid * per_thread + i) % src_records) * bytes, bytes));
}

__global__ void warp_tap_span(devtap::outfeed out, devtap::tap_point<std::span<const std::byte>> p,
                              const std::byte* src, std::size_t bytes, std::uint64_t per_warp,
                              std::uint64_t src_records) {
  const std::uint64_t warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  // Every lane runs every iteration (blocks are whole warps): the named whole-warp form, whose
  // lanes share the copy (unnamed, the first lane copies alone).
  for (std::uint64_t i = 0; i < per_warp; ++i)
    devtap::warp_tap(0xffffffffu, out, p,
                     std::span<const std::byte>(src + ((warp * per_warp + i) % src_records) * bytes, bytes));
}

struct ping {
  std::uint32_t seq;
  std::uint32_t pad;
  std::uint64_t t0;
};

constexpr std::uint64_t spin_limit_ns = 1'000'000'000;  // a lost reply ends the measurement, not the program

__global__ void tap_round_trips(devtap::outfeed out, devtap::tap_point<ping> p, const unsigned* ack, double* rt_us,
                                int n) {
  cuda::atomic_ref<const unsigned, cuda::thread_scope_system> a(*ack);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t t0 = global_ns();
    out.tap(p, ping{static_cast<std::uint32_t>(i), 0, t0});
    while (a.load(cuda::std::memory_order_acquire) != static_cast<unsigned>(i + 1)) {
      if (global_ns() - t0 > spin_limit_ns) {
        rt_us[i] = -1;
        return;
      }
    }
    rt_us[i] = static_cast<double>(global_ns() - t0) * 1e-3;
  }
}

__global__ void bare_round_trips(unsigned* to_host, const unsigned* ack, double* rt_us, int n) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> out(*to_host);
  cuda::atomic_ref<const unsigned, cuda::thread_scope_system> a(*ack);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t t0 = global_ns();
    out.store(static_cast<unsigned>(i + 1), cuda::std::memory_order_release);
    while (a.load(cuda::std::memory_order_acquire) != static_cast<unsigned>(i + 1)) {
      if (global_ns() - t0 > spin_limit_ns) {
        rt_us[i] = -1;
        return;
      }
    }
    rt_us[i] = static_cast<double>(global_ns() - t0) * 1e-3;
  }
}

// devtap::call round trips (docs/call.md): one thread asks, the host's handler answers, timed on the GPU.
__global__ void call_round_trips(devtap::outfeed out, devtap::call_point<ping, std::uint32_t> ask, double* rt_us, int n) {
  for (int i = 0; i < n; ++i) {
    const std::uint64_t t0 = global_ns();
    const devtap::call_result<std::uint32_t> r = out.call(ask, ping{static_cast<std::uint32_t>(i), 0, t0});
    if (!r.ok() || *r != static_cast<std::uint32_t>(i + 1)) {
      rt_us[i] = -1;
      return;
    }
    rt_us[i] = static_cast<double>(global_ns() - t0) * 1e-3;
  }
}

__global__ void tap_once(devtap::outfeed out, devtap::tap_point<ping> p, unsigned seq) {
  out.tap(p, ping{seq, 0, 0});
}

__global__ void empty_kernel() {}

// ---- peers: the same records moved the ways a user would without devtap ---------------------

// Records of `words` 8-byte words, the pattern of tap_raw, into a device buffer (then one copy).
__global__ void stage_records(std::uint64_t* dst, std::size_t words, std::uint64_t per_thread) {
  const std::uint64_t gid = blockIdx.x * blockDim.x + threadIdx.x;
  for (std::uint64_t i = 0; i < per_thread; ++i) {
    std::uint64_t* rec = dst + (gid * per_thread + i) * words;
    rec[0] = i;
    for (std::size_t k = 1; k < words; ++k) rec[k] = gid * 0x9e3779b97f4a7c15ull + k;
  }
}

// A hand-rolled mailbox in mapped pinned memory: one thread writes a record into the slot, raises
// `full`, and waits for the host to lower it before the next one.
__global__ void mailbox_send(std::uint64_t* slot, std::size_t words, unsigned* full, int n) {
  cuda::atomic_ref<unsigned, cuda::thread_scope_system> flag(*full);
  for (int i = 0; i < n; ++i) {
    const std::uint64_t t0 = global_ns();
    while (flag.load(cuda::std::memory_order_acquire) != 0)
      if (global_ns() - t0 > spin_limit_ns) return;  // the host stopped answering: end, do not hang
    slot[0] = static_cast<std::uint64_t>(i);
    for (std::size_t k = 1; k < words; ++k) slot[k] = k;
    flag.store(1, cuda::std::memory_order_release);
  }
}

// One record per launch, for cudaLaunchHostFunc to hand to the host.
__global__ void write_one(std::uint64_t* dst, std::size_t words, std::uint64_t seq) {
  dst[0] = seq;
  for (std::size_t k = 1; k < words; ++k) dst[k] = k;
}

// ---- the benchmark --------------------------------------------------------------------------

struct bench {
  options opt;
  devtap::device* gpu = nullptr;
  int sms = 0;
  double copy_gbps = 0;

  // Consumers: they touch every byte; `consumed` counts records, `checksum` keeps the reads alive.
  std::atomic<std::uint64_t> consumed{0};
  std::uint64_t checksum = 0;
  std::vector<double> host_arrivals;  // launch-latency runs: when the consumer ran

  std::size_t cell_bytes() const { return (opt.smoke ? std::size_t{4} : opt.mib_per_cell) << 20; }

  void copy_reference() {
    const std::size_t bytes = opt.smoke ? std::size_t{8} << 20 : std::size_t{512} << 20;
    void* dev = nullptr;
    void* host = nullptr;
    BENCH_CUDA(cudaMalloc(&dev, bytes));
    BENCH_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    BENCH_CUDA(cudaMemset(dev, 1, bytes));
    BENCH_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));  // warm-up
    std::vector<double> gbps;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = clock_type::now();
      BENCH_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
      gbps.push_back(static_cast<double>(bytes) / std::chrono::duration<double>(clock_type::now() - t0).count() * 1e-9);
    }
    copy_gbps = percentile(gbps, 0.5);
    row r = make_row("copy", "cudaMemcpy D2H pinned", bytes, 5);
    r.gbps = copy_gbps;
    r.ratio = 1;
    r.note = "median of 5; the reference for ratio_to_copy";
    print_row(r);
    compared.push_back({"cudaMemcpy D2H pinned", bytes, 0, copy_gbps, "reference"});
    BENCH_CUDA(cudaFree(dev));
    BENCH_CUDA(cudaFreeHost(host));
  }

  /** Runs `launch` (which taps `records` records), waits for the kernel and for the consumers. */
  template <class Launch>
  double timed(devtap::receiver& rx, std::uint64_t records, Launch launch) {
    consumed = 0;
    const auto t0 = clock_type::now();
    launch();
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaDeviceSynchronize());
    rx.flush();
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    if (consumed.load() != records)
      throw std::runtime_error("consumed " + std::to_string(consumed.load()) + " of " + std::to_string(records) +
                               " records");
    return s;
  }

  // One throughput row (devtap's taps, or a peer's): printed, and kept for the compare CSV.
  void throughput_row(const char* section, const char* method, std::uint64_t size, std::uint64_t records,
                      double seconds, const char* note) {
    row r = make_row(section, method, size, records, seconds);
    r.per_second = static_cast<double>(records) / seconds;
    r.gbps = static_cast<double>(records) * static_cast<double>(size) / seconds * 1e-9;
    r.ratio = copy_gbps > 0 ? r.gbps / copy_gbps : 0;
    r.note = note;
    print_row(r);
    const bool devtap = std::string_view(section) == "tap";
    compared.push_back({devtap ? std::string("devtap ") + method : std::string(method), size, r.per_second, r.gbps,
                        devtap ? "devtap" : "peer"});
  }
  void report(const char* method, std::uint64_t size, std::uint64_t records, double seconds, const char* target) {
    throughput_row("tap", method, size, records, seconds, target);
  }

  template <int N>
  double raw_cell(devtap::receiver& rx, devtap::tap_point<blob<N>> p, const char* method = "tap (raw value)") {
    const std::uint64_t want = std::max<std::uint64_t>(cell_bytes() / N, 1);
    const std::uint64_t max_threads = std::uint64_t(sms) * 8 * 256;
    const std::uint64_t threads_total = std::min(max_threads, want);
    const unsigned blocks = static_cast<unsigned>(std::max<std::uint64_t>(1, threads_total / 256));
    const std::uint64_t per_thread = std::max<std::uint64_t>(1, want / (std::uint64_t{blocks} * 256));
    const std::uint64_t records = per_thread * blocks * 256;
    auto launch = [&] { tap_raw<N><<<blocks, 256>>>(rx.outfeed(*gpu), p, per_thread); };
    timed(rx, std::min<std::uint64_t>(records, blocks * 256ull), [&] {  // warm-up: one record per thread
      tap_raw<N><<<blocks, 256>>>(rx.outfeed(*gpu), p, 1);
    });
    const double seconds = timed(rx, records, launch);
    report(method, N, records, seconds, N == 16 ? "target >= 100 M taps/s at 16 B" : "");
    return static_cast<double>(records) / seconds;
  }

  void span_cells(devtap::receiver& rx, devtap::tap_point<std::span<const std::byte>> p, std::uint64_t size,
                  const std::byte* src, std::size_t src_bytes) {
    const std::size_t bytes = size - 8;  // the span encoding adds its u64 count: payload = size
    const std::uint64_t src_records = src_bytes / bytes;
    const std::uint64_t want = std::max<std::uint64_t>(cell_bytes() / size, 64);
    const char* target = size >= 4096 ? "target >= 80 % of the copy at >= 4 KiB" : "";
    {  // per thread
      const std::uint64_t threads_total = std::min<std::uint64_t>(std::uint64_t(sms) * 8 * 256, want);
      const unsigned blocks = static_cast<unsigned>(std::max<std::uint64_t>(1, threads_total / 256));
      const std::uint64_t per_thread = std::max<std::uint64_t>(1, want / (std::uint64_t{blocks} * 256));
      const std::uint64_t records = per_thread * blocks * 256;
      timed(rx, blocks * 256ull, [&] { tap_span<<<blocks, 256>>>(rx.outfeed(*gpu), p, src, bytes, 1, src_records); });
      report("tap (span, per thread)", size, records, timed(rx, records, [&] {
               tap_span<<<blocks, 256>>>(rx.outfeed(*gpu), p, src, bytes, per_thread, src_records);
             }),
             target);
    }
    {  // per warp
      const std::uint64_t warps_total = std::min<std::uint64_t>(std::uint64_t(sms) * 8 * 8, want);
      const unsigned blocks = static_cast<unsigned>(std::max<std::uint64_t>(1, (warps_total + 7) / 8));
      const std::uint64_t per_warp = std::max<std::uint64_t>(1, want / (std::uint64_t{blocks} * 8));
      const std::uint64_t records = per_warp * blocks * 8;
      timed(rx, blocks * 8ull, [&] { warp_tap_span<<<blocks, 256>>>(rx.outfeed(*gpu), p, src, bytes, 1, src_records); });
      report("warp_tap (span)", size, records, timed(rx, records, [&] {
               warp_tap_span<<<blocks, 256>>>(rx.outfeed(*gpu), p, src, bytes, per_warp, src_records);
             }),
             target);
    }
  }

  void throughput() {
    devtap::receiver rx({.devices = {gpu}, .budget_bytes = std::size_t{256} << 20, .name = "bench-cuda"});
    auto touch_words = [this](const void* data, std::size_t n) {
      std::uint64_t s = 0;
      const auto* b = static_cast<const unsigned char*>(data);
      for (std::size_t i = 0; i + 8 <= n; i += 8) {
        std::uint64_t w;
        std::memcpy(&w, b + i, 8);
        s += w;
      }
      for (std::size_t i = n & ~std::size_t{7}; i < n; ++i) s += b[i];
      checksum += s;
      consumed.fetch_add(1, std::memory_order_relaxed);
    };
    auto p16 = rx.attach<blob<16>>([=](const blob<16>& b) { touch_words(&b, sizeof b); });
    auto p64 = rx.attach<blob<64>>([=](const blob<64>& b) { touch_words(&b, sizeof b); });
    auto p256 = rx.attach<blob<256>>([=](const blob<256>& b) { touch_words(&b, sizeof b); });
    auto ps = rx.attach<std::span<const std::byte>>([=](std::span<const std::byte> s) { touch_words(s.data(), s.size()); });

    const std::size_t src_bytes = std::size_t{64} << 20;
    std::byte* src = nullptr;
    BENCH_CUDA(cudaMalloc(&src, src_bytes));
    BENCH_CUDA(cudaMemset(src, 0x5a, src_bytes));

    const double plain16 = raw_cell<16>(rx, p16);
    raw_cell<64>(rx, p64);
    raw_cell<256>(rx, p256);
    for (std::uint64_t size : {256ull, 1024ull, 4096ull, 16384ull, 65536ull}) span_cells(rx, ps, size, src, src_bytes);
    BENCH_CUDA(cudaFree(src));
    rx.close();
    // Timestamps (issue 16): the same 16 B taps, each with %globaltimer and the device's tap count.
    devtap::receiver rs({.devices = {gpu}, .budget_bytes = std::size_t{256} << 20, .name = "bench-cuda-stamped",
                         .timestamps = true});
    auto s16 = rs.attach<blob<16>>([=](const blob<16>& b) { touch_words(&b, sizeof b); });
    const double stamped16 = raw_cell<16>(rs, s16, "tap (raw value, stamped)");
    std::printf("  timestamps: 16 B stamped / unstamped = %.2f; GPU clock calibrated within +-%llu ns\n",
                stamped16 / plain16, static_cast<unsigned long long>(rs.stats().devices[0].clock_error_ns));
    rs.close();
  }

  // ---- the peers, per record size: what devtap's taps are compared with -------------------
  struct compared_row {
    std::string impl;
    std::uint64_t size;
    double per_second, gbps;
    std::string kind;  // devtap, peer, reference
  };
  std::vector<compared_row> compared;

  void peer_row(const char* method, std::uint64_t size, std::uint64_t records, double seconds, const char* note) {
    throughput_row("peer", method, size, records, seconds, note);
  }

  // Every record written into device memory by the kernel, one cudaMemcpyAsync into pinned memory
  // afterwards, every byte read on the host: the records arrive after the kernel, not while it runs.
  void staged_copy(std::uint64_t size) {
    const std::size_t words = size / 8;
    const std::uint64_t records = std::max<std::uint64_t>(cell_bytes() / size, 256);
    const std::uint64_t per_thread = std::max<std::uint64_t>(1, records / (std::uint64_t(sms) * 8 * 256));
    const unsigned blocks = static_cast<unsigned>(std::max<std::uint64_t>(1, records / (per_thread * 256)));
    const std::uint64_t n = per_thread * blocks * 256;
    const std::size_t bytes = n * size;
    std::uint64_t* dev = nullptr;
    void* host = nullptr;
    BENCH_CUDA(cudaMalloc(&dev, bytes));
    BENCH_CUDA(cudaHostAlloc(&host, bytes, cudaHostAllocDefault));
    std::uint64_t sum = 0;
    const auto t0 = clock_type::now();
    stage_records<<<blocks, 256>>>(dev, words, per_thread);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
    const auto* w = static_cast<const std::uint64_t*>(host);
    for (std::size_t i = 0; i < bytes / 8; ++i) sum += w[i];
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    checksum += sum;
    peer_row("kernel + cudaMemcpy D2H", size, n, s, "records arrive after the kernel, not live");
    BENCH_CUDA(cudaFree(dev));
    BENCH_CUDA(cudaFreeHost(host));
  }

  // A mailbox in mapped pinned memory: one record at a time, the host acknowledges each.
  void mailbox(std::uint64_t size) {
    const int n = opt.smoke ? 200 : 20000;
    const std::size_t words = size / 8;
    void* pinned = nullptr;
    BENCH_CUDA(cudaHostAlloc(&pinned, size + 128, cudaHostAllocMapped));
    auto* full = static_cast<unsigned*>(pinned);
    auto* slot = reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(pinned) + 128);
    *full = 0;
    void* dpinned = nullptr;
    BENCH_CUDA(cudaHostGetDevicePointer(&dpinned, pinned, 0));
    std::atomic_ref<unsigned> flag(*full);
    std::uint64_t sum = 0;
    int got = 0;
    const auto t0 = clock_type::now();
    mailbox_send<<<1, 1>>>(reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(dpinned) + 128), words,
                           static_cast<unsigned*>(dpinned), n);
    BENCH_CUDA(cudaGetLastError());
    const auto give_up = clock_type::now() + std::chrono::seconds(30);
    while (got < n && clock_type::now() < give_up) {
      if (flag.load(std::memory_order_acquire) == 0) continue;
      for (std::size_t k = 0; k < words; ++k) sum += slot[k];
      ++got;
      flag.store(0, std::memory_order_release);
    }
    BENCH_CUDA(cudaDeviceSynchronize());
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    checksum += sum;
    if (got != n) throw std::runtime_error("mailbox: " + std::to_string(got) + " of " + std::to_string(n) + " records");
    peer_row("mapped-memory mailbox", size, static_cast<std::uint64_t>(n), s, "one record at a time, host acknowledges");
    BENCH_CUDA(cudaFreeHost(pinned));
  }

  // One launch per record, copied back and handed to a host function (cudaLaunchHostFunc).
  void host_func(std::uint64_t size) {
    const int n = opt.smoke ? 50 : 2000;
    const std::size_t words = size / 8;
    std::uint64_t* dev = nullptr;
    void* host = nullptr;
    BENCH_CUDA(cudaMalloc(&dev, size));
    BENCH_CUDA(cudaHostAlloc(&host, size, cudaHostAllocDefault));
    cudaStream_t stream;
    BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    struct context {
      const std::uint64_t* words;
      std::size_t count;
      std::uint64_t sum = 0;
      int calls = 0;
    } ctx{static_cast<const std::uint64_t*>(host), words};
    const auto t0 = clock_type::now();
    for (int i = 0; i < n; ++i) {
      write_one<<<1, 1, 0, stream>>>(dev, words, static_cast<std::uint64_t>(i));
      BENCH_CUDA(cudaMemcpyAsync(host, dev, size, cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA(cudaLaunchHostFunc(
          stream,
          [](void* p) {
            auto* c = static_cast<context*>(p);
            for (std::size_t k = 0; k < c->count; ++k) c->sum += c->words[k];
            ++c->calls;
          },
          &ctx));
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
    checksum += ctx.sum;
    if (ctx.calls != n) throw std::runtime_error("cudaLaunchHostFunc: " + std::to_string(ctx.calls) + " calls of " + std::to_string(n));
    peer_row("launch + cudaLaunchHostFunc", size, static_cast<std::uint64_t>(n), s, "one launch and host call per record");
    BENCH_CUDA(cudaStreamDestroy(stream));
    BENCH_CUDA(cudaFree(dev));
    BENCH_CUDA(cudaFreeHost(host));
  }

  void peers() {
    for (std::uint64_t size : {16ull, 64ull, 256ull, 1024ull, 4096ull, 16384ull, 65536ull}) {
      staged_copy(size);
      mailbox(size);
      host_func(size);
    }
  }

  // The bench-cpu.csv columns, plus the GPU's name: per size, devtap's best row against the best
  // peer (ratio_best_peer) and against the copy bandwidth (ratio_reference). One run: min = max.
  void write_compare_csv(const std::string& path) const {
    if (path.empty()) return;
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) throw std::runtime_error("cannot write " + path);
    std::fprintf(f, "impl,payload_bytes,producers,records_per_s,gb_per_s,ratio_best_peer,ratio_reference,"
                    "records_per_s_min,records_per_s_max,spread_pct,runs,ratio_1p,kind,device\n");
    for (const auto& r : compared) {
      double best_peer = 0;
      for (const auto& q : compared)
        if (q.kind == "peer" && q.size == r.size) best_peer = std::max(best_peer, q.per_second);
      std::fprintf(f, "%s,%llu,%s,%.0f,%.4f,%.4f,%.4f,%.0f,%.0f,0,1,1,%s,%s\n", r.impl.c_str(),
                   static_cast<unsigned long long>(r.size), "kernel", r.per_second, r.gbps,
                   best_peer > 0 ? r.per_second / best_peer : 0.0, copy_gbps > 0 ? r.gbps / copy_gbps : 0.0,
                   r.per_second, r.per_second, r.kind.c_str(), gpu->name().c_str());
    }
    std::fclose(f);
    std::printf("wrote %s\n", path.c_str());
  }

  void latency() {
    const int n = opt.smoke ? 50 : opt.latency_samples;
    unsigned* flags = nullptr;  // [0] ack from the host, [1] bare ping to the host
    double* rt = nullptr;
    BENCH_CUDA(cudaHostAlloc(&flags, 64, cudaHostAllocMapped));
    BENCH_CUDA(cudaMallocManaged(&rt, sizeof(double) * static_cast<std::size_t>(n)));
    unsigned* dflags = nullptr;
    BENCH_CUDA(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflags), flags, 0));

    auto summarize = [&](const char* method, const std::vector<double>& us, const char* note) {
      row r = make_row("latency", method, sizeof(ping), us.size());
      r.p50_us = percentile(us, 0.5);
      r.p99_us = percentile(us, 0.99);
      r.note = note;
      print_row(r);
    };
    auto reset_samples = [&] { std::fill(rt, rt + n, -1.0); };
    auto device_samples = [&] {
      std::vector<double> v;
      for (int i = 0; i < n; ++i)
        if (rt[i] >= 0) v.push_back(rt[i]);
      if (static_cast<int>(v.size()) != n) std::printf("  (%d of %d round trips lost)\n", n - static_cast<int>(v.size()), n);
      return v;
    };

    {  // (a) in-kernel round trip through devtap
      devtap::receiver rx({.devices = {gpu}, .budget_bytes = 1u << 20, .name = "bench-latency"});
      std::atomic_ref<unsigned> ack(flags[0]);
      ack.store(0);
      auto p = rx.attach<ping>([&](const ping& q) { ack.store(q.seq + 1, std::memory_order_release); });
      reset_samples();
      tap_round_trips<<<1, 1>>>(rx.outfeed(*gpu), p, dflags, rt, n);
      BENCH_CUDA(cudaGetLastError());
      BENCH_CUDA(cudaDeviceSynchronize());
      rx.close();
      summarize("tap -> consumer -> ack", device_samples(),
                "GPU clock, one thread; round trip (tap latency + ack); target p50 <= 5 us one way");
    }
    double call_p50 = -1;
    {  // devtap::call: request through the ring, answer in a reply slot
      devtap::receiver rx({.devices = {gpu}, .budget_bytes = 1u << 20, .name = "bench-call"});
      auto ask = rx.serve<ping, std::uint32_t>([](const ping& q) { return q.seq + 1; });
      reset_samples();
      call_round_trips<<<1, 1>>>(rx.outfeed(*gpu), ask, rt, n);
      BENCH_CUDA(cudaGetLastError());
      BENCH_CUDA(cudaDeviceSynchronize());
      rx.close();
      const std::vector<double> us = device_samples();
      call_p50 = percentile(us, 0.5);
      summarize("call -> handler -> answer", us, "GPU clock, one thread; target p50 <= 3x the bare ping-pong below");
    }
    {  // the floor: the same round trip over two mapped words and a spinning host thread
      std::atomic_ref<unsigned> ack(flags[0]), ping_word(flags[1]);
      ack.store(0);
      ping_word.store(0);
      std::atomic<bool> stop{false};
      std::thread echo([&] {
        unsigned seen = 0;
        while (!stop.load(std::memory_order_relaxed)) {
          const unsigned v = ping_word.load(std::memory_order_acquire);
          if (v != seen) {
            seen = v;
            ack.store(v, std::memory_order_release);
          }
        }
      });
      reset_samples();
      bare_round_trips<<<1, 1>>>(dflags + 1, dflags, rt, n);
      BENCH_CUDA(cudaGetLastError());
      const cudaError_t synced = cudaDeviceSynchronize();
      stop = true;
      echo.join();
      BENCH_CUDA(synced);
      const std::vector<double> us = device_samples();
      summarize("bare mapped ping-pong", us, "GPU clock; a host thread spinning: the PCIe floor");
      if (call_p50 >= 0 && !us.empty())
        std::printf("  devtap::call p50 / bare ping-pong p50 = %.2f (issue 15 target <= 3)\n", call_p50 / percentile(us, 0.5));
    }
    {  // (b) host-measured: kernel launch -> host code runs
      devtap::receiver rx({.devices = {gpu}, .budget_bytes = 1u << 20, .name = "bench-launch"});
      std::atomic<unsigned> done{0};
      clock_type::time_point arrived;
      auto p = rx.attach<ping>([&](const ping& q) {
        arrived = clock_type::now();
        done.store(q.seq + 1, std::memory_order_release);
      });
      std::vector<double> tap_us, hostfunc_us;
      cudaStream_t stream;
      BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      struct slot {
        std::atomic<unsigned> done{0};
        clock_type::time_point arrived;
        unsigned seq = 0;
      } hf;
      auto wait_for = [](const std::atomic<unsigned>& d, unsigned v) {
        const auto deadline = clock_type::now() + std::chrono::seconds(5);
        while (d.load(std::memory_order_acquire) != v)
          if (clock_type::now() > deadline) throw std::runtime_error("no callback within 5 s");
      };
      for (int i = 0; i < n; ++i) {
        const auto t0 = clock_type::now();
        tap_once<<<1, 1, 0, stream>>>(rx.outfeed(*gpu), p, static_cast<unsigned>(i));
        wait_for(done, static_cast<unsigned>(i + 1));
        tap_us.push_back(std::chrono::duration<double, std::micro>(arrived - t0).count());

        hf.seq = static_cast<unsigned>(i + 1);
        const auto t1 = clock_type::now();
        empty_kernel<<<1, 1, 0, stream>>>();
        BENCH_CUDA(cudaLaunchHostFunc(
            stream,
            [](void* arg) {
              auto* s = static_cast<slot*>(arg);
              s->arrived = clock_type::now();
              s->done.store(s->seq, std::memory_order_release);
            },
            &hf));
        wait_for(hf.done, static_cast<unsigned>(i + 1));
        hostfunc_us.push_back(std::chrono::duration<double, std::micro>(hf.arrived - t1).count());
        BENCH_CUDA(cudaStreamSynchronize(stream));
      }
      BENCH_CUDA(cudaStreamDestroy(stream));
      rx.close();
      summarize("launch -> tap consumer", tap_us, "host clock; includes the launch");
      summarize("launch -> cudaLaunchHostFunc", hostfunc_us, "host clock; includes the launch");
    }
    BENCH_CUDA(cudaFreeHost(flags));
    BENCH_CUDA(cudaFree(rt));
  }

  void idle_cpu() {
    devtap::receiver rx({.devices = {gpu}, .budget_bytes = 1u << 20, .name = "bench-idle"});
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // past the receiver's spin phase
    auto cpu_seconds = [] {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    const double wall = opt.smoke ? 0.2 : 2.0;
    const double c0 = cpu_seconds();
    const auto t0 = clock_type::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(wall));
    const double used = cpu_seconds() - c0;
    const double elapsed = std::chrono::duration<double>(clock_type::now() - t0).count();
    rx.close();
    row r = make_row("idle", "receiver polling a GPU ring", 0, 0, elapsed);
    r.per_second = 100.0 * used / elapsed;
    r.note = "per_second = CPU % of one core while nothing is tapped";
    print_row(r);
  }

  // What opening a receiver on a GPU costs: its ring is pinned and mapped up front
  // (cudaHostAlloc; only its consumer words are zeroed), unlike a cpu ring. Median of a few open/close rounds per budget; the
  // default budget (256 MiB) is the last row. p50_us = open, p99_us = close (medians, in µs).
  void open_cost() {
    const std::size_t budgets[] = {std::size_t{1} << 20, std::size_t{16} << 20, std::size_t{64} << 20,
                                   devtap::receiver_options{}.budget_bytes};
    const int rounds = opt.smoke ? 1 : 5;
    for (const std::size_t budget : budgets) {
      std::vector<double> open_us, close_us;
      for (int i = 0; i < rounds; ++i) {
        const auto t0 = clock_type::now();
        devtap::receiver rx({.devices = {gpu}, .budget_bytes = budget, .name = "bench-open"});
        const auto t1 = clock_type::now();
        rx.close();
        const auto t2 = clock_type::now();
        open_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        close_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      row r = make_row("open", "receiver open + close", budget, 0);
      r.p50_us = percentile(open_us, 0.5);
      r.p99_us = percentile(close_us, 0.5);
      r.note = "size = budget_bytes; p50_us = open, p99_us = close (medians of " + std::to_string(rounds) + ")";
      print_row(r);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") opt.smoke = true;
    else if (a == "--csv" && i + 1 < argc) opt.csv = argv[++i];
    else if (a == "--compare-csv" && i + 1 < argc) opt.compare_csv = argv[++i];
    else if (a == "--mib-per-cell" && i + 1 < argc) opt.mib_per_cell = static_cast<std::size_t>(std::atoll(argv[++i]));
    else if (a == "--latency-samples" && i + 1 < argc) opt.latency_samples = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--smoke] [--csv FILE] [--compare-csv FILE] [--mib-per-cell N] [--latency-samples N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
    std::printf("devtap-bench-cuda: no usable GPU (%s): %s\n", gpu.reason.c_str(),
                gpu.nothing_to_run_on() ? "skipped" : "FAILED");
    return gpu.nothing_to_run_on() ? 77 : 1;
  }
  devtap::set_log_level(devtap::log_level::warn);
  bench b;
  b.opt = opt;
  try {
    b.gpu = devtap::devices("cuda")[0];
    BENCH_CUDA(cudaDeviceGetAttribute(&b.sms, cudaDevAttrMultiProcessorCount, b.gpu->id()));
    std::printf("devtap-bench-cuda on %s (%d SMs)%s\n", b.gpu->name().c_str(), b.sms, opt.smoke ? ", smoke sizes" : "");
    std::printf("%-10s %-26s %8s %11s %9s %12s %9s %7s %9s %9s  %s\n", "section", "method", "size_B", "records", "seconds",
                "per_second", "GB/s", "x_copy", "p50_us", "p99_us", "note");
    b.copy_reference();
    b.throughput();
    b.peers();
    b.write_compare_csv(opt.compare_csv);
    b.latency();
    b.idle_cpu();
    b.open_cost();
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    write_csv(opt.csv);
    return 1;
  }
  write_csv(opt.csv);
  return 0;
}
