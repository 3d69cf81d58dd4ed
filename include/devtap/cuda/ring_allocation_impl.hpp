#pragma once
// The definitions of the CUDA ring allocation and the CUDA error path (declared in ring_allocation.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/cuda/ring_allocation.hpp>
#include <devtap/ring/wake.hpp>
#include <devtap/tap/tap_info.hpp>

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
    mapped_ = mapped_bytes;
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

// The clock probe (calibrate_clock): one thread waits for the host's round number r in asks[0],
// then writes its %globaltimer to answers[1] and r to answers[0], each fenced system-wide; ~0 ends
// it. PTX, loaded by the runtime (cudaLibraryLoadData), so that host code compiled by g++ has it.
inline constexpr char clock_probe_ptx[] = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry devtap_clock_probe(.param .u64 asks, .param .u64 answers)
{
  .reg .pred %p<3>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [asks];
  ld.param.u64 %rd2, [answers];
  mov.u64 %rd3, 0;
WAIT:
  ld.volatile.global.u64 %rd4, [%rd1];
  setp.eq.u64 %p1, %rd4, %rd3;
  @%p1 bra WAIT;
  setp.eq.u64 %p2, %rd4, -1;
  @%p2 bra DONE;
  mov.u64 %rd5, %globaltimer;
  st.volatile.global.u64 [%rd2+8], %rd5;
  membar.sys;
  st.volatile.global.u64 [%rd2], %rd4;
  membar.sys;
  mov.u64 %rd3, %rd4;
  bra.uni WAIT;
DONE:
  ret;
}
)";

DEVTAP_FUNC void cuda_ring_allocation::calibrate_clock() {
  clock_offset_ns = 0;
  clock_error_ns = ~std::uint64_t{0};  // until a round answers
  const std::uint64_t capacity = host.capacity;
  auto* asks = reinterpret_cast<std::uint64_t*>(pinned_ + probe_offset(capacity));
  auto* answers = reinterpret_cast<std::uint64_t*>(pinned_ + probe_offset(capacity) + 64);
  void* asks_gpu = mapped_ + probe_offset(capacity);
  void* answers_gpu = mapped_ + probe_offset(capacity) + 64;
  cudaLibrary_t library = nullptr;
  // The probe's own stream: a probe still queued behind a GPU-filling kernel when calibration gives
  // up must not hold up flush()'s tail copy on stream_. Destroyed at once; CUDA releases it once the
  // probe ran (it ends at once then: asks[0] says so).
  cudaStream_t probe_stream = nullptr;
  bool finished = false;
  bool failed = false;  // a CUDA call failed: said once, with its reason
  try {
    cuda_current_device current(device_, device_name_);
    cuda_check(cudaStreamCreateWithFlags(&probe_stream, cudaStreamNonBlocking), device_name_,
               "cudaStreamCreateWithFlags (clock probe)");
    std::atomic_ref<std::uint64_t>(asks[0]).store(0, std::memory_order_relaxed);
    std::atomic_ref<std::uint64_t>(answers[0]).store(0, std::memory_order_relaxed);
    cuda_check(cudaLibraryLoadData(&library, clock_probe_ptx, nullptr, nullptr, 0, nullptr, nullptr, 0), device_name_,
               "loading the clock probe (cudaLibraryLoadData)");
    cudaKernel_t kernel = nullptr;
    cuda_check(cudaLibraryGetKernel(&kernel, library, "devtap_clock_probe"), device_name_, "cudaLibraryGetKernel");
    void* args[] = {&asks_gpu, &answers_gpu};
    cuda_check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel), dim3(1), dim3(1), args, 0, probe_stream), device_name_,
               "launching the clock probe");
    std::uint64_t best = ~std::uint64_t{0};
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);  // the probe may wait for a free SM
    for (std::uint64_t round = 1; round <= 64; ++round) {
      // The GPU reads its timer after it saw this ask and before the host sees the answer: the
      // GPU time lies in [ask, sight], so it is read as their middle, within half their distance.
      const std::uint64_t ask = stamp_now_ns();
      std::atomic_ref<std::uint64_t>(asks[0]).store(round, std::memory_order_seq_cst);
      bool answered = false;
      while (!(answered = std::atomic_ref<std::uint64_t>(answers[0]).load(std::memory_order_acquire) == round) &&
             std::chrono::steady_clock::now() < deadline)
        cpu_relax();
      const std::uint64_t sight = stamp_now_ns();
      if (!answered) break;
      const std::uint64_t gpu = std::atomic_ref<std::uint64_t>(answers[1]).load(std::memory_order_relaxed);
      if (sight - ask < best) {
        best = sight - ask;
        clock_offset_ns = static_cast<std::int64_t>(gpu - (ask + best / 2));
        clock_error_ns = (best + 1) / 2;
      }
      deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    }
    std::atomic_ref<std::uint64_t>(asks[0]).store(~std::uint64_t{0}, std::memory_order_seq_cst);  // the probe ends
    // A probe that answered ends at once: at most ~2 s for it. One that never answered is not waited
    // for again (it ends at once whenever it runs; its library stays loaded, below).
    const bool answered = clock_error_ns != ~std::uint64_t{0};
    for (int i = 0; answered && i < 2000 && !finished; ++i) {
      const cudaError_t status = cudaStreamQuery(probe_stream);
      if (status == cudaSuccess) finished = true;
      else if (status != cudaErrorNotReady) cuda_check(status, device_name_, "the clock probe");
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  } catch (const std::exception& e) {
    std::atomic_ref<std::uint64_t>(asks[0]).store(~std::uint64_t{0}, std::memory_order_seq_cst);
    failed = true;
    if (clock_error_ns == ~std::uint64_t{0}) log(log_level::warn, "{}: GPU timestamps not calibrated: {}", device_name_, e.what());
    else log(log_level::warn, "{}: the clock probe failed after it answered (its calibration is kept): {}", device_name_, e.what());
  }
  // A library whose kernel may still be queued stays loaded (a few hundred bytes) rather than pulled from under it.
  if (library != nullptr && finished) (void)cudaLibraryUnload(library);
  if (probe_stream != nullptr) (void)cudaStreamDestroy(probe_stream);
  if (failed) return;
  if (clock_error_ns == ~std::uint64_t{0})
    log(log_level::warn, "{}: GPU timestamps not calibrated (the probe kernel did not answer within 2 s): its "
                         "stamps are the GPU's %globaltimer, not the host's clock", device_name_);
  else
    log(log_level::debug, "{}: GPU clock offset {} ns, within +-{} ns", device_name_, clock_offset_ns, clock_error_ns);
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
