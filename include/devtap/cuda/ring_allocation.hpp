#pragma once
/** The ring of a CUDA device: where each word lives (docs/cuda.md, "Memory placement").
 *
 *   pinned host memory, mapped into every GPU (cudaHostAlloc Mapped | Portable); stamps need no
 *   zeroed records (ring/layout.hpp), so only the consumer side and the readback word are zeroed:
 *     [0, capacity)        record headers and payloads   GPU: posted writes; host: reads in place
 *     consumer side        head, closed, sticky error,   host writes head/closed; GPU reads them
 *                          drop counters                 rarely, ORs/adds errors and drops
 *     readback word        the tail, copied here by flush() (a copy, never a kernel)
 *   device memory (cudaMalloc, zeroed):
 *     producer side        tail, head_cache              GPU threads only: device-scope CAS in L2
 *
 * The host view has no producer side (host threads cannot claim: `host_can_produce = false`);
 * the producer view holds device pointers. Host-only code (cudart API): g++ compiles it too, as
 * part of devtap/backend/cuda.hpp. */
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/ring/memory.hpp>

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** "what failed: <cudaGetErrorString> (<cudaGetErrorName>, code N)". */
std::string cuda_error_text(std::string_view what, cudaError_t status);

/** The one CUDA error path: throws backend_error "<what>: <CUDA error text> (<name>, code N)" for a
 *  failed runtime call. */
void cuda_check(cudaError_t status, std::string_view what);

/** As cuda_check, with the device named first: "<device>: <what>: ...". */
void cuda_check(cudaError_t status, std::string_view device_name, std::string_view what);

/** Makes `device` current for a scope and restores the caller's device after. */
class cuda_current_device {
public:
  cuda_current_device(int device, std::string_view device_name) {
    cuda_check(cudaGetDevice(&previous_), device_name, "cudaGetDevice");
    if (previous_ != device) cuda_check(cudaSetDevice(device), device_name, "cudaSetDevice");
    else previous_ = -1;
  }
  ~cuda_current_device() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);
  }
  cuda_current_device(const cuda_current_device&) = delete;
  cuda_current_device& operator=(const cuda_current_device&) = delete;

private:
  int previous_ = -1;
};

/** A CUDA device's ring: records and the consumer side pinned on the host, the producer side on the GPU. */
class cuda_ring_allocation final : public ring_allocation {
public:
  /** Offsets inside the pinned block. */
  static constexpr std::uint64_t consumer_offset(std::uint64_t capacity) noexcept { return capacity; }
  static constexpr std::uint64_t readback_offset(std::uint64_t capacity) noexcept {
    return capacity + ((sizeof(ring_consumer_side) + 63) & ~std::uint64_t{63});
  }
  /** The clock probe's two lines (calibrate_clock): the host's asks, then the GPU's answers. */
  static constexpr std::uint64_t probe_offset(std::uint64_t capacity) noexcept { return readback_offset(capacity) + 64; }
  static constexpr std::uint64_t pinned_bytes(std::uint64_t capacity) noexcept { return probe_offset(capacity) + 128; }

  /** Allocates a ring of `capacity` bytes (a power of two, 256 ... max_ring_capacity) for GPU `device`.
   *  Throws backend_error with the CUDA error text when the runtime refuses. */
  cuda_ring_allocation(int device, std::uint64_t capacity, std::string device_name)
     ;

  DEVTAP_INLINE_VIRTUAL ~cuda_ring_allocation() override;
  cuda_ring_allocation(const cuda_ring_allocation&) = delete;
  cuda_ring_allocation& operator=(const cuda_ring_allocation&) = delete;

  /** The device's tail, copied by the ring's own non-blocking stream: a copy-engine read of 8
   *  bytes, no kernel, so a busy GPU cannot hold flush() up. The copy is polled (cudaStreamQuery)
   *  until `deadline`, never waited for: empty when it has not landed by then. Throws
   *  backend_error if CUDA reports an error. */
  DEVTAP_INLINE_VIRTUAL std::optional<std::uint64_t> claimed_position(std::chrono::steady_clock::time_point deadline) const override;

  /** Measures the GPU's %globaltimer against the host's steady clock (clock_offset_ns and its bound
   *  clock_error_ns): a one-thread probe kernel, loaded from PTX text (no nvcc needed here), answers
   *  rounds the host asks through mapped memory; each answer's GPU time lies between the host's ask
   *  and its sight of the answer, and the tightest of 64 rounds is kept. A GPU too busy to run the
   *  probe within 2 s leaves the stamps uncalibrated (error bound UINT64_MAX, logged). Never throws. */
  DEVTAP_INLINE_VIRTUAL void calibrate_clock() override;

private:
  void release() noexcept;

  int device_;
  std::string device_name_;
  std::byte* pinned_ = nullptr;
  ring_producer_side* producer_side_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::uint64_t* readback_ = nullptr;
  std::byte* mapped_ = nullptr;  // the pinned block as the GPU sees it
  mutable std::mutex readback_mutex_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/cuda/ring_allocation_impl.hpp>
#endif
