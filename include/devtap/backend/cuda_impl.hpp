#pragma once
// The definitions of the cuda backend (declared in cuda.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/cuda.hpp>

#if defined(DEVTAP_WITH_CUDA)

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC cuda_device::cuda_device(int id, int process_index, const cudaDeviceProp& prop)
      : device(id, detail::cuda_platform, detail::format_message("cuda:{} ({})", id, prop.name), process_index),
        gpu_name_(prop.name),
        cc_major_(prop.major),
        cc_minor_(prop.minor),
        total_memory_(prop.totalGlobalMem) {}

DEVTAP_FUNC std::unique_ptr<detail::ring_allocation> cuda_device::allocate_ring(std::uint64_t capacity) {
  return std::make_unique<detail::cuda_ring_allocation>(id(), capacity, name());
}

DEVTAP_FUNC void cuda_device::after_pending_work(std::function<void()> fn) {
  helper_.post([this, fn = std::move(fn)] {
    cudaError_t status = cudaSetDevice(id());
    if (status == cudaSuccess) status = cudaDeviceSynchronize();
    if (status != cudaSuccess) {  // (a kernel that faulted: what it tapped may be missing)
      std::string what = detail::cuda_error_text(name() + ": waiting for pending work", status);
      log(log_level::error, "{}", what);
      note_work_failure(std::move(what));
    }
    run_pending_work_callback(fn);
  });
}

DEVTAP_FUNC cuda_client::~cuda_client() {
  // From a device's helper thread (a log sink called by its callback), that thread cannot join itself.
  const auto own = std::find_if(owned_.begin(), owned_.end(), [](const auto& d) { return d->runs_on_this_thread(); });
  bool receivers_closed = true;  // else they would drain freed devices
  for (auto& d : owned_) receivers_closed = d->close_attached_receiver() && receivers_closed;
  if (receivers_closed && own == owned_.end()) return;
  // Destroyed from a consumer of a receiver it could only abandon (its readers still use the
  // devices), while a consumer that a close() gave up on still runs, or from a helper thread: nothing may go.
  const std::string how = own != owned_.end() ? "from the helper thread of its device '" + (*own)->name() + "'"
                                              : "while a receiver still uses its devices (from its consumer or a thread "
                                                "its close() waits for, or while a consumer its close() gave up on still "
                                                "runs)";
  log(log_level::warn, "cuda_client destroyed {}: its {} device(s) are kept until the process exits", how,
      owned_.size());
  detail::keep_devices_until_exit(owned_);
}

DEVTAP_FUNC cuda_client::cuda_client(process_info process) : process_(process) {
  int count = 0;
  detail::cuda_check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    // (One GPU that cannot be described fails the backend, as any failure of its start: named.)
    detail::cuda_check(cudaGetDeviceProperties(&prop, i), "cuda:" + std::to_string(i), "cudaGetDeviceProperties");
    owned_.push_back(std::make_unique<cuda_device>(i, process_.index, prop));
    views_.push_back(owned_.back().get());
  }
}

DEVTAP_FUNC std::unique_ptr<cuda_client> cuda_backend::create() { return std::make_unique<cuda_client>(); }

DEVTAP_END_NAMESPACE

#endif  // DEVTAP_WITH_CUDA
