#pragma once
// devtap in the same harness as the peers: producers tap records into one cpu device's outfeed,
// a consumer coroutine reads every byte. 16 B and 256 B records are fixed-size values (copied into
// the ring, decoded by memcpy); 4 KiB and 64 KiB are std::span<const std::byte> taps (read in the
// ring, no copy on the read side).
#include "common.hpp"

#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <future>
#include <span>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

namespace bench {

template <std::size_t S>
using devtap_payload = std::conditional_t<(S <= 256), record<S>, std::span<const std::byte>>;

/** What the consumer coroutine keeps; reset by the main thread between runs (the receiver is idle then).
 *  On cache lines of its own: the producers must not read anything next to what the consumer writes. */
struct alignas(64) devtap_sink_state {
  bool pin = false;  // the next record pins the receiver thread (it runs the coroutine) to the consumer CPU
  std::uint64_t sum = 0;
  std::uint64_t count = 0;
  std::uint64_t target = 0;
  std::atomic<std::uint64_t> end{0};
};

// A free coroutine: its parameters live in its frame.
template <class Rec, std::size_t S>
devtap::consumer<Rec> devtap_sink(devtap::inbox<Rec> in, devtap_sink_state* st) {
  while (auto r = co_await in.next()) {
    if (st->pin) [[unlikely]] {
      placement::get().consumer();
      st->pin = false;
    }
    if constexpr (std::is_same_v<Rec, std::span<const std::byte>>)
      st->sum += checksum(r->data(), r->size());
    else
      st->sum += checksum(r->data(), S);
    if (++st->count == st->target) st->end.store(now_ns(), std::memory_order_release);
  }
}

inline std::vector<devtap::device*> devices_of(const devtap::cpu_client& cpus) {
  const auto d = cpus.local_devices();
  return {d.begin(), d.end()};
}

/** One cpu device, one receiver with a budget_bytes ring, one consumer; reused across runs.
 *  Stamped: receiver_options::timestamps on (every tap carries its time and sequence). */
template <std::size_t S, bool Stamped = false>
class devtap_cell {
public:
  using payload = devtap_payload<S>;
  static constexpr const char* name = Stamped ? "devtap-stamped" : "devtap";

  devtap_cell()
      : cpus_(1), rx_({.devices = devices_of(cpus_), .budget_bytes = budget_bytes, .name = "bench", .timestamps = Stamped}) {
    point_ = rx_.attach<payload>([st = &st_](devtap::inbox<payload> in) { return devtap_sink<payload, S>(in, st); });
  }
  ~devtap_cell() {
    try {
      rx_.close();
    } catch (const std::exception&) {
    }
  }

  static payload value(const source& src, std::uint64_t i) {
    if constexpr (std::is_same_v<payload, std::span<const std::byte>>)
      return payload(src.at(i), S);
    else
      return record_at<S>(src, i);
  }

  /** producers == 1: the work runs on the cpu device (ctx.tap); more: host threads tap through rx.outfeed(dev). */
  sample run(const source& src, std::uint64_t n, int producers) {
    st_.sum = 0;
    st_.count = 0;
    st_.target = n;
    st_.end.store(0, std::memory_order_relaxed);
    st_.pin = !pinned_ && placement::get().enabled;
    pinned_ = true;
    start_gate gate;
    std::uint64_t t0;
    const devtap::tap_point<payload> point = point_;  // each producer reads its own copy
    if (producers == 1) {
      auto done = cpus_.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
        placement::get().producer();  // the device's executor thread
        gate.wait();
        for (std::uint64_t i = 0; i < n; ++i) ctx.tap(point, value(src, i));
      });
      t0 = gate.open();
      done.get();
    } else {
      const devtap::outfeed out = rx_.outfeed(*cpus_.local_devices()[0]);
      std::vector<std::thread> threads;
      for (int p = 0; p < producers; ++p)
        threads.emplace_back([&, p] {
          placement::get().producer();
          gate.wait();
          const std::uint64_t last = share_first(n, producers, p + 1);
          for (std::uint64_t i = share_first(n, producers, p); i < last; ++i) out.tap(point, value(src, i));
        });
      t0 = gate.open();
      for (auto& t : threads) t.join();
    }
    rx_.flush();
    const std::uint64_t end = st_.end.load(std::memory_order_acquire);
    if (st_.count != n || end == 0)
      throw std::runtime_error("devtap: consumer saw " + std::to_string(st_.count) + " of " + std::to_string(n) +
                               " records after flush()");
    return {static_cast<double>(end - t0) * 1e-9, n, st_.sum};
  }

  devtap::receiver& receiver() { return rx_; }
  devtap::cpu_client& client() { return cpus_; }
  const devtap::tap_point<payload>& point() const { return point_; }

private:
  devtap::cpu_client cpus_;
  devtap::receiver rx_;
  devtap::tap_point<payload> point_{};
  devtap_sink_state st_;
  bool pinned_ = false;
};

}  // namespace bench
