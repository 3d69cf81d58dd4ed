#pragma once
/** `cuda_atomics`: the ring protocol's atomics policy (devtap/ring/layout.hpp) for CUDA producers.
 *
 * Where each word lives decides the scope (docs/cuda.md, "Memory placement"):
 *  - `producer_ref` — the reservation words (`ring_producer_side::tail`, `head_cache`, `big_claim`) live in
 *    device memory and only threads of that one GPU touch them: device scope, resolved in L2.
 *  - `shared_ref` — every word the host also reads or writes (record headers, `head`, `closed`,
 *    the sticky error and drop counters) lives in pinned host memory mapped into the GPU: system
 *    scope, so a release store of a header publishes the payload written before it to the host.
 *  - `wakes_reader = false` — a kernel cannot notify a host thread; the receiver polls.
 *
 * Also usable from host code of a `.cu` file (libcu++ implements both scopes on the host): the
 * CPU-run test tests/cuda/tap_host.cu drives the shared protocol through this policy. nvcc only. */
#include <devtap/config.hpp>

#include <cuda/atomic>
#include <cuda/std/atomic>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

struct cuda_atomics {
  template <class T> using producer_ref = ::cuda::atomic_ref<T, ::cuda::thread_scope_device>;
  template <class T> using shared_ref = ::cuda::atomic_ref<T, ::cuda::thread_scope_system>;
  static constexpr ::cuda::std::memory_order relaxed = ::cuda::std::memory_order_relaxed;
  static constexpr ::cuda::std::memory_order acquire = ::cuda::std::memory_order_acquire;
  static constexpr ::cuda::std::memory_order release = ::cuda::std::memory_order_release;
  static constexpr ::cuda::std::memory_order acq_rel = ::cuda::std::memory_order_acq_rel;
  static constexpr ::cuda::std::memory_order seq_cst = ::cuda::std::memory_order_seq_cst;
  static constexpr bool wakes_reader = false;  // the receiver polls a CUDA ring (receiver/reader.hpp)
};

}  // namespace detail
DEVTAP_END_NAMESPACE
