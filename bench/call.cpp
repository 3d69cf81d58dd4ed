// devtap::call against the round trips a user would build by hand, in the same run (docs/call.md,
// docs/performance.md): calls/s with 1 and 4 callers on one device, and round-trip latency (p50,
// p99) with the reader idle (calls back to back) and busy (32 records of 8 B sent before each call,
// through the same channel, which the server must handle first). devtap runs twice, without and with
// receiver_options::timestamps (each call and record then stamped on the device): "devtap-stamped".
// "sporadic": one caller, one call every 5 ms (latency only; calls/s there counts the sleeps).
//
//   devtap-bench-call [--reps N] [--calls N] [--smoke] [--unpinned] [--csv PATH]
//
// Peers: a std::promise/std::future per call, handed to a host thread through a mutex-guarded
// queue; and a pair of boost::lockfree::spsc_queue per caller (requests and records in, replies
// out) served by one spinning host thread. Callers run on the first CPU, the server (devtap's
// reader) on the last, as in bench/cpu.cpp.
#include "common.hpp"

#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <boost/lockfree/spsc_queue.hpp>
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using bench::now_ns;
using bench::placement;

constexpr int busy_records = 32;  // sent before each call in the "busy" latency runs
constexpr int impls = 4;          // devtap, devtap-stamped, then the two peers

struct result {
  double calls_per_s = 0;
  std::vector<std::uint64_t> latencies_ns;  // per call (1 caller runs only)
};

std::uint64_t answer_of(std::uint64_t q) { return q * 3 + 1; }

// ---- devtap ------------------------------------------------------------------------------------
class devtap_cell {
public:
  explicit devtap_cell(bool timestamps)
      : cpus_(1), rx_({.devices = {cpus_.cpu_devices()[0]}, .name = "bench-call", .timestamps = timestamps}) {
    records_ = rx_.attach<std::uint64_t>([this](const std::uint64_t& v) { sink_ += v; });
    ask_ = rx_.serve<std::uint64_t, std::uint64_t>([this](const std::uint64_t& q) {
      if (!pinned_) {  // the reader thread runs the handler: pin it where the peers' servers run
        placement::get().consumer();
        pinned_ = true;
      }
      return answer_of(q);
    });
  }
  ~devtap_cell() {
    try {
      rx_.close();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "devtap close: %s\n", e.what());
    }
  }

  result run(int callers, std::uint64_t calls, bool busy, bool timed, std::chrono::microseconds gap = {}) {
    result r;
    std::atomic<std::uint64_t> wrong{0};
    std::vector<std::vector<std::uint64_t>> lat(static_cast<std::size_t>(callers));
    auto caller = [&](auto&& call, auto&& tap, int c) {
      placement::get().producer();
      auto& mine = lat[static_cast<std::size_t>(c)];
      if (timed) mine.reserve(calls);
      for (std::uint64_t i = 0; i < calls; ++i) {
        if (gap.count() != 0) std::this_thread::sleep_for(gap);  // "sporadic": the server has gone idle
        if (busy)
          for (int k = 0; k < busy_records; ++k) tap(i + static_cast<std::uint64_t>(k));
        const std::uint64_t t0 = timed ? now_ns() : 0;
        const std::uint64_t a = call(i);
        if (timed) mine.push_back(now_ns() - t0);
        if (a != answer_of(i)) wrong++;
      }
    };
    const std::uint64_t t0 = now_ns();
    if (callers == 1) {  // the device's own work calls: ctx.call
      cpus_.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
        caller([&](std::uint64_t q) { return ctx.call(ask_, q); }, [&](std::uint64_t v) { ctx.tap(records_, v); }, 0);
      });
    } else {  // host threads through the device's outfeed
      const devtap::outfeed out = rx_.outfeed(*cpus_.cpu_devices()[0]);
      std::vector<std::thread> threads;
      for (int c = 0; c < callers; ++c)
        threads.emplace_back([&, c] {
          caller([&](std::uint64_t q) { return out.call(ask_, q).value(); }, [&](std::uint64_t v) { out.tap(records_, v); }, c);
        });
      for (auto& t : threads) t.join();
    }
    const double s = static_cast<double>(now_ns() - t0) * 1e-9;
    if (wrong != 0) throw std::runtime_error("devtap: wrong answers");
    r.calls_per_s = static_cast<double>(calls) * callers / s;
    for (auto& v : lat) r.latencies_ns.insert(r.latencies_ns.end(), v.begin(), v.end());
    return r;
  }

private:
  devtap::cpu_client cpus_;
  devtap::receiver rx_;
  devtap::tap_point<std::uint64_t> records_{};
  devtap::call_point<std::uint64_t, std::uint64_t> ask_{};
  std::uint64_t sink_ = 0;
  bool pinned_ = false;
};

// ---- the peers ---------------------------------------------------------------------------------
struct message {
  std::uint64_t value;
  bool is_call;
};

/** One host thread serving every caller's messages: records are summed, calls answered. */
template <class Channel>
result run_peer(int callers, std::uint64_t calls, bool busy, bool timed, std::chrono::microseconds gap = {}) {
  std::vector<std::unique_ptr<Channel>> channels;
  for (int c = 0; c < callers; ++c) channels.push_back(std::make_unique<Channel>());
  std::atomic<bool> stop{false};
  std::thread server([&] {
    placement::get().consumer();
    std::uint64_t sink = 0;
    bench::backoff b;
    while (!stop.load(std::memory_order_relaxed)) {
      bool any = false;
      for (auto& ch : channels) any |= ch->serve(sink);
      if (any) b.reset();
      else b.pause();
    }
    bench::clobber(&sink);
  });
  result r;
  std::atomic<std::uint64_t> wrong{0};
  std::vector<std::vector<std::uint64_t>> lat(static_cast<std::size_t>(callers));
  std::vector<std::thread> threads;
  const std::uint64_t t0 = now_ns();
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      placement::get().producer();
      Channel& ch = *channels[static_cast<std::size_t>(c)];
      auto& mine = lat[static_cast<std::size_t>(c)];
      if (timed) mine.reserve(calls);
      for (std::uint64_t i = 0; i < calls; ++i) {
        if (gap.count() != 0) std::this_thread::sleep_for(gap);
        if (busy)
          for (int k = 0; k < busy_records; ++k) ch.send(i + static_cast<std::uint64_t>(k));
        const std::uint64_t s0 = timed ? now_ns() : 0;
        const std::uint64_t a = ch.call(i);
        if (timed) mine.push_back(now_ns() - s0);
        if (a != answer_of(i)) wrong++;
      }
    });
  for (auto& t : threads) t.join();
  const double s = static_cast<double>(now_ns() - t0) * 1e-9;
  stop = true;
  server.join();
  if (wrong != 0) throw std::runtime_error("peer: wrong answers");
  r.calls_per_s = static_cast<double>(calls) * callers / s;
  for (auto& v : lat) r.latencies_ns.insert(r.latencies_ns.end(), v.begin(), v.end());
  return r;
}

/** A promise per call, through a mutex-guarded queue and a condition variable (records: the same queue). */
struct promise_channel {
  static constexpr const char* name = "promise-future";
  struct job {
    std::uint64_t value;
    std::promise<std::uint64_t>* reply;  // null: a record
  };
  std::mutex mutex;
  std::deque<job> jobs;

  void send(std::uint64_t v) {
    std::lock_guard lock(mutex);
    jobs.push_back({v, nullptr});
  }
  std::uint64_t call(std::uint64_t q) {
    std::promise<std::uint64_t> p;
    auto f = p.get_future();
    {
      std::lock_guard lock(mutex);
      jobs.push_back({q, &p});
    }
    return f.get();
  }
  bool serve(std::uint64_t& sink) {
    std::deque<job> batch;
    {
      std::lock_guard lock(mutex);
      if (jobs.empty()) return false;
      batch.swap(jobs);
    }
    for (const job& j : batch) {
      if (j.reply != nullptr) j.reply->set_value(answer_of(j.value));
      else sink += j.value;
    }
    return true;
  }
};

/** Two SPSC queues per caller: messages in (records and requests, in order), replies out. */
struct spsc_channel {
  static constexpr const char* name = "spsc-pair";
  boost::lockfree::spsc_queue<message> in{4096};
  boost::lockfree::spsc_queue<std::uint64_t> out{64};

  void send(std::uint64_t v) {
    bench::backoff b;
    while (!in.push(message{v, false})) b.pause();
  }
  std::uint64_t call(std::uint64_t q) {
    bench::backoff b;
    while (!in.push(message{q, true})) b.pause();
    b.reset();
    std::uint64_t a;
    while (!out.pop(a)) b.pause();
    return a;
  }
  bool serve(std::uint64_t& sink) {
    return in.consume_all([&](const message& m) {
             if (m.is_call) {
               while (!out.push(answer_of(m.value))) bench::cpu_relax();
             } else {
               sink += m.value;
             }
           }) != 0;
  }
};

struct row {
  std::string impl, what;
  int callers;
  bench::summary calls_per_s;
  double p50_us = 0, p99_us = 0;
};

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  std::uint64_t calls = 20000;
  std::string csv;
  bool pinned = true;  // --unpinned: the scheduler places every thread (a woken reader may share its caller's CPU)
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--calls" && i + 1 < argc) calls = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
    else if (a == "--smoke") reps = 1, calls = 200;
    else if (a == "--unpinned") pinned = false;
    else {
      std::fprintf(stderr, "usage: %s [--reps N] [--calls N] [--smoke] [--unpinned] [--csv PATH]\n", argv[0]);
      return 2;
    }
  }
  placement::get().init(pinned);
  devtap_cell cell(false), stamped(true);
  std::vector<row> rows;
  struct scenario {
    const char* what;
    int callers;
    bool busy;
    std::chrono::microseconds gap;  // sleep before each call (not timed)
  };
  // "sporadic": one call every 5 ms, as a solver asks every few steps: devtap's reader (and caller)
  // have gone to sleep in between, where the peers' servers spin or yield (a core each).
  const scenario scenarios[] = {{"idle", 1, false, {}},
                                {"busy", 1, true, {}},
                                {"idle", 4, false, {}},
                                {"busy", 4, true, {}},
                                {"sporadic", 1, false, std::chrono::microseconds(5000)}};
  for (const scenario& sc : scenarios) {
    const std::uint64_t n = sc.gap.count() != 0 ? std::min<std::uint64_t>(calls, 40) : sc.busy ? calls / 4 : calls;
    std::vector<double> rate[impls];
    std::vector<std::uint64_t> lat[impls];
    (void)cell.run(sc.callers, n / 10 + 1, sc.busy, false);  // warm up
    (void)stamped.run(sc.callers, n / 10 + 1, sc.busy, false);
    for (int r = 0; r < reps; ++r) {  // interleaved: drift hits all alike
      auto d = cell.run(sc.callers, n, sc.busy, true, sc.gap);
      auto ds = stamped.run(sc.callers, n, sc.busy, true, sc.gap);
      auto p = run_peer<promise_channel>(sc.callers, n, sc.busy, true, sc.gap);
      auto s = run_peer<spsc_channel>(sc.callers, n, sc.busy, true, sc.gap);
      result* all[impls] = {&d, &ds, &p, &s};
      for (int k = 0; k < impls; ++k) {
        rate[k].push_back(all[k]->calls_per_s);
        lat[k].insert(lat[k].end(), all[k]->latencies_ns.begin(), all[k]->latencies_ns.end());
      }
    }
    const char* names[impls] = {"devtap", "devtap-stamped", promise_channel::name, spsc_channel::name};
    for (int k = 0; k < impls; ++k)
      rows.push_back({names[k], sc.what, sc.callers, bench::summarize(rate[k]), bench::percentile(lat[k], 0.5) / 1e3,
                      bench::percentile(lat[k], 0.99) / 1e3});
  }

  std::printf("devtap::call round trips: %s, %d rep(s), %llu calls per caller and rep (a quarter when busy: %d "
              "records of 8 B before each call)\n",
              placement::get().enabled ? "callers on the first CPU, server on the last" : "unpinned", reps,
              static_cast<unsigned long long>(calls), busy_records);
  std::printf("%-15s %-8s %7s %14s %10s %8s %8s\n", "impl", "load", "callers", "calls/s", "x best", "p50 us", "p99 us");
  std::FILE* out = csv.empty() ? nullptr : std::fopen(csv.c_str(), "w");
  if (out) std::fprintf(out, "impl,load,callers,calls_per_s,calls_per_s_min,calls_per_s_max,ratio_best_peer,p50_us,p99_us\n");
  for (std::size_t i = 0; i < rows.size(); i += impls) {
    const double best_peer = std::max(rows[i + 2].calls_per_s.median, rows[i + 3].calls_per_s.median);
    for (std::size_t k = i; k < i + impls; ++k) {
      const row& w = rows[k];
      const double ratio = w.calls_per_s.median / best_peer;
      std::printf("%-15s %-8s %7d %14.0f %10.2f %8.2f %8.2f\n", w.impl.c_str(), w.what.c_str(), w.callers,
                  w.calls_per_s.median, ratio, w.p50_us, w.p99_us);
      if (out)
        std::fprintf(out, "%s,%s,%d,%.0f,%.0f,%.0f,%.3f,%.3f,%.3f\n", w.impl.c_str(), w.what.c_str(), w.callers,
                     w.calls_per_s.median, w.calls_per_s.min, w.calls_per_s.max, ratio, w.p50_us, w.p99_us);
    }
  }
  if (out) std::fclose(out);
  return 0;
}
