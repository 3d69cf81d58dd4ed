#pragma once
// The definitions of the CUDA ring allocation and the CUDA error path (declared in ring_allocation.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/cuda/ring_allocation.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC std::string cuda_error_text(std::string_view what, cudaError_t status) {
  return format_message("{}: {} ({}, code {})", what, cudaGetErrorString(status), cudaGetErrorName(status),
                        static_cast<int>(status));
}

DEVTAP_FUNC void cuda_check(cudaError_t status, std::string_view what) {
  if (status != cudaSuccess) throw backend_error(cuda_error_text(what, status));
}

DEVTAP_FUNC void cuda_check(cudaError_t status, std::string_view device_name, std::string_view what) {
  if (status != cudaSuccess) cuda_check(status, format_message("{}: {}", device_name, what));
}

DEVTAP_FUNC cuda_ring_allocation::cuda_ring_allocation(int device, std::uint64_t capacity, std::string device_name)
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
    // The consumer side and the readback word start at zero; the records need no cleaning (stamps, ring/layout.hpp).
    std::memset(pinned_ + consumer_offset(capacity), 0, pinned_bytes(capacity) - consumer_offset(capacity));
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
    const std::uint64_t key = new_stamp_key(pinned_);
    host = ring_view{nullptr, reinterpret_cast<ring_consumer_side*>(pinned_ + consumer_offset(capacity)), pinned_,
                     capacity, key};
    producer = ring_view{producer_side_, reinterpret_cast<ring_consumer_side*>(mapped_bytes + consumer_offset(capacity)),
                         mapped_bytes, capacity, key};
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

DEVTAP_FUNC cuda_ring_allocation::~cuda_ring_allocation() { release(); }

DEVTAP_FUNC std::optional<std::uint64_t> cuda_ring_allocation::claimed_position(std::chrono::steady_clock::time_point deadline) const {
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

DEVTAP_FUNC void cuda_ring_allocation::release() noexcept {
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

}  // namespace detail

DEVTAP_END_NAMESPACE
