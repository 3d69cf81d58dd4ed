#pragma once
/** `probe_cuda()`: whether this machine can run CUDA work, and if not, whether that is because it
 * has no GPU (no driver, no device: skip) or because something is broken (fail). Host code only. */
#include <devtap/config.hpp>

#include <cuda_runtime_api.h>

#include <string>

#include <unistd.h>

DEVTAP_BEGIN_NAMESPACE

/** What `probe_cuda()` found. */
struct cuda_availability {
  enum class state {
    usable,     ///< at least one GPU, the runtime works
    no_driver,  ///< no NVIDIA driver on this machine: nothing to run on (a test skips)
    no_device,  ///< a driver, but no GPU visible to this process (cudaErrorNoDevice, or none counted)
    failed      ///< a driver is present and the runtime still fails: a real error
  };
  state what = state::failed;
  int devices = 0;
  std::string reason;  ///< empty when usable; else the CUDA error's name and text

  bool usable() const noexcept { return what == state::usable; }
  /** True when there is nothing to run on (no driver, no device): a GPU test may skip then, and
   *  only then; `failed` is a failure. */
  bool nothing_to_run_on() const noexcept { return what == state::no_driver || what == state::no_device; }
};

namespace detail {
/** Whether an NVIDIA kernel driver is installed (what nvidia-smi needs): its /proc entry or its
 *  control device. Without one, cudart reports cudaErrorInsufficientDriver: no GPU here. */
inline bool nvidia_driver_present() noexcept {
  return ::access("/proc/driver/nvidia/version", F_OK) == 0 || ::access("/dev/nvidiactl", F_OK) == 0;
}
}  // namespace detail

/** Counts the GPUs through the CUDA runtime and says what the answer means. */
inline cuda_availability probe_cuda() {
  cuda_availability a;
  const cudaError_t status = cudaGetDeviceCount(&a.devices);
  if (status == cudaSuccess && a.devices > 0) {
    a.what = cuda_availability::state::usable;
    return a;
  }
  a.devices = 0;
  if (status == cudaSuccess) {
    a.what = cuda_availability::state::no_device;
    a.reason = "no CUDA device";
    return a;
  }
  a.reason = std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
  if (status == cudaErrorNoDevice) {
    a.what = cuda_availability::state::no_device;
  } else if (status == cudaErrorInsufficientDriver && !detail::nvidia_driver_present()) {
    a.what = cuda_availability::state::no_driver;
    a.reason += " (no NVIDIA driver on this machine)";
  } else {
    a.what = cuda_availability::state::failed;  // e.g. a driver older than the runtime: say so, do not skip
  }
  return a;
}

DEVTAP_END_NAMESPACE
