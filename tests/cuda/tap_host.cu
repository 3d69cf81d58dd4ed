// What of the CUDA tap can be checked without a GPU (runs in CI, where CUDA compiles but no GPU
// exists; also runs on a GPU machine):
//  - nvcc compiles device_tap and warp_tap for raw values, spans, tuples and aggregates, under
//    every overflow policy (the kernels below are instantiated, launched only by outfeed_gpu.cu);
//  - the ring protocol driven through the `cuda_atomics` policy by host threads: libcu++ runs the
//    same atomics on the host, so the claim/commit/abort code the kernels run, the policy logic
//    (claim, account_unwritten, set_sticky) and the record writer (write_record,
//    strided_copy) are exercised here against the host reader, including a warp-shaped claim;
//  - the cuda backend: without a GPU its creation fails cleanly and a receiver runs on cpu only;
//    with one, its ring allocation is laid out as docs/cuda.md says.
#include <devtap/devtap.hpp>

#include "harness.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace {

namespace d = devtap::detail;
using d::cuda_atomics;

struct point3 {
  float x, y, z;
};
struct with_span {
  std::uint16_t tag;
  std::span<const double> values;
  std::tuple<std::uint8_t, std::int64_t> t;
};
struct producer_rec {
  std::uint32_t producer;
  std::uint32_t seq;
  std::uint64_t payload[2];
};

// ---- compile-only: the device taps for each kind of value -----------------------------------

template <class Req>
__global__ void call_kernel(devtap::outfeed out, devtap::call_point<Req, point3> p, Req request, float* got) {
  const devtap::call_result<point3> r = out.call(p, request);
  *got = r.ok() ? r->x : -1.0f;
}

template <class T>
__global__ void tap_kernel(devtap::outfeed out, devtap::tap_point<T> p, T v) {
  out.tap(p, v);
  devtap::warp_tap(out, p, v);
}

template <class T>
void instantiate(const devtap::outfeed& out, const T& v) {
  // Taking the address instantiates the kernel (device code is generated) without launching it.
  const void* k = reinterpret_cast<const void*>(&tap_kernel<T>);
  CHECK(k != nullptr);
  (void)out;
  (void)v;
}

HARNESS_CASE(device_taps_compile) {
  const void* call = reinterpret_cast<const void*>(&call_kernel<with_span>);  // device_call compiled for the GPU
  CHECK(call != nullptr);
  const devtap::outfeed out{};
  const double xs[3] = {1, 2, 3};
  instantiate(out, std::uint8_t{1});
  instantiate(out, point3{1, 2, 3});
  instantiate(out, producer_rec{});
  instantiate(out, std::span<const float>{});
  instantiate(out, std::span<const std::uint8_t>{});
  instantiate(out, std::tuple<int, double>{});
  instantiate(out, with_span{1, std::span<const double>(xs), {2, 3}});
  instantiate(out, std::array<std::uint32_t, 64>{});
}

// ---- the protocol through cuda_atomics, on the host -----------------------------------------

template <class T>
void put(const d::ring_view& ring, std::uint32_t id, const T& v) {
  const std::uint64_t payload = d::encoded_size(v);
  std::uint64_t pos = 0;
  if (d::claim<cuda_atomics, d::device_wait>(ring, d::record_bytes(payload), devtap::overflow_policy::drop, pos) !=
      d::claim_status::claimed)
    throw std::runtime_error("ring unexpectedly full");
  d::write_record<cuda_atomics>(ring, pos, devtap::tap_point<T>{id, devtap::type_fingerprint_v<T>}, v, payload);
}

/** Reads the next record as a T and hands it to `check` while its bytes are still in the ring
 *  (spans view them); false when there is none, or it is not a T for `id`, or check says so. */
template <class T, class F>
bool take(d::ring_reader& reader, std::uint32_t id, F&& check) {
  for (;;) {
    const d::record_ref rec = reader.peek();
    if (rec.kind == d::record_kind::skip) {
      reader.release(rec);
      continue;
    }
    if (rec.kind != d::record_kind::data) return false;
    T out{};
    const bool ok = rec.header->consumer_id == id && rec.header->fingerprint == devtap::type_fingerprint_v<T> &&
                    d::decode(rec.payload, rec.payload_bytes, out) && check(out);
    reader.release(rec);
    return ok;
  }
}

/** Reads records as producers commit them, handing each data record to `on_data`, until `done()`;
 *  false at a malformed record. */
template <class Done, class OnData>
bool read_records(d::ring_reader& reader, Done done, OnData on_data) {
  while (!done()) {
    const d::record_ref rec = reader.peek();
    if (rec.kind == d::record_kind::malformed) return false;
    if (rec.kind == d::record_kind::empty) {
      reader.publish();
      std::this_thread::yield();
      continue;
    }
    if (rec.kind == d::record_kind::data) on_data(rec);
    reader.release(rec);
  }
  return true;
}

HARNESS_CASE(records_through_cuda_atomics) {
  // A 256-byte ring, records of many sizes: padding at every wrap, spans from unaligned sources.
  d::host_ring_allocation mem(256);
  d::ring_reader reader(mem.host);
  std::vector<std::uint8_t> bytes(200);
  for (std::size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<std::uint8_t>(k * 7 + 1);
  const double doubles[5] = {0.5, 1.5, 2.5, 3.5, 4.5};
  int checked = 0;
  for (std::uint32_t i = 0; i < 2000; ++i) {
    const std::size_t off = i % 13, len = i % 41;  // odd offsets: strided_copy's byte path; odd lengths: padding
    const std::span<const std::uint8_t> s(bytes.data() + off, len);
    put(mem.producer, 1, s);
    CHECK(take<std::span<const std::uint8_t>>(reader, 1, [&](std::span<const std::uint8_t> got) {
      return got.size() == len && std::equal(got.begin(), got.end(), s.begin());
    }));

    put(mem.producer, 2, point3{float(i), 2, 3});
    CHECK(take<point3>(reader, 2, [&](const point3& p) { return p.x == float(i) && p.z == 3; }));

    const with_span w{static_cast<std::uint16_t>(i), std::span<const double>(doubles, i % 6), {7, -int64_t(i)}};
    put(mem.producer, 3, w);
    CHECK(take<with_span>(reader, 3, [&](const with_span& gw) {
      return gw.tag == w.tag && gw.values.size() == i % 6 && std::equal(gw.values.begin(), gw.values.end(), doubles) &&
             std::get<1>(gw.t) == -int64_t(i);
    }));
    checked += 3;
    reader.publish();
  }
  CHECK_EQ(checked, 6000);
  CHECK(reader.peek().kind == d::record_kind::empty);
}

HARNESS_CASE(warp_shaped_claim) {
  // What device_tap does for a warp: one claim of the lanes' total, each lane's record at its
  // prefix offset, committed in any order; the reader stops at the first uncommitted one.
  d::host_ring_allocation mem(4096);
  d::ring_reader reader(mem.host);
  for (int round = 0; round < 40; ++round) {  // 40 x ~1 KiB through 4 KiB: claims meet the wrap
    std::uint64_t sizes[8], prefix[8], total = 0;
    std::vector<std::uint32_t> data[8];
    for (int lane = 0; lane < 8; ++lane) {
      data[lane].assign(static_cast<std::size_t>((lane * 5 + round) % 23), static_cast<std::uint32_t>(round * 100 + lane));
      sizes[lane] = d::record_bytes(d::encoded_size(std::span<const std::uint32_t>(data[lane])));
      prefix[lane] = total;
      total += sizes[lane];
    }
    std::uint64_t pos = 0;
    CHECK(d::claim<cuda_atomics, d::device_wait>(mem.producer, total, devtap::overflow_policy::error, pos) ==
          d::claim_status::claimed);
    const devtap::tap_point<std::span<const std::uint32_t>> point{9, devtap::type_fingerprint_v<std::span<const std::uint32_t>>};
    for (int lane = 7; lane >= 1; --lane) {  // the last lanes commit first
      const std::span<const std::uint32_t> s(data[lane]);
      d::write_record<cuda_atomics>(mem.producer, pos + prefix[lane], point, s, d::encoded_size(s));
    }
    // The padding (if the claim wrapped) may be read; lane 0's record is still busy.
    while (reader.peek().kind == d::record_kind::skip) reader.release(reader.peek());
    CHECK(reader.peek().kind == d::record_kind::empty);
    const std::span<const std::uint32_t> s0(data[0]);
    d::write_record<cuda_atomics>(mem.producer, pos + prefix[0], point, s0, d::encoded_size(s0));
    for (int lane = 0; lane < 8; ++lane) {
      CHECK(take<std::span<const std::uint32_t>>(reader, 9, [&](std::span<const std::uint32_t> got) {
        return got.size() == data[lane].size() && std::equal(got.begin(), got.end(), data[lane].begin());
      }));
    }
    reader.publish();
  }
  CHECK(reader.peek().kind == d::record_kind::empty);
}

HARNESS_CASE(policies_on_a_full_ring) {
  d::host_ring_allocation mem(256);
  const d::ring_view& ring = mem.producer;
  std::uint64_t pos = 0;
  CHECK(d::claim<cuda_atomics, d::device_wait>(ring, 128, devtap::overflow_policy::block, pos) == d::claim_status::claimed);
  CHECK(d::claim<cuda_atomics, d::device_wait>(ring, 128, devtap::overflow_policy::block, pos) == d::claim_status::claimed);
  // Full now (nothing read).
  auto st = d::claim<cuda_atomics, d::device_wait>(ring, 32, devtap::overflow_policy::drop, pos);
  CHECK(st == d::claim_status::dropped);
  d::account_unwritten<cuda_atomics>(ring, st, 3, 96);
  CHECK_EQ(mem.host.consumer->dropped_records, 3u);
  CHECK_EQ(mem.host.consumer->dropped_bytes, 96u);
  CHECK_EQ(mem.host.consumer->sticky_error, 0u);
  st = d::claim<cuda_atomics, d::device_wait>(ring, 32, devtap::overflow_policy::error, pos);
  CHECK(st == d::claim_status::full);
  d::account_unwritten<cuda_atomics>(ring, st, 1, 32);
  CHECK_EQ(mem.host.consumer->sticky_error, d::sticky_ring_full);
  CHECK_EQ(mem.host.consumer->dropped_records, 4u);
  d::set_sticky<cuda_atomics>(ring, d::sticky_record_too_large, d::refused_size_detail(5000));
  d::set_sticky<cuda_atomics>(ring, d::sticky_record_too_large, d::refused_size_detail(6000));
  CHECK_EQ(mem.host.consumer->sticky_error, d::sticky_ring_full | d::sticky_record_too_large);
  CHECK_EQ(mem.host.consumer->sticky_detail, 5000u);  // the first refused size is kept
  CHECK_EQ(d::refused_size_detail(std::uint64_t{1} << 40), 0xffffffffu);
  // `block` on a closed ring gives up instead of waiting forever.
  std::atomic_ref<std::uint32_t>(mem.host.consumer->closed).store(1);
  st = d::claim<cuda_atomics, d::device_wait>(ring, 32, devtap::overflow_policy::block, pos);
  CHECK(st == d::claim_status::closed);
  CHECK(!d::fits_cached<cuda_atomics>(ring, 32));
}

HARNESS_CASE(blocked_producers_resume) {
  // Producers blocked on a tiny ring resume as a reader frees space: nothing lost, order kept.
  d::host_ring_allocation mem(512);
  constexpr std::uint32_t producers = 4, per_producer = 3000;
  std::vector<std::thread> threads;
  for (std::uint32_t p = 0; p < producers; ++p)
    threads.emplace_back([&mem, p] {
      for (std::uint32_t i = 0; i < per_producer; ++i) {
        const producer_rec r{p, i, {p * 1000003ull + i, ~std::uint64_t{i}}};
        std::uint64_t pos = 0;
        if (d::claim<cuda_atomics, d::device_wait>(mem.producer, d::record_bytes(sizeof r), devtap::overflow_policy::block,
                                              pos) != d::claim_status::claimed)
          return;
        d::write_record<cuda_atomics>(mem.producer, pos, devtap::tap_point<producer_rec>{1, 0}, r, sizeof r);
      }
    });
  d::ring_reader reader(mem.host);
  std::vector<std::uint32_t> next(producers, 0);
  std::uint32_t received = 0, bad = 0;
  CHECK(read_records(reader, [&] { return received == producers * per_producer; }, [&](const d::record_ref& rec) {
    producer_rec r{};
    if (!d::decode(rec.payload, rec.payload_bytes, r) || r.producer >= producers || r.seq != next[r.producer] ||
        r.payload[0] != r.producer * 1000003ull + r.seq)
      ++bad;
    else
      ++next[r.producer];
    ++received;
  }));
  for (auto& t : threads) t.join();
  CHECK_EQ(received, producers * per_producer);
  CHECK_EQ(bad, 0u);
}

HARNESS_CASE(calls_through_cuda_atomics) {
  // device_call, the kernels' call, run by host threads: reply slots from the taken bits, the request
  // through the ring, the answer awaited with the device's back-off. A hand-written reader answers
  // as the receiver's handler would (answer_call). More callers than slots: some wait for a slot.
  d::host_ring_allocation mem(4096);
  const devtap::outfeed out(mem.producer, devtap::overflow_policy::block, "gpu-test", true, 7);
  const devtap::call_point<point3, std::uint64_t> point{5 | d::call_id_flag, devtap::call_fingerprint_v<point3, std::uint64_t>, 7};
  constexpr std::uint32_t callers = d::reply_slot_count + 16, per_caller = 40;
  std::atomic<bool> stop{false};
  std::atomic<std::uint32_t> answered{0}, bad_requests{0};
  std::atomic<bool> reader_ok{true};
  std::thread reader_thread([&] {
    d::ring_reader reader(mem.host);
    reader_ok = read_records(reader, [&] { return stop.load(); }, [&](const d::record_ref& rec) {
      d::call_request request{};
      point3 p{};
      std::memcpy(&request, rec.payload, sizeof request);
      if (rec.header->consumer_id != point.id || rec.header->fingerprint != point.fingerprint ||
          !d::decode(rec.payload + sizeof request, rec.payload_bytes - sizeof request, p))
        ++bad_requests;
      const std::uint64_t reply = static_cast<std::uint64_t>(p.x) * 1000 + static_cast<std::uint64_t>(p.y);
      d::answer_call(mem.host, request, devtap::call_errc::none, &reply, sizeof reply);
      ++answered;
    });
  });
  std::atomic<std::uint32_t> wrong{0};
  std::vector<std::thread> threads;
  for (std::uint32_t c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      for (std::uint32_t i = 0; i < per_caller; ++i) {
        const auto r = d::device_call(out, point, point3{float(c), float(i), 0});
        if (!r.ok() || *r != std::uint64_t{c} * 1000 + i) ++wrong;
      }
    });
  for (auto& t : threads) t.join();
  CHECK_EQ(wrong.load(), 0u);
  CHECK_EQ(answered.load(), callers * per_caller);
  CHECK_EQ(bad_requests.load(), 0u);
  // Every slot was given back.
  for (std::uint32_t w = 0; w < d::reply_slot_count / 32; ++w) CHECK_EQ(mem.host.producer->reply_slots_taken[w], 0u);
  stop = true;
  reader_thread.join();
  CHECK(reader_ok.load());  // no malformed record

  // Refusals come back as codes, with nothing sent: a point of another receiver, a request too large.
  const devtap::call_point<point3, std::uint64_t> foreign{5 | d::call_id_flag, point.fingerprint, 8};
  CHECK(d::device_call(out, foreign, point3{}).error() == devtap::call_errc::no_handler);
  const devtap::call_point<std::array<std::uint8_t, 5000>, int> huge{6 | d::call_id_flag, 1, 7};
  CHECK(d::device_call(out, huge, std::array<std::uint8_t, 5000>{}).error() == devtap::call_errc::too_large);
  CHECK_EQ(mem.host.consumer->sticky_error, d::sticky_stale_point | d::sticky_record_too_large);

  // The reader gone while a call waits: the call returns `closed` instead of waiting for ever.
  std::thread closer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    d::close_ring(mem.host, d::ring_reader_gone);
  });
  CHECK(d::device_call(out, point, point3{1, 2, 3}).error() == devtap::call_errc::closed);
  closer.join();
}

HARNESS_CASE(stamped_calls_through_cuda_atomics) {
  // With timestamps, a call's record starts with its stamp (time, the device's next number), its id
  // carries the stamp flag, and its call_request follows the stamp.
  d::host_ring_allocation mem(4096);
  const devtap::outfeed out(mem.producer, devtap::overflow_policy::block, "gpu-test", true, 7, true);
  const devtap::call_point<point3, std::uint64_t> point{5 | d::call_id_flag, devtap::call_fingerprint_v<point3, std::uint64_t>, 7};
  constexpr std::uint32_t calls = 50;
  std::atomic<bool> stop{false};
  std::atomic<std::uint32_t> bad{0};
  std::uint64_t last_time = 0, next_sequence = 0;  // (reader thread)
  std::thread reader_thread([&] {
    d::ring_reader reader(mem.host);
    read_records(reader, [&] { return stop.load(); }, [&](const d::record_ref& rec) {
      d::tap_stamp stamp{};
      d::call_request request{};
      point3 p{};
      std::memcpy(&stamp, rec.payload, sizeof stamp);
      std::memcpy(&request, rec.payload + sizeof stamp, sizeof request);
      if (rec.header->consumer_id != (point.id | d::stamped_id_flag) || stamp.sequence != next_sequence++ ||
          stamp.time_ns < last_time ||
          !d::decode(rec.payload + sizeof stamp + sizeof request, rec.payload_bytes - sizeof stamp - sizeof request, p))
        ++bad;
      last_time = stamp.time_ns;
      const std::uint64_t reply = static_cast<std::uint64_t>(p.x) + 1;
      d::answer_call(mem.host, request, devtap::call_errc::none, &reply, sizeof reply);
    });
  });
  std::uint32_t wrong = 0;
  for (std::uint32_t i = 0; i < calls; ++i) {
    const auto r = d::device_call(out, point, point3{float(i), 0, 0});
    if (!r.ok() || *r != i + 1) ++wrong;
  }
  stop = true;
  reader_thread.join();
  CHECK_EQ(wrong, 0u);
  CHECK_EQ(bad.load(), 0u);
  CHECK_EQ(next_sequence, std::uint64_t{calls});
  CHECK_EQ(mem.host.producer->taps, std::uint64_t{calls});
}

HARNESS_CASE(strided_copy_matches_the_codec) {
  // 32 "lanes" each copying their share give the codec's bytes: data, then zeros to a multiple of 8.
  alignas(8) std::uint8_t src[200];
  for (int k = 0; k < 200; ++k) src[k] = static_cast<std::uint8_t>(k + 1);
  for (std::size_t off : {0, 1, 3, 8}) {
    for (std::size_t n = 0; n < 120; n += 7) {
      for (unsigned lanes : {1u, 13u, 32u}) {
        alignas(8) std::byte dst[200];
        std::memset(dst, 0xee, sizeof dst);
        for (unsigned rank = 0; rank < lanes; ++rank)
          d::strided_copy(dst, reinterpret_cast<const std::byte*>(src + off), n, rank, lanes);
        bool ok = std::memcmp(dst, src + off, n) == 0;
        for (std::size_t k = n; k < d::align_up(n, 8); ++k) ok = ok && dst[k] == std::byte{0};
        ok = ok && (d::align_up(n, 8) == sizeof dst || dst[d::align_up(n, 8)] == std::byte{0xee});
        CHECK(ok);
      }
    }
  }
}

HARNESS_CASE(sticky_errors_reach_close) {
  // The receiver reports what a CUDA producer leaves in the sticky words; a cpu ring stands in.
  devtap::receiver_options o;
  o.backends = {"cpu"};
  o.budget_bytes = 4096;
  devtap::receiver rx(o);
  auto p = rx.attach<int>([](int) {});
  const d::ring_view ring = rx.outfeed(*devtap::cpu_devices()[0]).ring();
  d::set_sticky<cuda_atomics>(ring, d::sticky_record_too_large, d::refused_size_detail(6000));
  devtap::cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(p, 1); });
  std::string message;
  try {
    rx.close();
  } catch (const devtap::tap_error& e) {
    message = e.what();
  }
  CHECK(message.find("refused a record of 6000 bytes") != std::string::npos);
}

// ---- the cuda backend, with or without a GPU ------------------------------------------------

HARNESS_CASE(probe_tells_no_gpu_from_a_failure) {
  const devtap::cuda_availability gpu = devtap::probe_cuda();
  std::printf("  probe_cuda: %s (%d device(s))\n", gpu.usable() ? "usable" : gpu.reason.c_str(), gpu.devices);
  CHECK(gpu.usable() == gpu.reason.empty());
  CHECK(gpu.usable() == (gpu.devices > 0));
  if (!gpu.usable() && !devtap::detail::nvidia_driver_present()) {
    // No driver on this machine: a skip, never a failure (and the reason says why).
    CHECK(gpu.what == devtap::cuda_availability::state::no_driver);
    CHECK(gpu.nothing_to_run_on());
    CHECK(gpu.reason.find("cudaErrorInsufficientDriver") != std::string::npos);
  }
  if (!gpu.usable() && devtap::detail::nvidia_driver_present()) {
    CHECK(gpu.what != devtap::cuda_availability::state::no_driver);  // a driver is here: skip only for no device
  }
}

HARNESS_CASE(cuda_backend_or_cpu_fallback) {
  const std::string why = harness::gpu_unavailable();
  const auto all = devtap::backends();
  const auto errors = devtap::backend_errors();
  if (!why.empty()) {
    std::printf("  no GPU (%s): checking the fallback to cpu\n", why.c_str());
    CHECK(errors.count("cuda") == 1);
    if (errors.count("cuda") == 1) {
      std::printf("  recorded: %s\n", errors.at("cuda").c_str());
      CHECK(errors.at("cuda").find("cudaGetDeviceCount") != std::string::npos);
    }
    CHECK(devtap::default_backend() == "cpu");
    CHECK(std::none_of(all.begin(), all.end(), [](devtap::client* c) { return c->platform() == "cuda"; }));
    // The CUDA ring cannot be allocated either: a clear error, not a crash.
    bool threw = false;
    try {
      d::cuda_ring_allocation ring(0, 4096, "cuda:0");
    } catch (const devtap::backend_error& e) {
      threw = true;
      std::printf("  cuda ring: %s\n", e.what());
    }
    CHECK(threw);
  } else {
    std::printf("  GPU present: checking the cuda ring's layout\n");
    CHECK(devtap::default_backend() == "cuda");
    devtap::device& gpu = *devtap::devices("cuda")[0];
    auto ring = gpu.allocate_ring(4096);
    CHECK(!ring->host_can_produce);
    CHECK(!ring->producers_wake_reader);
    CHECK(ring->host.producer == nullptr);
    CHECK(ring->host.data != nullptr && ring->producer.data != nullptr && ring->producer.producer != nullptr);
    CHECK_EQ(ring->host.capacity, 4096u);
    const auto position = ring->claimed_position(std::chrono::steady_clock::now() + std::chrono::seconds(5));
    CHECK(position.has_value());
    CHECK_EQ(position.value_or(1), 0u);
    cudaPointerAttributes attr{};
    CHECK_EQ(cudaPointerGetAttributes(&attr, ring->producer.producer), cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice);
    CHECK_EQ(cudaPointerGetAttributes(&attr, ring->host.data), cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeHost);
  }
  // Either way a receiver over every usable device works, and cpu devices deliver.
  devtap::receiver rx({.budget_bytes = 1u << 20, .name = "fallback"});
  std::atomic<int> sum{0};
  auto p = rx.attach<int>([&](int v) { sum += v; });
  for (devtap::cpu_device* c : devtap::cpu_devices()) c->run([&](devtap::cpu_context& ctx) { ctx.tap(p, 5); });
  rx.close();
  CHECK_EQ(sum.load(), 5 * static_cast<int>(devtap::cpu_devices().size()));
}

}  // namespace

int main(int argc, char** argv) {
  devtap::set_log_level(devtap::log_level::error);
  return harness::run(argc, argv, false);
}
