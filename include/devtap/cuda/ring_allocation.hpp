#pragma once
/** The ring of a CUDA device: where each word lives (docs/cuda.md, "Memory placement").
 *
 *   pinned host memory, mapped into every GPU (cudaHostAlloc Mapped | Portable), zeroed:
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
inline std::string cuda_error_text(std::string_view what, cudaError_t status) {
  return format_message("{}: {} ({}, code {})", what, cudaGetErrorString(status), cudaGetErrorName(status),
                        static_cast<int>(status));
}

/** The one CUDA error path: throws backend_error "<what>: <CUDA error text> (<name>, code N)" for a
 *  failed runtime call. */
inline void cuda_check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) throw backend_error(cuda_error_text(what, status));
}

/** As cuda_check, with the device named first: "<device>: <what>: ...". */
inline void cuda_check(cudaError_t status, std::string_view device_name, std::string_view what) {
  if (status != cudaSuccess) cuda_check(status, format_message("{}: {}", device_name, what));
}

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
  static constexpr std::uint64_t pinned_bytes(std::uint64_t capacity) noexcept { return readback_offset(capacity) + 64; }

  /** Allocates a ring of `capacity` bytes (a power of two, 256 ... max_ring_capacity) for GPU `device`.
   *  Throws backend_error with the CUDA error text when the runtime refuses. */
  cuda_ring_allocation(int device, std::uint64_t capacity, std::string device_name)
      : device_(device), device_name_(std::move(device_name)) {
    if (capacity < 256 || !std::has_single_bit(capacity) || capacity > max_ring_capacity)
      throw std::invalid_argument(format_message("{}: ring capacity {} is not a power of two in [256, {}]",
                                                 device_name_, capacity, max_ring_capacity));
    cuda_current_device current(device_, device_name_);
    try {
      void* pinned = nullptr;
      cuda_check(cudaHostAlloc(&pinned, pinned_bytes(capacity), cudaHostAllocMapped | cudaHostAllocPortable),
                      device_name_, "cudaHostAlloc (outfeed ring, pinned and mapped)");
      pinned_ = static_cast<std::byte*>(pinned);
      std::memset(pinned_, 0, pinned_bytes(capacity));  // the protocol's invariant: free bytes are zero
      void* mapped = nullptr;
      cuda_check(cudaHostGetDevicePointer(&mapped, pinned_, 0), device_name_, "cudaHostGetDevicePointer");
      void* producer_side = nullptr;
      cuda_check(cudaMalloc(&producer_side, sizeof(ring_producer_side)), device_name_,
                      "cudaMalloc (outfeed ring tail)");
      producer_side_ = static_cast<ring_producer_side*>(producer_side);
      cuda_check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), device_name_,
                      "cudaStreamCreateWithFlags");
      // On the ring's own non-blocking stream, waited for here: no other work of the device is waited for.
      cuda_check(cudaMemsetAsync(producer_side_, 0, sizeof(ring_producer_side), stream_), device_name_,
                      "cudaMemsetAsync (outfeed ring tail)");
      cuda_check(cudaStreamSynchronize(stream_), device_name_, "cudaStreamSynchronize");

      auto* mapped_bytes = static_cast<std::byte*>(mapped);
      host = ring_view{nullptr, reinterpret_cast<ring_consumer_side*>(pinned_ + consumer_offset(capacity)), pinned_,
                       capacity};
      producer = ring_view{producer_side_, reinterpret_cast<ring_consumer_side*>(mapped_bytes + consumer_offset(capacity)),
                           mapped_bytes, capacity};
      readback_ = reinterpret_cast<std::uint64_t*>(pinned_ + readback_offset(capacity));
      producers_wake_reader = false;
      host_can_produce = false;
    } catch (...) {
      release();
      throw;
    }
    log(log_level::debug, "{}: outfeed ring of {} bytes: records at {} (host) / {} (device), tail at {} (device)",
        device_name_, capacity, static_cast<const void*>(host.data), static_cast<const void*>(producer.data),
        static_cast<const void*>(producer_side_));
  }

  ~cuda_ring_allocation() override { release(); }
  cuda_ring_allocation(const cuda_ring_allocation&) = delete;
  cuda_ring_allocation& operator=(const cuda_ring_allocation&) = delete;

  /** The device's tail, copied by the ring's own non-blocking stream: a copy-engine read of 8
   *  bytes, no kernel, so a busy GPU cannot hold flush() up. The copy is polled (cudaStreamQuery)
   *  until `deadline`, never waited for: empty when it has not landed by then. Throws
   *  backend_error if CUDA reports an error. */
  std::optional<std::uint64_t> claimed_position(std::chrono::steady_clock::time_point deadline) const override {
    std::lock_guard lock(readback_mutex_);
    cuda_current_device current(device_, device_name_);
    const auto* tail = reinterpret_cast<const std::byte*>(producer_side_) + offsetof(ring_producer_side, tail);
    cuda_check(cudaMemcpyAsync(readback_, tail, sizeof(std::uint64_t), cudaMemcpyDeviceToHost, stream_),
                    device_name_, "flush: reading the ring's tail (cudaMemcpyAsync)");
    for (auto pause = std::chrono::microseconds(1);; pause = std::min(pause * 2, std::chrono::microseconds(200))) {
      const cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) break;
      if (status != cudaErrorNotReady) cuda_check(status, device_name_, "flush: reading the ring's tail");
      // A later call queues its copy behind this one on the same stream, into the same word: harmless.
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(pause);
    }
    return std::atomic_ref<std::uint64_t>(*readback_).load(std::memory_order_acquire);
  }

private:
  void release() noexcept {
    int previous = -1;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    // cudaFree and cudaFreeHost wait for the device's work: a kernel still tapping finishes first.
    cudaError_t status = cudaSuccess;
    auto keep_first = [&status](cudaError_t s) {
      if (status == cudaSuccess) status = s;
    };
    if (stream_ != nullptr) keep_first(cudaStreamDestroy(stream_));
    if (producer_side_ != nullptr) keep_first(cudaFree(producer_side_));
    if (pinned_ != nullptr) keep_first(cudaFreeHost(pinned_));
    if (status != cudaSuccess)  // e.g. at exit, after the runtime unloaded: nothing more to do
      log(log_level::debug, "{}: freeing the outfeed ring: {}", device_name_, cudaGetErrorString(status));
    stream_ = nullptr;
    producer_side_ = nullptr;
    pinned_ = nullptr;
    if (switched) (void)cudaSetDevice(previous);
  }

  int device_;
  std::string device_name_;
  std::byte* pinned_ = nullptr;
  ring_producer_side* producer_side_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::uint64_t* readback_ = nullptr;
  mutable std::mutex readback_mutex_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
