#pragma once
/** `device` and `client`: what every backend provides, whatever it runs on. */
#include <devtap/config.hpp>
#include <devtap/log.hpp>

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
struct ring_allocation;
struct outfeed_port;
}  // namespace detail

/** One device of a backend. Owned by its `client`; references stay valid for the program's life. */
class device {
public:
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  virtual ~device() = default;

  /** Index of the device within its platform (0, 1, ...). */
  int id() const noexcept { return id_; }
  /** The backend's name, e.g. "cpu" or "cuda". */
  std::string_view platform() const noexcept { return platform_; }
  /** Human-readable name, e.g. "cpu:0" or "cuda:0 (NVIDIA H200)". */
  const std::string& name() const noexcept { return name_; }
  /** The process (rank) that owns the device. */
  int process_index() const noexcept { return process_index_; }

  // ---- hooks the outfeed receiver uses; users never call these ----

  /** Allocates a ring of `capacity` bytes that this device's producers can write. */
  virtual std::unique_ptr<detail::ring_allocation> allocate_ring(std::uint64_t capacity) = 0;
  /** Calls `fn` once all work submitted to the device so far has finished (cpu: queued behind it). */
  virtual void after_pending_work(std::function<void()> fn) = 0;
  /** True when host threads may tap into this device's ring (false for CUDA: its ring tail lives on the GPU). */
  virtual bool host_can_tap() const noexcept { return true; }

  /** The receiver port attached to this device, or null. */
  detail::outfeed_port* attached_port() const noexcept { return port_.load(std::memory_order_acquire); }
  /** Attaches `port`; false if another receiver already is. */
  bool try_attach(detail::outfeed_port* port) noexcept {
    detail::outfeed_port* expected = nullptr;
    return port_.compare_exchange_strong(expected, port, std::memory_order_acq_rel);
  }
  /** Detaches `port` if it is the attached one. */
  void detach(detail::outfeed_port* port) noexcept {
    detail::outfeed_port* expected = port;
    port_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }

protected:
  /** Runs an `after_pending_work` callback on a backend's thread: an exception is logged, never lost. */
  void run_pending_work_callback(const std::function<void()>& fn) const noexcept {
    try {
      fn();
    } catch (const std::exception& e) {
      log(log_level::error, "{}: after_pending_work callback threw: {}", name(), e.what());
    } catch (...) {
      log(log_level::error, "{}: after_pending_work callback threw an unknown exception", name());
    }
  }

  device(int id, std::string_view platform, std::string name, int process_index)
      : id_(id), platform_(platform), name_(std::move(name)), process_index_(process_index) {}

private:
  int id_;
  std::string_view platform_;
  std::string name_;
  int process_index_;
  std::atomic<detail::outfeed_port*> port_{nullptr};
};

/** A backend's live instance: its platform and devices. */
class client {
public:
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  virtual ~client() = default;

  /** The backend's name, e.g. "cpu". */
  virtual std::string_view platform() const noexcept = 0;
  /** This process's index among the launcher's processes (0 without a launcher). */
  virtual int process_index() const noexcept = 0;
  /** The devices this process can use. */
  virtual std::span<device* const> local_devices() const noexcept = 0;
  /** Number of local devices. */
  std::size_t device_count() const noexcept { return local_devices().size(); }

protected:
  client() = default;
};

DEVTAP_END_NAMESPACE
