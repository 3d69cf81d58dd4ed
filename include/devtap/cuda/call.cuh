#pragma once
/** Calls from inside running CUDA kernels (nvcc only; reached through <devtap/devtap.hpp>).
 *
 *   __global__ void train(devtap::outfeed out, devtap::call_point<query, answer> ask) {
 *     devtap::call_result<answer> r = out.call(ask, query{step, loss});   // any thread
 *     if (r.ok() && r->stop) return;
 *   }
 *
 * `outfeed::call` in device code calls `detail::device_call` below, which runs the protocol of
 * devtap/ring/call.hpp through the `cuda_atomics` policy: a reply slot from the taken bits in
 * device memory (a caller that finds all taken backs off and is counted), the request as one ring
 * record (the claim and commit of a tap), then system-scope acquire loads of the slot's `answered`
 * word in pinned host memory with `__nanosleep` back-off until the host's answer lands. It never
 * hangs: once the reader has gone (close, a close timeout, a malformed stream) the result says
 * call_errc::closed. Every failure is a code in the result; a handler's message is kept for close(). */
#include <devtap/config.hpp>
#include <devtap/cuda/atomics.cuh>
#include <devtap/cuda/tap.cuh>
#include <devtap/ring/call.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/outfeed.hpp>

#include <cstdint>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** Copies `n` bytes of a reply out of pinned host memory (after the acquire load that saw the answer). */
DEVTAP_HOST_DEVICE inline void copy_reply(void* dst, const std::byte* src, std::size_t n) {
  auto* d = static_cast<unsigned char*>(dst);
  for (std::size_t i = 0; i < n; ++i) d[i] = static_cast<unsigned char>(src[i]);
}

/** A call's stamp time: the GPU's %globaltimer, or the steady clock where host code of a .cu file runs
 *  the protocol (tests/cuda/tap_host.cu). */
DEVTAP_HOST_DEVICE inline std::uint64_t call_time_ns() {
#if defined(__CUDA_ARCH__)
  return global_timer_ns();
#else
  return stamp_now_ns();
#endif
}

/** The call of a CUDA thread. Host code of a .cu file may run it too (tests/cuda/tap_host.cu drives
 *  the protocol through `cuda_atomics` on host threads). */
DEVTAP_NO_EXEC_CHECK
template <class Req, class Rep>
DEVTAP_HOST_DEVICE call_result<Rep> device_call(const outfeed& out, const call_point<Req, Rep>& point, const Req& request) {
  const ring_view ring = out.ring();
  if (ring.data == nullptr) return call_result<Rep>(call_errc::no_handler);
  if (!is_call_id(point.id) || point.receiver == 0 || point.receiver != out.receiver_id()) {
    count_dropped<cuda_atomics>(ring, 1, 0);
    set_sticky<cuda_atomics>(ring, sticky_stale_point, 0);
    return call_result<Rep>(call_errc::no_handler);
  }
  const std::uint64_t stamp_bytes = out.timestamps() ? sizeof(tap_stamp) : 0;
  const std::uint64_t payload = stamp_bytes + sizeof(call_request) + encoded_size(request);
  const std::uint64_t bytes = record_bytes(payload);
  if (bytes > max_record_bytes(ring.capacity)) {
    set_sticky<cuda_atomics>(ring, sticky_record_too_large, refused_size_detail(payload));
    return call_result<Rep>(call_errc::too_large);
  }
  std::uint32_t slot = 0;
  for (unsigned attempt = 0; !try_take_reply_slot<cuda_atomics>(ring, slot); ++attempt) {
    if (attempt == 0)
      typename cuda_atomics::template shared_ref<std::uint64_t>(ring.consumer->reply_slot_waits)
          .fetch_add(1, cuda_atomics::relaxed);
    if (attempt % 16 == 15 && typename cuda_atomics::template shared_ref<std::uint32_t>(ring.consumer->closed)
                                      .load(cuda_atomics::acquire) != ring_open)
      return call_result<Rep>(call_errc::closed);
    producer_backoff(attempt < 6 ? 64u << attempt : 4096u);
  }
  const std::uint32_t sequence = next_call_sequence<cuda_atomics>(ring, slot);
  tap_stamp stamp{};  // as a tap's: taken before the claim, so a call that finds the ring full leaves a gap
  if (stamp_bytes != 0) stamp = take_stamp<cuda_atomics>(ring, call_time_ns());
  std::uint64_t pos = 0;
  const claim_status status = claim<cuda_atomics, device_wait>(ring, bytes, out.policy(), pos);
  if (status != claim_status::claimed) {
    account_unwritten<cuda_atomics>(ring, status, 1, bytes);
    give_back_reply_slot<cuda_atomics>(ring, slot);
    return call_result<Rep>(status == claim_status::closed ? call_errc::closed : call_errc::ring_full);
  }
  std::byte* const dst = stamp_bytes != 0 ? put_stamp(ring.payload_at(pos), stamp) : ring.payload_at(pos);
  *reinterpret_cast<call_request*>(dst) = call_request{slot, sequence};
  encode(request, dst + sizeof(call_request));
  // Its own types, not the point's word (as host_call: a point copied into other types is refused).
  commit<cuda_atomics>(ring, pos, stamp_bytes != 0 ? point.id | stamped_id_flag : point.id, call_fingerprint_v<Req, Rep>,
                       static_cast<std::uint32_t>(payload));
  if (!device_await_answer<cuda_atomics>(ring, slot, sequence)) return call_result<Rep>(call_errc::closed);
  const call_answer answer = read_answer(ring, slot);
  call_result<Rep> result(answer.status);
  if (answer.status == call_errc::none) {
    Rep value;
    copy_reply(&value, answer.bytes, sizeof(Rep));
    result = call_result<Rep>(value);
  }
  give_back_reply_slot<cuda_atomics>(ring, slot);
  return result;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
