#pragma once
/** The cuda backend: one device per visible GPU, through the CUDA runtime.
 *
 * Compiled only when the build enables CUDA (`DEVTAP_WITH_CUDA`, set by Meson when nvcc and
 * cudart are found). It keys on that macro, never on `__CUDACC__`, so `.cpp` and `.cu` files of
 * one program see the same backends. Like every backend header it does not include {fmt}. */
#include <devtap/config.hpp>

#if defined(DEVTAP_WITH_CUDA)

#include <devtap/backend/device.hpp>
#include <devtap/backend/executor.hpp>
#include <devtap/backend/process.hpp>
#include <devtap/cuda/probe.hpp>
#include <devtap/cuda/ring_allocation.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

inline constexpr std::string_view cuda_platform = "cuda";

}  // namespace detail

/** One GPU. */
class cuda_device final : public device {
public:
  cuda_device(int id, int process_index, const cudaDeviceProp& prop)
     ;

  /** The GPU's product name, e.g. "NVIDIA H200". */
  const std::string& gpu_name() const noexcept { return gpu_name_; }
  /** Compute capability, e.g. {9, 0}. */
  int compute_capability_major() const noexcept { return cc_major_; }
  int compute_capability_minor() const noexcept { return cc_minor_; }
  /** Global memory in bytes. */
  std::size_t total_memory() const noexcept { return total_memory_; }

  /** Tail and head cache in device memory, headers and record bytes in pinned host memory mapped
   * into the device (devtap/cuda/ring_allocation.hpp); the reader polls, host threads cannot tap. */
  DEVTAP_INLINE_VIRTUAL std::unique_ptr<detail::ring_allocation> allocate_ring(std::uint64_t capacity) override;

  /** Calls `fn` on a helper thread once the GPU's work submitted so far has finished
   * (cudaDeviceSynchronize). `fn` is called even if the synchronisation reports an error, so an
   * end-of-stream marker is never lost; the error is logged. */
  DEVTAP_INLINE_VIRTUAL void after_pending_work(std::function<void()> fn) override;

  /** False: a CUDA ring's reservation word lives in device memory, out of host threads' reach. */
  bool host_can_tap() const noexcept override { return false; }
  /** True on the helper thread: a close there would wait for the callback it runs in. */
  bool runs_on_this_thread() const noexcept override { return helper_.on_executor_thread(); }

private:
  std::string gpu_name_;
  int cc_major_;
  int cc_minor_;
  std::size_t total_memory_;
  detail::executor helper_;  // runs after_pending_work callbacks, in order
};

/** The cuda backend's client: one device per GPU visible to this process. */
class cuda_client final : public client {
public:
  /** Enumerates the GPUs; throws backend_error with the CUDA error text when the runtime cannot
   * (no driver, no GPU). */
  explicit cuda_client(process_info process = current_process());
  /** Closes a receiver still open on one of its devices first (with a warning). */
  ~cuda_client() override;

  std::string_view platform() const noexcept override { return detail::cuda_platform; }
  int process_index() const noexcept override { return process_.index; }
  /** Number of processes in this job (1 without a launcher). */
  int process_count() const noexcept override { return process_.count; }
  std::span<device* const> local_devices() const noexcept override { return views_; }

private:
  process_info process_;
  std::vector<std::unique_ptr<cuda_device>> owned_;
  std::vector<device*> views_;
};

/** The cuda backend policy: highest built-in priority, optional (its failure falls back to cpu). */
struct cuda_backend {
  static constexpr std::string_view name = detail::cuda_platform;
  static constexpr int priority = 200;
  static constexpr bool required = false;
  static std::unique_ptr<cuda_client> create();
};

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/backend/cuda_impl.hpp>
#endif

#endif  // DEVTAP_WITH_CUDA
