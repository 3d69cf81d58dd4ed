// The CUDA outfeed on a GPU (issue 5): taps from inside running kernels into host consumers.
// Without a usable GPU the executable exits 77 (meson: SKIP) — it is then compiled, not run.
// `outfeed_gpu [case ...]` runs some cases; meson runs each case as its own test.
#include <devtap/devtap.hpp>

#include "harness.hpp"

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

using namespace std::chrono_literals;

// ---- records and the values device and host agree on ---------------------------------------

struct seq_rec {  // 16 bytes: the hot path
  std::uint32_t thread;
  std::uint32_t seq;
  std::uint64_t check;
};

__host__ __device__ inline std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
__host__ __device__ inline std::uint64_t seq_check(std::uint32_t thread, std::uint32_t seq) {
  return mix((std::uint64_t{thread} << 32) | seq);
}
__host__ __device__ inline std::uint32_t table_value(std::uint32_t k) { return static_cast<std::uint32_t>(mix(k)); }
__host__ __device__ inline std::uint8_t byte_value(std::uint32_t k) { return static_cast<std::uint8_t>(k * 7 + 1); }
std::vector<std::uint32_t> table_values(std::uint32_t n) {
  std::vector<std::uint32_t> v(n);
  for (std::uint32_t k = 0; k < n; ++k) v[k] = table_value(k);
  return v;
}
std::vector<std::uint8_t> byte_values(std::uint32_t n) {
  std::vector<std::uint8_t> v(n);
  for (std::uint32_t k = 0; k < n; ++k) v[k] = byte_value(k);
  return v;
}

struct span_rec {
  std::uint32_t gid;
  std::uint32_t i;
  std::uint32_t off;
  std::span<const std::uint32_t> xs;
};

struct big_rec {  // raw, 200 bytes: warp_tap copies it 8 bytes per lane
  std::uint32_t warp;
  std::uint32_t words[49];
};

__device__ inline unsigned global_id() { return blockIdx.x * blockDim.x + threadIdx.x; }

devtap::device& gpu(int i = 0) { return *devtap::devices("cuda")[static_cast<std::size_t>(i)]; }

// close()'s report: what its tap_error says, or "" when it threw nothing.
std::string close_message(devtap::receiver& rx) {
  try {
    rx.close();
  } catch (const devtap::tap_error& e) {
    return e.what();
  }
  return {};
}

devtap::receiver_options on_gpu(std::size_t budget, devtap::overflow_policy policy = devtap::overflow_policy::block) {
  devtap::receiver_options o;
  o.devices = {&gpu()};
  o.budget_bytes = budget;
  o.overflow = policy;
  o.name = "gpu-test";
  return o;
}

/** Per producer thread: records arrive in emission order, each intact. */
struct order_checker {
  std::vector<std::uint32_t> next;
  std::uint64_t records = 0, out_of_order = 0, corrupt = 0;
  bool consecutive = true;  // false for lossy policies: only increasing
  explicit order_checker(std::size_t threads, bool consecutive_ = true) : next(threads, 0), consecutive(consecutive_) {}
  void operator()(const seq_rec& r) {
    ++records;
    if (r.thread >= next.size() || r.check != seq_check(r.thread, r.seq)) {
      ++corrupt;
      return;
    }
    if (consecutive ? r.seq != next[r.thread] : r.seq < next[r.thread]) ++out_of_order;
    next[r.thread] = r.seq + 1;
  }
};

// ---- kernels --------------------------------------------------------------------------------

__global__ void order_kernel(devtap::outfeed out, devtap::tap_point<seq_rec> p, int per_thread, bool divergent) {
  const unsigned gid = global_id();
  for (int i = 0; i < per_thread; ++i) {
    const seq_rec r{gid, static_cast<std::uint32_t>(i), seq_check(gid, static_cast<std::uint32_t>(i))};
    const unsigned branch = divergent ? (threadIdx.x + static_cast<unsigned>(i)) % 3 : 0;
    if (branch == 1) {
      __nanosleep(40 * (threadIdx.x % 5));  // these lanes arrive apart: partial-warp claims
      out.tap(p, r);
    } else if (branch == 2) {
      if (threadIdx.x % 2 == 0) out.tap(p, r);
      else out.tap(p, r);
    } else {
      out.tap(p, r);
    }
  }
}

__global__ void spans_kernel(devtap::outfeed out, devtap::tap_point<span_rec> ps,
                             devtap::tap_point<std::span<const std::uint8_t>> pb,
                             devtap::tap_point<std::tuple<std::uint32_t, double>> pt, const std::uint32_t* table,
                             const std::uint8_t* bytes, int per_thread) {
  const unsigned gid = global_id();
  for (unsigned i = 0; i < static_cast<unsigned>(per_thread); ++i) {
    const unsigned off = (gid * 13 + i * 7) % 1024, len = (gid + 3 * i) % 97;
    out.tap(ps, span_rec{gid, i, off, std::span<const std::uint32_t>(table + off, len)});
    const unsigned boff = (gid + i) % 61, blen = (gid * 5 + i) % 45;  // odd offsets: unaligned sources
    out.tap(pb, std::span<const std::uint8_t>(bytes + boff, blen));
    out.tap(pt, std::tuple<std::uint32_t, double>{gid, 0.5 * i});
  }
}

__global__ void phased_kernel(devtap::outfeed out, devtap::tap_point<seq_rec> p, int first, int second,
                              const unsigned* go, unsigned* phase) {
  const unsigned gid = global_id();
  for (int i = 0; i < first; ++i)
    out.tap(p, seq_rec{gid, static_cast<std::uint32_t>(i), seq_check(gid, static_cast<std::uint32_t>(i))});
  __syncthreads();
  if (threadIdx.x == 0) {
    cuda::atomic_ref<unsigned, cuda::thread_scope_system>(*phase).fetch_add(1, cuda::std::memory_order_release);
    cuda::atomic_ref<const unsigned, cuda::thread_scope_system> flag(*go);
    while (flag.load(cuda::std::memory_order_acquire) == 0) __nanosleep(2000);
  }
  __syncthreads();
  for (int i = first; i < first + second; ++i)
    out.tap(p, seq_rec{gid, static_cast<std::uint32_t>(i), seq_check(gid, static_cast<std::uint32_t>(i))});
}

__global__ void oversized_kernel(devtap::outfeed out, devtap::tap_point<seq_rec> p,
                                 devtap::tap_point<std::span<const float>> pf, const float* data) {
  const unsigned gid = global_id();
  if (gid == 0) out.tap(pf, std::span<const float>(data, 600));  // 2408 payload bytes: refused
  if (threadIdx.x / 32 == 1) devtap::warp_tap(out, pf, std::span<const float>(data, 700));  // refused too
  out.tap(p, seq_rec{gid, 0, seq_check(gid, 0)});
}

__global__ void warp_tap_kernel(devtap::outfeed out, devtap::tap_point<span_rec> ps, devtap::tap_point<big_rec> pb,
                                devtap::tap_point<std::span<const std::uint8_t>> pu, const std::uint32_t* table,
                                const std::uint8_t* bytes, bool whole_warp_mask) {
  const unsigned warp = global_id() / 32, lane = threadIdx.x % 32;
  const unsigned off = (warp * 11) % 1024, len = 1000 + 37 * (warp % 50);
  devtap::warp_tap(out, ps, span_rec{warp, 0, off, std::span<const std::uint32_t>(table + off, len)});
  if (lane < 13) {  // a partial warp, a raw value
    big_rec b{warp, {}};
    for (unsigned k = 0; k < 49; ++k) b.words[k] = table_value(warp * 49 + k);
    devtap::warp_tap(out, pb, b);
  }
  // After that branch the lanes need not run together again (independent thread scheduling: on an
  // H200 they often did not). With the whole warp's mask, one record; without, one per group of
  // lanes that happen to arrive together, each whole. The source is unaligned for most warps
  // (offset 1 + warp), and its first byte names the warp.
  const std::span<const std::uint8_t> unaligned(bytes + 1 + warp, 3001 + warp % 5);
  if (whole_warp_mask) devtap::warp_tap(0xffffffffu, out, pu, unaligned);
  else devtap::warp_tap(out, pu, unaligned);
}

// Lanes that diverge before warp_tap (a lane-dependent loop), in two halves with explicit masks,
// each tapping a span of an array in its own local memory: one record per half, the right bytes.
__global__ void warp_tap_divergent_kernel(devtap::outfeed out, devtap::tap_point<std::span<const std::uint32_t>> p,
                                          unsigned spin) {
  const unsigned warp = global_id() / 32, lane = threadIdx.x % 32;
  unsigned sink = 0;
  for (unsigned i = 0; i < lane * spin; ++i) sink = sink * 3 + i;  // lanes leave this loop apart
  std::uint32_t local[40];  // its address is taken: it stays in local memory
  for (unsigned k = 0; k < 40; ++k) local[k] = warp * 1000 + k + (sink == 0xffffffffu ? 1 : 0);
  const bool low = lane < 16;
  devtap::warp_tap(low ? 0x0000ffffu : 0xffff0000u, out, p, std::span<const std::uint32_t>(local, low ? 20 : 40));
}

// Odd lanes hold an empty handle: the even lanes' warp_tap sends one record and does not wait in
// a shuffle for lanes that left. Then every thread taps through a point whose id carries the call
// flag (made by hand): never sent as a call, dropped and reported as a stale point.
__global__ void warp_tap_mixed_kernel(devtap::outfeed out, devtap::tap_point<std::span<const std::uint32_t>> p,
                                      devtap::tap_point<seq_rec> forged, const std::uint32_t* table) {
  const unsigned warp = global_id() / 32, lane = threadIdx.x % 32;
  const devtap::outfeed mine = lane % 2 == 0 ? out : devtap::outfeed{};
  devtap::warp_tap(mine, p, std::span<const std::uint32_t>(table + warp * 64, 64));
  out.tap(forged, seq_rec{global_id(), 0, seq_check(global_id(), 0)});
}

// ---- cases ----------------------------------------------------------------------------------

// Every thread asks `calls` times (more threads than reply slots: some wait for one); a thread
// checks each answer and counts what is wrong. Taps before each call must reach the host first.
__global__ void call_kernel(devtap::outfeed out, devtap::call_point<seq_rec, std::uint64_t> ask,
                            devtap::tap_point<seq_rec> before, int calls, unsigned* wrong, unsigned* failed) {
  const unsigned t = global_id();
  for (int i = 0; i < calls; ++i) {
    const seq_rec q{t, static_cast<std::uint32_t>(i), seq_check(t, static_cast<std::uint32_t>(i))};
    out.tap(before, q);
    const devtap::call_result<std::uint64_t> r = out.call(ask, q);
    if (!r.ok()) atomicAdd(failed, 1u);
    else if (*r != q.check + 1) atomicAdd(wrong, 1u);
  }
}

// One thread calls until the host stops answering (the receiver closed): the call must come back.
__global__ void call_until_closed(devtap::outfeed out, devtap::call_point<seq_rec, std::uint64_t> ask, unsigned* last_error) {
  for (std::uint32_t i = 0;; ++i) {
    const devtap::call_result<std::uint64_t> r = out.call(ask, seq_rec{0, i, 0});
    if (!r.ok()) {
      *last_error = static_cast<unsigned>(r.error());
      return;
    }
  }
}

HARNESS_CASE(order) {
  for (const bool divergent : {false, true}) {
    constexpr int blocks = 64, threads = 256, per_thread = 200;
    devtap::receiver rx(on_gpu(16u << 20));
    order_checker seen(blocks * threads);
    auto p = rx.attach<seq_rec>(std::ref(seen), "order");
    order_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, per_thread, divergent);
    CUDA_OK(cudaGetLastError());
    rx.close();
    CHECK_EQ(seen.records, std::uint64_t{blocks} * threads * per_thread);
    CHECK_EQ(seen.out_of_order, 0u);
    CHECK_EQ(seen.corrupt, 0u);
    CHECK(std::all_of(seen.next.begin(), seen.next.end(), [](std::uint32_t n) { return n == per_thread; }));
    CHECK_EQ(rx.stats().total().dropped_records, 0u);
  }
}

HARNESS_CASE(spans) {
  constexpr int blocks = 32, threads = 128, per_thread = 20;
  const auto table = to_device(table_values(1024 + 128));
  const auto bytes = to_device(byte_values(256));

  devtap::receiver rx(on_gpu(8u << 20));
  std::uint64_t spans = 0, bad_spans = 0, byte_spans = 0, bad_bytes = 0, tuples = 0, bad_tuples = 0;
  std::vector<std::uint32_t> per_gid(blocks * threads, 0);
  auto ps = rx.attach<span_rec>([&](const span_rec& r) {
    ++spans;
    bool ok = r.gid < per_gid.size() && r.off == (r.gid * 13 + r.i * 7) % 1024 && r.xs.size() == (r.gid + 3 * r.i) % 97;
    for (std::size_t j = 0; ok && j < r.xs.size(); ++j) ok = r.xs[j] == table_value(r.off + static_cast<std::uint32_t>(j));
    bad_spans += !ok;
  });
  auto pb = rx.attach<std::span<const std::uint8_t>>([&](std::span<const std::uint8_t> s) {
    ++byte_spans;
    if (s.empty()) return;
    std::uint32_t k = 0;  // byte_value is k*7+1 mod 256, 7 is invertible: the first byte names the offset
    while (k < 256 && byte_value(k) != s[0]) ++k;
    bool ok = k < 61;
    for (std::size_t j = 0; ok && j < s.size(); ++j) ok = s[j] == byte_value(k + static_cast<std::uint32_t>(j));
    bad_bytes += !ok;
  });
  auto pt = rx.attach<std::tuple<std::uint32_t, double>>([&](const std::tuple<std::uint32_t, double>& t) {
    ++tuples;
    const auto [gid, half] = t;
    if (gid >= per_gid.size() || half != 0.5 * per_gid[gid]) ++bad_tuples;
    else ++per_gid[gid];
  });
  spans_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), ps, pb, pt, table.get(), bytes.get(), per_thread);
  CUDA_OK(cudaGetLastError());
  rx.close();
  const std::uint64_t expected = std::uint64_t{blocks} * threads * per_thread;
  CHECK_EQ(spans, expected);
  CHECK_EQ(bad_spans, 0u);
  CHECK_EQ(byte_spans, expected);
  CHECK_EQ(bad_bytes, 0u);
  CHECK_EQ(tuples, expected);
  CHECK_EQ(bad_tuples, 0u);
  CHECK_EQ(rx.stats().total().type_mismatches, 0u);
}

HARNESS_CASE(backpressure) {
  // A 4 KiB ring holds 128 records of 32 bytes; 5120 go through it to a consumer that sleeps on
  // each one: producers must wait, and nothing is lost.
  constexpr int blocks = 4, threads = 64, per_thread = 20;
  devtap::receiver rx(on_gpu(4096));
  order_checker seen(blocks * threads);
  auto p = rx.attach<seq_rec>([&](const seq_rec& r) {
    seen(r);
    std::this_thread::sleep_for(20us);
  });
  const auto start = std::chrono::steady_clock::now();
  order_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, per_thread, true);
  CUDA_OK(cudaGetLastError());
  rx.close();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("  %llu records through a 4 KiB ring in %.3f s\n", static_cast<unsigned long long>(seen.records), seconds);
  CHECK_EQ(seen.records, std::uint64_t{blocks} * threads * per_thread);
  CHECK_EQ(seen.out_of_order, 0u);
  CHECK_EQ(seen.corrupt, 0u);
  CHECK_EQ(rx.stats().total().dropped_records, 0u);
}

HARNESS_CASE(oversized) {
  // capacity 1024: records up to 512 bytes (496 payload). A 600-float span is refused at the tap,
  // reported by close(), and the rest still arrives; the kernel does not hang.
  const auto data = to_device(std::vector<float>(1000, 1.5f));
  devtap::receiver rx(on_gpu(1024));
  order_checker seen(64);
  auto p = rx.attach<seq_rec>(std::ref(seen));
  std::uint64_t spans = 0;
  auto pf = rx.attach<std::span<const float>>([&](std::span<const float>) { ++spans; });
  oversized_kernel<<<1, 64>>>(rx.outfeed(gpu()), p, pf, data.get());
  CUDA_OK(cudaGetLastError());
  const std::string message = close_message(rx);
  std::printf("  close(): %s\n", message.c_str());
  CHECK(message.find("refused a record of") != std::string::npos);
  CHECK(message.find("2408") != std::string::npos || message.find("2808") != std::string::npos);
  CHECK_EQ(seen.records, 64u);
  CHECK_EQ(seen.corrupt, 0u);
  CHECK_EQ(spans, 0u);
}

HARNESS_CASE(close_flush) {
  constexpr int blocks = 8, threads = 128, first = 50, second = 30;
  unsigned* flags = nullptr;  // [0] go, [1] phase: pinned, mapped
  CUDA_OK(cudaHostAlloc(&flags, 2 * sizeof(unsigned), cudaHostAllocMapped));
  flags[0] = flags[1] = 0;
  unsigned* dflags = nullptr;
  CUDA_OK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dflags), flags, 0));

  devtap::receiver rx(on_gpu(1u << 20));
  std::atomic<std::uint64_t> count{0};
  std::atomic<bool> ended{false};
  auto p = rx.attach<seq_rec>([&](devtap::inbox<seq_rec> in) -> devtap::consumer<seq_rec> {
    while (auto r = co_await in.next()) {
      if (r->check == seq_check(r->thread, r->seq)) count.fetch_add(1);
    }
    ended = true;
  });
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // Releases the kernel however this case ends: a check that throws before `go` is set must fail
  // the case, not leave the kernel spinning while rx's destructor waits for it. Declared after rx,
  // so it runs first.
  struct release_kernel {
    unsigned* go;
    ~release_kernel() { std::atomic_ref<unsigned>(*go).store(1); }
  } release{flags};
  phased_kernel<<<blocks, threads, 0, stream>>>(rx.outfeed(gpu()), p, first, second, dflags, dflags + 1);
  CUDA_OK(cudaGetLastError());
  std::atomic_ref<unsigned> phase(flags[1]);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (phase.load() < static_cast<unsigned>(blocks) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100us);
  CHECK_EQ(phase.load(), static_cast<unsigned>(blocks));
  rx.flush();  // the kernel is still running (waiting for `go`): flush must not need it to finish
  CHECK_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  CHECK_EQ(count.load(), std::uint64_t{blocks} * threads * first);
  CHECK(!ended.load());
  std::atomic_ref<unsigned>(flags[0]).store(1);  // (release does it again at the end: harmless)
  rx.close();  // after the kernel: the rest arrives, then the end of the stream
  CHECK_EQ(count.load(), std::uint64_t{blocks} * threads * (first + second));
  CHECK(ended.load());
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFreeHost(flags));
}

HARNESS_CASE(flush_after_kernel) {
  constexpr int blocks = 16, threads = 128, per_thread = 10;
  devtap::receiver rx(on_gpu(1u << 20));
  std::atomic<std::uint64_t> count{0};
  auto p = rx.attach<seq_rec>([&](const seq_rec&) { count.fetch_add(1); });
  for (int round = 1; round <= 3; ++round) {
    order_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, per_thread, false);
    CUDA_OK(cudaDeviceSynchronize());
    rx.flush();
    CHECK_EQ(count.load(), std::uint64_t{blocks} * threads * per_thread * static_cast<unsigned>(round));
  }
  rx.close();
}

HARNESS_CASE(many_blocks) {
  constexpr int blocks = 2048, threads = 256, per_thread = 4;
  devtap::receiver rx(on_gpu(64u << 20));
  std::uint64_t records = 0, sum = 0, x = 0;
  auto p = rx.attach<seq_rec>([&](const seq_rec& r) {
    ++records;
    sum += r.check;
    x ^= r.check * (r.seq + 1);
  });
  order_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, per_thread, false);
  CUDA_OK(cudaGetLastError());
  rx.close();
  std::uint64_t want_sum = 0, want_x = 0;
  for (std::uint32_t t = 0; t < blocks * threads; ++t)
    for (std::uint32_t i = 0; i < per_thread; ++i) {
      want_sum += seq_check(t, i);
      want_x ^= seq_check(t, i) * (i + 1);
    }
  CHECK_EQ(records, std::uint64_t{blocks} * threads * per_thread);
  CHECK_EQ(sum, want_sum);
  CHECK_EQ(x, want_x);
}

void lossy(devtap::overflow_policy policy) {
  constexpr int blocks = 64, threads = 128, per_thread = 16;
  devtap::receiver rx(on_gpu(4096, policy));
  order_checker seen(blocks * threads, false);
  auto p = rx.attach<seq_rec>([&](const seq_rec& r) {
    seen(r);
    std::this_thread::sleep_for(50us);
  });
  order_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, per_thread, false);
  CUDA_OK(cudaGetLastError());
  const std::string message = close_message(rx);
  const auto st = rx.stats().total();
  std::printf("  delivered %llu, dropped %llu (%llu bytes); close(): %s\n", static_cast<unsigned long long>(st.records),
              static_cast<unsigned long long>(st.dropped_records), static_cast<unsigned long long>(st.dropped_bytes),
              message.empty() ? "ok" : message.c_str());
  CHECK_EQ(st.records + st.dropped_records, std::uint64_t{blocks} * threads * per_thread);
  CHECK(st.dropped_records > 0);
  CHECK_EQ(st.dropped_bytes, st.dropped_records * devtap::detail::record_bytes(sizeof(seq_rec)));
  CHECK_EQ(seen.records, st.records);
  CHECK_EQ(seen.out_of_order, 0u);
  CHECK_EQ(seen.corrupt, 0u);
  if (policy == devtap::overflow_policy::error)
    CHECK(message.find("ring full") != std::string::npos);
  else
    CHECK(message.empty());
}

HARNESS_CASE(drop_counts) { lossy(devtap::overflow_policy::drop); }
HARNESS_CASE(error_policy) { lossy(devtap::overflow_policy::error); }

// Records of warp_tap_kernel: the span and raw records once per warp; the unaligned byte span once
// per warp with the whole warp's mask, at least once (each group of lanes arriving together) without.
void warp_taps(bool whole_warp_mask) {
  constexpr int blocks = 16, threads = 128;
  const auto table = to_device(table_values(1024 + 3000));
  const auto bytes = to_device(byte_values(4096));

  devtap::receiver rx(on_gpu(1u << 20));
  constexpr unsigned warps = blocks * threads / 32;
  std::vector<int> span_seen(warps, 0), big_seen(warps, 0), unaligned_seen(warps, 0);
  std::uint64_t bad = 0;
  std::vector<std::string> bad_said;  // what was wrong with the first few bad records
  auto say_bad = [&](std::string what) {
    ++bad;
    if (bad_said.size() < 8) bad_said.push_back(std::move(what));
  };
  auto ps = rx.attach<span_rec>([&](const span_rec& r) {
    bool ok = r.gid < warps && r.off == (r.gid * 11) % 1024 && r.xs.size() == 1000 + 37 * (r.gid % 50);
    std::size_t j = 0;
    for (; ok && j < r.xs.size(); ++j) ok = r.xs[j] == table_value(r.off + static_cast<std::uint32_t>(j));
    if (ok) ++span_seen[r.gid];
    else say_bad("span_rec gid " + std::to_string(r.gid) + " size " + std::to_string(r.xs.size()) + " element " + std::to_string(j));
  });
  auto pb = rx.attach<big_rec>([&](const big_rec& b) {
    bool ok = b.warp < warps;
    unsigned k = 0;
    for (; ok && k < 49; ++k) ok = b.words[k] == table_value(b.warp * 49 + k);
    if (ok) ++big_seen[b.warp];
    else say_bad("big_rec warp " + std::to_string(b.warp) + " word " + std::to_string(k));
  });
  auto pu = rx.attach<std::span<const std::uint8_t>>([&](std::span<const std::uint8_t> s) {
    // byte_value(k) = 7k + 1 (mod 256): the first byte gives k = 1 + warp (183 = 1/7 mod 256).
    const std::uint32_t k = s.empty() ? 0 : (static_cast<std::uint32_t>(s[0] - 1) * 183u) & 0xff;
    const std::uint32_t warp = k - 1;
    bool ok = k >= 1 && warp < warps && s.size() == 3001 + warp % 5;
    std::size_t j = 0;
    for (; ok && j < s.size(); ++j) ok = s[j] == byte_value(k + static_cast<std::uint32_t>(j));
    if (ok) ++unaligned_seen[warp];
    else
      say_bad("byte span warp " + std::to_string(warp) + " size " + std::to_string(s.size()) + " byte " + std::to_string(j) +
              (j < s.size() ? " is " + std::to_string(s[j]) + ", want " + std::to_string(byte_value(k + static_cast<std::uint32_t>(j))) : ""));
  });
  warp_tap_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), ps, pb, pu, table.get(), bytes.get(), whole_warp_mask);
  CUDA_OK(cudaGetLastError());
  rx.close();
  for (const auto& b : bad_said) std::printf("  bad: %s\n", b.c_str());
  int most = 0, split = 0;
  for (int n : unaligned_seen) most = std::max(most, n), split += n > 1;
  std::printf("  byte spans: %d of %u warps sent more than one record (at most %d)\n", split, warps, most);
  CHECK_EQ(bad, 0u);
  CHECK(std::all_of(span_seen.begin(), span_seen.end(), [](int n) { return n == 1; }));
  CHECK(std::all_of(big_seen.begin(), big_seen.end(), [](int n) { return n == 1; }));
  if (whole_warp_mask) CHECK(std::all_of(unaligned_seen.begin(), unaligned_seen.end(), [](int n) { return n == 1; }));
  else CHECK(std::all_of(unaligned_seen.begin(), unaligned_seen.end(), [](int n) { return n >= 1 && n <= 32; }));
}

HARNESS_CASE(warp_taps) { warp_taps(true); }
HARNESS_CASE(warp_taps_after_branch) { warp_taps(false); }

HARNESS_CASE(warp_tap_divergent) {
  constexpr int blocks = 8, threads = 128;
  constexpr unsigned warps = blocks * threads / 32;
  devtap::receiver rx(on_gpu(1u << 20));
  std::vector<int> short_seen(warps, 0), long_seen(warps, 0);
  std::uint64_t bad = 0;
  auto p = rx.attach<std::span<const std::uint32_t>>([&](std::span<const std::uint32_t> s) {
    const std::uint32_t warp = s.empty() ? 0 : s[0] / 1000;
    bool ok = (s.size() == 20 || s.size() == 40) && warp < warps;
    for (std::size_t k = 0; ok && k < s.size(); ++k) ok = s[k] == warp * 1000 + k;
    if (!ok) ++bad;
    else ++(s.size() == 20 ? short_seen : long_seen)[warp];
  });
  warp_tap_divergent_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, 200);
  CUDA_OK(cudaGetLastError());
  rx.close();
  CHECK_EQ(bad, 0u);  // a span in local memory read by the wrong lanes would show here
  // one record per half-warp: lanes that arrived apart still met at the mask
  CHECK(std::all_of(short_seen.begin(), short_seen.end(), [](int n) { return n == 1; }));
  CHECK(std::all_of(long_seen.begin(), long_seen.end(), [](int n) { return n == 1; }));
}

HARNESS_CASE(warp_tap_mixed_handles) {
  constexpr int blocks = 4, threads = 128;
  constexpr unsigned warps = blocks * threads / 32;
  const auto table = to_device(table_values(warps * 64));
  devtap::receiver rx(on_gpu(1u << 20));
  std::vector<int> seen(warps, 0);
  std::uint64_t bad = 0, calls_seen = 0;
  auto p = rx.attach<std::span<const std::uint32_t>>([&](std::span<const std::uint32_t> s) {
    std::uint32_t warp = 0;  // the warp whose slice of the table starts the span
    while (warp < warps && (s.empty() || s[0] != table_value(warp * 64))) ++warp;
    bool ok = s.size() == 64 && warp < warps;
    for (std::size_t k = 0; ok && k < s.size(); ++k) ok = s[k] == table_value(warp * 64 + static_cast<std::uint32_t>(k));
    if (ok) ++seen[warp];
    else ++bad;
  });
  auto q = rx.attach<seq_rec>([&](const seq_rec&) { ++calls_seen; });
  auto ask = rx.serve<seq_rec, std::uint64_t>([&](const seq_rec&) -> std::uint64_t { ++calls_seen; return 0; });
  const devtap::tap_point<seq_rec> forged{ask.id, q.fingerprint, q.receiver};  // a call's id on a tap
  warp_tap_mixed_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, forged, table.get());
  CUDA_OK(cudaGetLastError());
  const std::string message = close_message(rx);
  std::printf("  close(): %s\n", message.c_str());
  CHECK_EQ(bad, 0u);
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  CHECK_EQ(calls_seen, 0u);
  CHECK(message.find("tap_point of another receiver, or of none") != std::string::npos);
  CHECK_EQ(rx.stats().devices.at(0).dropped_records, std::uint64_t{blocks * threads});
}

HARNESS_CASE(tap_after_close) {
  // A kernel that taps after close() must not hang: the ring fills, the blocked taps see `closed`,
  // give up and count drops.
  devtap::receiver rx(on_gpu(4096));
  auto p = rx.attach<seq_rec>([](const seq_rec&) {});
  const devtap::outfeed out = rx.outfeed(gpu());
  rx.close();
  order_kernel<<<1, 32>>>(out, p, 40, false);  // 1280 records; the ring holds 128
  CUDA_OK(cudaDeviceSynchronize());
  const auto st = rx.stats().total();
  std::printf("  after close: %llu dropped\n", static_cast<unsigned long long>(st.dropped_records));
  CHECK_EQ(st.records, 0u);
  CHECK(st.dropped_records >= 1280u - 128u);
}

HARNESS_CASE(calls) {
  constexpr int blocks = 8, threads = 64, calls = 20;  // 512 callers, 64 reply slots
  devtap::receiver rx(on_gpu(1u << 20));
  std::vector<std::uint32_t> taps_seen(blocks * threads, 0);
  std::uint64_t overtaken = 0;
  auto before = rx.attach<seq_rec>([&](const seq_rec& r) {
    if (r.thread < taps_seen.size()) taps_seen[r.thread] = r.seq + 1;
  });
  auto ask = rx.serve<seq_rec, std::uint64_t>([&](const seq_rec& q) {
    if (q.thread >= taps_seen.size() || taps_seen[q.thread] != q.seq + 1) ++overtaken;  // its tap came first
    return q.check + 1;
  });
  unsigned* counts = nullptr;
  CUDA_OK(cudaMallocManaged(&counts, 2 * sizeof(unsigned)));
  counts[0] = counts[1] = 0;
  call_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), ask, before, calls, counts, counts + 1);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  rx.close();
  std::printf("  %d calls, %llu waited for a reply slot\n", blocks * threads * calls,
              static_cast<unsigned long long>(rx.stats().total().call_slot_waits));
  CHECK_EQ(counts[0], 0u);  // wrong answers
  CHECK_EQ(counts[1], 0u);  // failed calls
  CHECK_EQ(overtaken, 0u);
  CHECK_EQ(rx.stats().total().records, std::uint64_t{2} * blocks * threads * calls);
  CUDA_OK(cudaFree(counts));
}

HARNESS_CASE(call_handler_throws) {
  devtap::receiver rx(on_gpu(1u << 20));
  auto ask = rx.serve<seq_rec, std::uint64_t>([](const seq_rec& q) -> std::uint64_t {
    if (q.seq % 2 == 1) throw std::runtime_error("odd");
    return q.check + 1;
  });
  unsigned* counts = nullptr;
  CUDA_OK(cudaMallocManaged(&counts, 2 * sizeof(unsigned)));
  counts[0] = counts[1] = 0;
  auto before = rx.attach<seq_rec>([](const seq_rec&) {});
  call_kernel<<<1, 32>>>(rx.outfeed(gpu()), ask, before, 4, counts, counts + 1);
  CUDA_OK(cudaDeviceSynchronize());
  CHECK_EQ(counts[0], 0u);
  CHECK_EQ(counts[1], 64u);  // the odd calls failed; the even ones were answered
  bool reported = false;
  try {
    rx.close();
  } catch (const devtap::tap_error& e) {
    reported = !e.failures().empty();
  }
  CHECK(reported);  // the handler's failures reach close()
  CUDA_OK(cudaFree(counts));
}

HARNESS_CASE(call_after_close) {
  // A kernel calling while the receiver closes: its call comes back with call_errc::closed.
  devtap::receiver_options o = on_gpu(1u << 20);
  o.close_timeout = 500ms;
  std::optional<devtap::receiver> rx(o);
  auto ask = rx->serve<seq_rec, std::uint64_t>([](const seq_rec& q) { return std::uint64_t{q.seq}; });
  unsigned* last = nullptr;
  CUDA_OK(cudaMallocManaged(&last, sizeof(unsigned)));
  *last = 0;
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  call_until_closed<<<1, 1, 0, stream>>>(rx->outfeed(gpu()), ask, last);
  CUDA_OK(cudaGetLastError());
  std::this_thread::sleep_for(100ms);
  const auto t0 = std::chrono::steady_clock::now();
  try {
    rx->close();  // the kernel never finishes on its own: close() gives up at its timeout
  } catch (const devtap::timeout_error&) {
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  CHECK(std::chrono::steady_clock::now() - t0 < 30s);
  CHECK_EQ(*last, static_cast<unsigned>(devtap::call_errc::closed));
  CUDA_OK(cudaStreamDestroy(stream));
  CUDA_OK(cudaFree(last));
}

// Timestamps (issue 16): every tap stamped with %globaltimer mapped onto the host's clock, each
// thread's stamps in its tap order, the device's sequence numbers 0..n-1 with no gap, every time
// within the run's host window widened by the calibration's bound; warp_tap, scopes and calls (one
// per warp, after its taps) stamped too.
__global__ void stamped_kernel(devtap::outfeed out, devtap::tap_point<seq_rec> p, devtap::tap_point<seq_rec> warp,
                               devtap::call_point<seq_rec, std::uint64_t> ask, int per_thread, unsigned* wrong_answers) {
  const unsigned t = global_id();
  out.scope_begin(7);
  for (int i = 0; i < per_thread; ++i) {
    const seq_rec r{t, static_cast<std::uint32_t>(i), seq_check(t, static_cast<std::uint32_t>(i))};
    out.tap(p, r);
    devtap::warp_tap(out, warp, r);
  }
  if (threadIdx.x % 32 == 0) {
    const devtap::call_result<std::uint64_t> answer = out.call(ask, seq_rec{t, static_cast<std::uint32_t>(per_thread), 0});
    if (!answer.ok() || *answer != t) atomicAdd(wrong_answers, 1u);
  }
  out.scope_end(7);
}

HARNESS_CASE(timestamps) {
  constexpr int blocks = 16, threads = 128, per_thread = 20;
  devtap::receiver_options o = on_gpu(8u << 20);
  o.timestamps = true;
  const auto opened = devtap::tap_info::clock::now();
  devtap::receiver rx(o);
  const std::uint64_t bound = rx.stats().devices[0].clock_error_ns;
  std::printf("  calibration: GPU clock within +-%llu ns of the host's\n", static_cast<unsigned long long>(bound));
  CHECK(bound < 1000000);  // a calibrated clock: well under a millisecond
  std::vector<devtap::tap_info::clock::time_point> last(blocks * threads);
  std::vector<std::uint64_t> sequences;
  std::uint64_t records = 0, unstamped = 0, backwards = 0, warp_records = 0, scopes = 0;
  devtap::tap_info::clock::time_point first_time = devtap::tap_info::clock::time_point::max(), last_time{};
  auto note = [&](const devtap::tap_info& info) {
    unstamped += !info.stamped;
    sequences.push_back(info.sequence);
    first_time = std::min(first_time, info.time);
    last_time = std::max(last_time, info.time);
  };
  auto p = rx.attach<seq_rec>(
      [&](const seq_rec& r, const devtap::tap_info& info) {
        ++records;
        note(info);
        if (r.thread < last.size()) {
          backwards += info.time < last[r.thread];
          last[r.thread] = info.time;
        }
      },
      devtap::shared);
  auto w = rx.attach<seq_rec>([&](const seq_rec&, const devtap::tap_info& info) { ++warp_records, note(info); }, devtap::shared);
  rx.attach<devtap::scope_event>([&](const devtap::scope_event& e, const devtap::tap_info& info) {
    scopes += e.id == 7;
    note(info);
  }, devtap::shared);
  std::uint64_t calls = 0;
  auto ask = rx.serve<seq_rec, std::uint64_t>([&](const seq_rec& q, const devtap::tap_info& info) {
    ++calls;  // (the device's reader: the same thread as the consumers above)
    note(info);
    if (q.thread < last.size()) {
      backwards += info.time < last[q.thread];  // after the thread's last tap
      last[q.thread] = info.time;
    }
    return std::uint64_t{q.thread};
  });
  unsigned* wrong_answers = nullptr;
  CUDA_OK(cudaMallocManaged(&wrong_answers, sizeof(unsigned)));
  *wrong_answers = 0;
  const auto t0 = std::chrono::steady_clock::now();
  stamped_kernel<<<blocks, threads>>>(rx.outfeed(gpu()), p, w, ask, per_thread, wrong_answers);
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CHECK_EQ(*wrong_answers, 0u);
  CUDA_OK(cudaFree(wrong_answers));
  const auto t1 = std::chrono::steady_clock::now();
  rx.close();
  const auto closed = devtap::tap_info::clock::now();
  CHECK_EQ(records, std::uint64_t{blocks} * threads * per_thread);
  CHECK_EQ(scopes, std::uint64_t{blocks} * threads * 2);
  CHECK_EQ(calls, std::uint64_t{blocks} * threads / 32);
  CHECK_EQ(unstamped, 0u);
  CHECK_EQ(backwards, 0u);
  std::sort(sequences.begin(), sequences.end());
  bool dense = true;
  for (std::size_t i = 0; i < sequences.size(); ++i) dense = dense && sequences[i] == i;
  CHECK(dense);  // 0..n-1 over taps, warp taps, scopes and calls: no number lost or used twice
  const auto slack = std::chrono::nanoseconds(bound + 2000);  // + the timer's tick
  CHECK(first_time + slack >= opened);
  CHECK(last_time <= closed + slack);
  std::printf("  %llu stamped records in %.3f ms of kernel time; stamps span %.3f ms\n",
              static_cast<unsigned long long>(records + warp_records + scopes + calls),
              std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(last_time - first_time).count());
}

HARNESS_CASE(all_gpus) {
  const auto gpus = devtap::devices("cuda");
  constexpr int blocks = 16, threads = 128, per_thread = 50;
  devtap::receiver_options o;
  o.devices.assign(gpus.begin(), gpus.end());
  o.budget_bytes = gpus.size() << 20;
  devtap::receiver rx(o);
  std::mutex m;
  std::vector<std::uint64_t> per_device(gpus.size(), 0);
  auto p = rx.attach<seq_rec>(
      [&](const seq_rec& r, const devtap::device& d) {
        std::lock_guard lock(m);
        if (r.check == seq_check(r.thread, r.seq)) ++per_device[static_cast<std::size_t>(d.id())];
      },
      devtap::shared);
  for (const devtap::device* d : gpus) {
    CUDA_OK(cudaSetDevice(d->id()));
    order_kernel<<<blocks, threads>>>(rx.outfeed(*d), p, per_thread, false);
    CUDA_OK(cudaGetLastError());
  }
  CUDA_OK(cudaSetDevice(0));
  rx.close();
  for (std::size_t i = 0; i < gpus.size(); ++i) CHECK_EQ(per_device[i], std::uint64_t{blocks} * threads * per_thread);
}

}  // namespace

int main(int argc, char** argv) {
  devtap::set_log_level(devtap::log_level::warn);
  if (const int rc = harness::run(argc, argv, true); rc != 0) return rc;
  return 0;
}
