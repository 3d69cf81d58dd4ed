#pragma once
/** Taps from inside running CUDA kernels (nvcc only; reached through <devtap/devtap.hpp>).
 *
 *   __global__ void step(devtap::outfeed out, devtap::tap_point<progress> point) {
 *     ...
 *     out.tap(point, progress{i, loss});   // any thread of any block
 *   }
 *
 * `outfeed::tap` in device code calls `detail::device_tap` below. It writes one record of the
 * ring protocol (devtap/ring/produce.hpp) through the `cuda_atomics` policy: the claim is a CAS on
 * the tail in device memory, the payload is written with plain stores into pinned host memory,
 * and the header is published by one system-scope release store. The lanes of a warp that tap at
 * the same time into the same ring share one claim (one CAS for the warp, offsets by prefix sum)
 * whenever their records together fit in one record's limit.
 *
 * A full ring: `block` waits (`__nanosleep` backoff, reading the host's head rarely), `drop`
 * counts and skips, `error` records `sticky_ring_full` (and counts the record as dropped).
 * A record over max_record_bytes(capacity): `sticky_record_too_large` with its payload size,
 * never written. A blocked tap gives up (and counts a drop) once the ring is closed, so a kernel
 * never hangs on a receiver that has gone. `close()` reports the sticky errors.
 *
 * `warp_tap` sends one (large) record written by all the lanes that call it together.
 * No `__device__` globals, no -rdc: everything a tap needs travels in the `outfeed` argument.
 * Spans and tuples in device code need nvcc's `--expt-relaxed-constexpr` (see codec.hpp). */
#include <devtap/config.hpp>
#include <devtap/cuda/atomics.cuh>
#include <devtap/ring/layout.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/tap_point.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** The value sticky_detail holds for a refused record: its payload size, saturated to 32 bits. */
DEVTAP_HOST_DEVICE constexpr std::uint32_t refused_size_detail(std::uint64_t payload) {
  return payload > 0xffffffffu ? 0xffffffffu : static_cast<std::uint32_t>(payload);
}

/** Copies `n` bytes from `src` to `dst` (8-byte aligned) and zero-fills dst up to the next multiple
 *  of 8: the `rank`-th of `lanes` copiers takes every lanes-th 8-byte word (a warp's instruction
 *  writes 256 bytes in a row: coalesced), one copier (rank 0 of 1) takes them all. 8-byte loads when
 *  `src` is 8-byte aligned (nvcc turns the codec's memcpy of a span into byte stores). */
DEVTAP_HOST_DEVICE inline void strided_copy(std::byte* dst, const std::byte* src, std::size_t n, unsigned rank,
                                            unsigned lanes) {
  const std::size_t words = n / 8;
  const std::size_t rest = n % 8;
  auto* d = reinterpret_cast<std::uint64_t*>(dst);
  if (reinterpret_cast<std::uintptr_t>(src) % 8 == 0) {
    const auto* s = reinterpret_cast<const std::uint64_t*>(src);
    for (std::size_t i = rank; i < words; i += lanes) d[i] = s[i];
  } else {
    for (std::size_t i = rank; i < words; i += lanes) {
      std::uint64_t w = 0;
      for (int b = 0; b < 8; ++b) w |= static_cast<std::uint64_t>(static_cast<unsigned char>(src[8 * i + b])) << (8 * b);
      d[i] = w;
    }
  }
  if (rest != 0 && rank == words % lanes) {  // the last, partial word, with its zero padding
    std::uint64_t w = 0;
    for (std::size_t b = 0; b < rest; ++b)
      w |= static_cast<std::uint64_t>(static_cast<unsigned char>(src[8 * words + b])) << (8 * b);
    d[words] = w;
  }
}

/** Writes the record of `value` at the claimed `pos` and publishes it (payload, then header); with
 *  a `stamp` (timestamps on), the stamp first and the id flagged (tap/tap_info.hpp). */
DEVTAP_NO_EXEC_CHECK
template <class Atomics, class T>
DEVTAP_HOST_DEVICE void write_record(const ring_view& ring, std::uint64_t pos, const tap_point<T>& point, const T& value,
                                     std::uint64_t payload, const tap_stamp* stamp = nullptr) {
  std::byte* dst = stamp != nullptr ? put_stamp(ring.payload_at(pos), *stamp) : ring.payload_at(pos);
  const std::uint32_t id = stamp != nullptr ? point.id | stamped_id_flag : point.id;
  if constexpr (shape_of<T> == shape::span) {  // the codec's layout, 8 bytes at a time
    *reinterpret_cast<std::uint64_t*>(dst) = value.size();
    strided_copy(dst + 8, reinterpret_cast<const std::byte*>(value.data()), value.size() * sizeof(typename T::element_type),
                 0, 1);
  } else {
    encode(value, dst);
  }
  commit<Atomics>(ring, pos, id, point.fingerprint, static_cast<std::uint32_t>(payload));
}

#if defined(__CUDACC__)

__device__ inline unsigned lane_id() {
  unsigned id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

__device__ inline unsigned lanes_below(unsigned mask) {
  unsigned lt;
  asm volatile("mov.u32 %0, %%lanemask_lt;" : "=r"(lt));
  return __popc(mask & lt);
}

__device__ inline std::uint64_t shfl_u64(unsigned mask, std::uint64_t v, unsigned src) {
  return static_cast<std::uint64_t>(__shfl_sync(mask, static_cast<unsigned long long>(v), static_cast<int>(src)));
}

/** Exclusive prefix sum and total of `bytes` over the lanes of `mask` (the calling lanes, in lane order). */
__device__ inline void warp_offsets(unsigned mask, unsigned lane, std::uint64_t bytes, std::uint64_t& prefix,
                                    std::uint64_t& total) {
  if (mask == 0xffffffffu) {  // whole warp: Kogge-Stone scan, 5 shuffles
    std::uint64_t inclusive = bytes;
    for (unsigned d = 1; d < 32; d <<= 1) {
      const auto v =
          static_cast<std::uint64_t>(__shfl_up_sync(mask, static_cast<unsigned long long>(inclusive), d));
      if (lane >= d) inclusive += v;
    }
    total = shfl_u64(mask, inclusive, 31);
    prefix = inclusive - bytes;
    return;
  }
  prefix = 0;  // a partial warp: one shuffle per calling lane
  total = 0;
  for (unsigned m = mask; m != 0; m &= m - 1) {
    const unsigned src = static_cast<unsigned>(__ffs(static_cast<int>(m)) - 1);
    const std::uint64_t v = shfl_u64(mask, bytes, src);
    if (src < lane) prefix += v;
    total += v;
  }
}

/** The GPU's global nanosecond timer (receiver_options::timestamps); the host maps it onto its
 *  steady clock with the offset measured at open (cuda_ring_allocation::calibrate_clock). */
__device__ inline std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/** The stamps of the lanes in `mask` tapping together (timestamps on): one counter add for the
 *  warp, each lane the next number in lane order, each its own time. */
__device__ inline tap_stamp warp_stamps(const ring_view& ring, unsigned mask, unsigned lane) {
  const unsigned leader = static_cast<unsigned>(__ffs(static_cast<int>(mask)) - 1);
  std::uint64_t base = 0;
  if (lane == leader)
    base = cuda_atomics::producer_ref<std::uint64_t>(ring.producer->taps)
               .fetch_add(static_cast<std::uint64_t>(__popc(mask)), cuda_atomics::relaxed);
  base = static_cast<std::uint64_t>(__shfl_sync(mask, static_cast<unsigned long long>(base), static_cast<int>(leader)));
  return tap_stamp{global_timer_ns(), base + lanes_below(mask)};
}

/** The tap of a CUDA thread (what `outfeed::tap` calls in device code). Any thread, any block. */
template <class T>
__device__ void device_tap(const outfeed& out, const tap_point<T>& point, const T& value) {
  const ring_view ring = out.ring();
  if (ring.data == nullptr) return;  // an empty handle: there is nowhere to write, or to count
  // The lanes tapping together into the same ring (lanes may hold handles of different devices).
  const unsigned active = __match_any_sync(__activemask(), reinterpret_cast<unsigned long long>(ring.data));
  const std::uint64_t stamp_bytes = out.timestamps() ? sizeof(tap_stamp) : 0;
  const std::uint64_t payload = stamp_bytes + encoded_size(value);
  const std::uint64_t bytes = record_bytes(payload);
  const std::uint64_t limit = max_record_bytes(ring.capacity);
  // A tap_point of no receiver (id 0 would end the stream), of another one, or with a flag bit set
  // (a call's would be answered in a slot its payload names): dropped, counted, reported.
  const bool attached = is_tap_id(point.id) && point.receiver == out.receiver_id();
  const bool sendable = attached && bytes <= limit;
  if (!attached) {
    count_dropped<cuda_atomics>(ring, 1, bytes);
    set_sticky<cuda_atomics>(ring, sticky_stale_point, 0);
  } else if (!sendable) {
    set_sticky<cuda_atomics>(ring, sticky_record_too_large, refused_size_detail(payload));
  }
  const unsigned mask = __ballot_sync(active, sendable);
  if (!sendable) return;

  const unsigned lane = lane_id();
  const unsigned lanes = static_cast<unsigned>(__popc(mask));
  // Taken before the claim, as a cpu tap's: a tap that is then dropped has used its number (a gap).
  tap_stamp stamp{};
  if (stamp_bytes != 0) stamp = warp_stamps(ring, mask, lane);
  const tap_stamp* stamped = stamp_bytes != 0 ? &stamp : nullptr;
  std::uint64_t prefix, total;
  if constexpr (is_raw_v<T>) {  // one size for every lane: no shuffles
    prefix = bytes * lanes_below(mask);
    total = bytes * lanes;
  } else {
    warp_offsets(mask, lane, bytes, prefix, total);
  }
  const overflow_policy policy = out.policy();
  if (lanes > 1 && total <= limit) {  // one claim for the warp; `total` is the same in every lane
    const unsigned leader = static_cast<unsigned>(__ffs(static_cast<int>(mask)) - 1);
    std::uint64_t pos = 0;
    auto status = claim_status::claimed;
    if (lane == leader) {
      status = claim<cuda_atomics, device_wait>(ring, total, policy, pos);
      account_unwritten<cuda_atomics>(ring, status, lanes, total);
    }
    status = static_cast<claim_status>(__shfl_sync(mask, static_cast<unsigned>(status), static_cast<int>(leader)));
    pos = shfl_u64(mask, pos, leader);
    if (status != claim_status::claimed) return;
    write_record<cuda_atomics>(ring, pos + prefix, point, value, payload, stamped);
  } else {
    std::uint64_t pos = 0;
    const claim_status status = claim<cuda_atomics, device_wait>(ring, bytes, policy, pos);
    if (status != claim_status::claimed) {
      account_unwritten<cuda_atomics>(ring, status, 1, bytes);
      return;
    }
    write_record<cuda_atomics>(ring, pos, point, value, payload, stamped);
  }
}

/** warp_tap's body for the lanes in `group` (all of them running it now). The lanes share the
 *  payload's copy only where the caller named the group (`group_named`): a group taken from
 *  `__activemask()` after divergent code was seen on an H200 to name lanes that wrote elsewhere,
 *  leaving words of the record unwritten (tests/cuda warp_taps_after_branch). */
template <class T>
__device__ void warp_tap_group(unsigned group, bool group_named, const outfeed& out, const tap_point<T>& point,
                               const T& value) {
  const ring_view ring = out.ring();
  // Lanes with an empty handle leave, and the others must not name them in a *_sync mask (every
  // lane of a mask has to reach the call): the group shrinks to the lanes holding a ring first.
  const unsigned holding = __ballot_sync(group, ring.data != nullptr);
  if (ring.data == nullptr) return;
  const unsigned mask = __match_any_sync(holding, reinterpret_cast<unsigned long long>(ring.data));
  const unsigned lane = lane_id();
  const unsigned leader = static_cast<unsigned>(__ffs(static_cast<int>(mask)) - 1);
  const unsigned lanes = static_cast<unsigned>(__popc(mask));
  const unsigned rank = lanes_below(mask);
  const std::uint64_t stamp_bytes = out.timestamps() ? sizeof(tap_stamp) : 0;
  // The first lane's size is the claim's: every lane's stores below stay within it, even where a
  // lane passed a value of another size (a lane at another call site with the same `lanes`).
  const std::uint64_t value_bytes = shfl_u64(mask, encoded_size(value), leader);
  const std::uint64_t payload = stamp_bytes + value_bytes;
  const std::uint64_t bytes = record_bytes(payload);
  // The first lane's point decides for all (it is the one committed): lanes that passed another
  // point cannot leave the others waiting in a shuffle for them.
  const bool attached =
      __shfl_sync(mask, is_tap_id(point.id) && point.receiver == out.receiver_id() ? 1 : 0, static_cast<int>(leader)) != 0;
  if (!attached || bytes > max_record_bytes(ring.capacity)) {
    if (lane == leader) {
      if (!attached) {
        count_dropped<cuda_atomics>(ring, 1, bytes);
        set_sticky<cuda_atomics>(ring, sticky_stale_point, 0);
      } else
        set_sticky<cuda_atomics>(ring, sticky_record_too_large, refused_size_detail(payload));
    }
    return;
  }
  std::uint64_t pos = 0;
  auto status = claim_status::claimed;
  tap_stamp stamp{};  // one record: one number, the leader's time (taken before the claim, as device_tap's)
  if (lane == leader) {
    if (stamp_bytes != 0) stamp = take_stamp<cuda_atomics>(ring, global_timer_ns());
    status = claim<cuda_atomics, device_wait>(ring, bytes, out.policy(), pos);
    account_unwritten<cuda_atomics>(ring, status, 1, bytes);
  }
  status = static_cast<claim_status>(__shfl_sync(mask, static_cast<unsigned>(status), static_cast<int>(leader)));
  if (status != claim_status::claimed) return;
  pos = shfl_u64(mask, pos, leader);
  std::byte* dst = ring.payload_at(pos);
  if (stamp_bytes != 0) {
    if (lane == leader) put_stamp(dst, stamp);
    dst += sizeof(tap_stamp);
  }
  // A span's facts, shuffled from the first lane by every lane whatever its T: lanes at another call
  // site naming the same lanes run the same *_sync operations (none waits for a shuffle the others
  // never make), and copy the first lane's exact bytes. Lanes of another shape write their own value,
  // within the claim: the record's content is then unspecified, not its bounds.
  std::uint64_t own_count = 0, own_bytes = 0, own_data = 0;
  bool own_local = true;
  if constexpr (shape_of<T> == shape::span) {
    own_count = value.size();
    own_bytes = value.size() * sizeof(typename T::element_type);
    own_data = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(value.data()));
    own_local = __isLocal(value.data());
  }
  const std::uint64_t span_count = shfl_u64(mask, own_count, leader);
  const std::uint64_t span_bytes = shfl_u64(mask, own_bytes, leader);
  const auto* span_data = reinterpret_cast<const std::byte*>(static_cast<std::uintptr_t>(shfl_u64(mask, own_data, leader)));
  // The leader's elements in its local memory (its stack) are out of the other lanes' reach: the
  // same address names each lane's own local memory. Then the leader copies them alone.
  const bool span_shared = __shfl_sync(mask, own_local ? 0 : 1, static_cast<int>(leader)) != 0 && group_named;
  const unsigned copiers = group_named ? lanes : 1;
  if constexpr (is_raw_v<T>) {
    const std::uint64_t n = sizeof(T) < value_bytes ? sizeof(T) : value_bytes;
    if (rank < copiers) strided_copy(dst, reinterpret_cast<const std::byte*>(&value), n, rank, copiers);
  } else if constexpr (shape_of<T> == shape::span) {
    if (rank == 0) *reinterpret_cast<std::uint64_t*>(dst) = span_count;  // the span encoding: u64 count, elements
    if (span_shared) strided_copy(dst + 8, span_data, span_bytes, rank, lanes);
    else if (lane == leader) strided_copy(dst + 8, span_data, span_bytes, 0, 1);
  } else {
    if (lane == leader) encode(value, dst);
  }
  // Every lane's payload stores before the leader's release store of the header (system scope).
  ::cuda::atomic_thread_fence(::cuda::std::memory_order_release, ::cuda::thread_scope_system);
  __syncwarp(mask);
  if (lane == leader)
    commit<cuda_atomics>(ring, pos, stamp_bytes != 0 ? point.id | stamped_id_flag : point.id, point.fingerprint,
                         static_cast<std::uint32_t>(payload));
}
#endif  // __CUDACC__

}  // namespace detail

#if defined(__CUDACC__)
/** One record from the lanes of a warp that call this together with the same `point` and
 *  `value` (e.g. a span of a block's data): the first of them claims (the overflow policy applies
 *  as for `tap`), all copy the payload — raw values and `std::span<const U>` 8 bytes per lane and
 *  instruction, other types by the first lane — and the first commits once every lane's stores
 *  are fenced. For large records: one thread alone writes a 64 KiB record 8 bytes at a time.
 *  The point, the value's size, and a span's pointer and length are taken from the first lane, so
 *  lanes that disagree (even on the type) cannot write outside the claim (the record's content is
 *  then unspecified); a span in the first lane's local memory (an array on its stack)
 *  is copied by that lane alone. Lanes holding handles of different rings form separate groups;
 *  lanes holding an empty handle send nothing. Called by one thread, it is a plain tap.
 *
 *  Without a mask, the group is the lanes active at the call (`__activemask()`): lanes that
 *  diverged before it (a branch, a loop with lane-dependent trips) may arrive apart and then send
 *  one record per arrival, and the first lane copies the payload alone. Pass the lanes that call
 *  it as `lanes` to have them meet first (`__syncwarp(lanes)`): one record, whatever came before,
 *  copied by all of them. */
template <class T>
__device__ void warp_tap(const outfeed& out, const tap_point<T>& point, const T& value) {
  detail::warp_tap_group(__activemask(), false, out, point, value);
}

/** As above, for exactly the lanes in `lanes` (each of which must call it, as for `__syncwarp`). */
template <class T>
__device__ void warp_tap(unsigned lanes, const outfeed& out, const tap_point<T>& point, const T& value) {
  __syncwarp(lanes);
  detail::warp_tap_group(lanes, true, out, point, value);
}

#endif

DEVTAP_END_NAMESPACE
