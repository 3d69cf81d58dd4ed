// 4 cpu devices x 4 producer threads each, sequence numbers and checksums: nothing lost, nothing
// duplicated, per-producer order kept. DEVTAP_STRESS_RECORDS sets the records per producer
// (default 10^4 per producer in the normal suite; the `stress` suite runs 10^6).
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <thread>
#include <vector>

namespace {
struct sample {
  std::uint32_t producer;
  std::uint32_t seq;
  std::uint64_t checksum;  // of (producer, seq, payload)
  std::uint64_t payload[3];
};

std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

std::uint64_t checksum_of(const sample& s) {
  return mix(s.producer * 0x9e3779b97f4a7c15ULL + s.seq) ^ mix(s.payload[0]) ^ mix(s.payload[1] + 1) ^
         mix(s.payload[2] + 2);
}

std::uint64_t records_per_producer() {
  if (const char* v = std::getenv("DEVTAP_STRESS_RECORDS")) return std::strtoull(v, nullptr, 10);
  return 10000;
}
}  // namespace

TEST_CASE("stress: 4 devices x 4 producers, every record exactly once and in order") {
  constexpr int devices = 4, producers = 4;
  const std::uint64_t n = records_per_producer();
  devtap::cpu_client cpus(devices);
  auto devs = cpus.local_devices();
  // consumer state per device: only that device's reader thread touches it
  struct tally {
    std::vector<std::uint64_t> next = std::vector<std::uint64_t>(producers, 0);
    std::uint64_t bad_order = 0, bad_sum = 0, seen = 0;
  };
  std::vector<tally> tallies(devices);
  devtap::receiver rx({.devices = {devs.begin(), devs.end()}, .budget_bytes = devices * (64u << 10), .name = "stress"});
  auto point = rx.attach<sample>([&](const sample& s, const devtap::device& d) {
    tally& t = tallies[static_cast<std::size_t>(d.id())];
    if (s.producer >= producers || s.seq != t.next[s.producer]) ++t.bad_order;
    else ++t.next[s.producer];
    if (checksum_of(s) != s.checksum) ++t.bad_sum;
    ++t.seen;
  });
  std::vector<std::thread> threads;
  for (int d = 0; d < devices; ++d)
    for (int p = 0; p < producers; ++p)
      threads.emplace_back([&, out = rx.outfeed(*devs[static_cast<std::size_t>(d)]), p] {
        for (std::uint64_t i = 0; i < n; ++i) {
          sample s{static_cast<std::uint32_t>(p), static_cast<std::uint32_t>(i), 0, {i * 7, i ^ 0xabc, i << 3}};
          s.checksum = checksum_of(s);
          out.tap(point, s);
        }
      });
  for (auto& t : threads) t.join();
  rx.close();
  for (const auto& t : tallies) {
    CHECK(t.seen == n * producers);
    CHECK(t.bad_order == 0);
    CHECK(t.bad_sum == 0);
    for (auto next : t.next) CHECK(next == n);
  }
  CHECK(rx.stats().total().records == n * producers * devices);
}
