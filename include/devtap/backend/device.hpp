#pragma once
/** `device` and `client`: what every backend provides, whatever it runs on. */
#include <devtap/backend/process.hpp>
#include <devtap/config.hpp>
#include <devtap/detail/text.hpp>
#include <devtap/errors.hpp>
#include <devtap/fwd.hpp>
#include <devtap/log.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
struct ring_allocation;
/** Closes (logged) the open receivers that drain a device whose client is being destroyed; set by
 *  the first receiver (the receiver layer is above this one). False when one could only be
 *  abandoned (the destructor runs in its consumer or its devices' work): it still uses the devices. */
inline std::atomic<bool (*)(const device&)> close_receivers_draining{nullptr};
/** Whether this thread is a consumer of a receiver (open or closing) that drains a device: a wait
 *  for that device's work could then wait for itself. Set with close_receivers_draining. */
inline std::atomic<bool (*)(const device&)> consumer_of_receiver_draining{nullptr};
}  // namespace detail

/** One device of a backend. Owned by its `client`: the default registry's live for the program's
 *  life; a client of one's own must outlive the receivers that drain its devices (one still open
 *  when the client goes is closed first, with a warning). */
class device {
public:
  device(const device&) = delete;
  device& operator=(const device&) = delete;
  /** Frees the rings it kept, but for one a host thread still waits in or a scope_guard pins. */
  virtual ~device();

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
  /** True on a thread that runs this device's work (a cpu device's executor): waiting there for the
   *  device's pending work would wait forever. */
  virtual bool runs_on_this_thread() const noexcept { return false; }
  /** True when host threads may tap into this device's ring (false for CUDA: its ring tail lives on the GPU). */
  virtual bool host_can_tap() const noexcept { return true; }

  /** The outfeed of the receiver attached to this device; throws outfeed_error (naming `what`,
   *  e.g. "tap") when there is none. Host taps (cpu_context::tap, print) start here. */
  const outfeed& attached_outfeed(const char* what) const {
    const outfeed* out = attached_.load(std::memory_order_acquire);
    if (out == nullptr)
      throw outfeed_error(std::string("devtap: ") + what + " on device '" + name() +
                          "' with no receiver attached (create a devtap::receiver for it first); nothing was written");
    return *out;
  }
  /** Keeps a closed receiver's ring alive until the next one closes on this device, and after that
   *  while a host thread still waits inside it (a call, a tap blocked for space: detail::ring_pin),
   *  or until the device goes: a host thread still inside a tap or call when its receiver was
   *  destroyed touches live memory, of a ring nobody reads, and leaves with an error. */
  void retire_ring(std::shared_ptr<detail::ring_allocation> ring);
  /** Attaches a receiver's `out` (it owns it); false if another receiver already is attached. */
  bool try_attach(const outfeed* out) noexcept {
    const outfeed* expected = nullptr;
    return attached_.compare_exchange_strong(expected, out, std::memory_order_acq_rel);
  }
  /** A client's destructor, before its devices go: closes the receiver still open on this device,
   *  which would otherwise drain freed memory. False when it could not (see close_receivers_draining):
   *  the device must then stay. */
  bool close_attached_receiver() const noexcept {  // (also once detached: a close() may still run)
    auto* close = detail::close_receivers_draining.load(std::memory_order_acquire);
    return close == nullptr || close(*this);
  }
  /** Whether this thread is a consumer of a receiver that drains this device. */
  bool consumer_runs_here() const noexcept {
    auto* ask = detail::consumer_of_receiver_draining.load(std::memory_order_acquire);
    return ask != nullptr && ask(*this);
  }
  /** Why the device's work failed since `seen` failures (empty: it did not), e.g. a CUDA kernel
   *  that faulted; `seen` becomes the count now. A receiver reports it from close(): records that
   *  work tapped may be missing. */
  std::string work_failure_since(std::uint64_t& seen) const {
    std::lock_guard lock(work_failure_mutex_);
    const bool failed = work_failures_ > seen;
    seen = work_failures_;
    return failed ? work_failure_ : std::string();
  }
  /** Detaches `out` if it is the attached one. */
  void detach(const outfeed* out) noexcept {
    const outfeed* expected = out;
    attached_.compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }

protected:
  /** A backend says its pending work failed (`what`: why), before it runs after_pending_work's callback. */
  void note_work_failure(std::string what) {
    std::lock_guard lock(work_failure_mutex_);
    ++work_failures_;
    work_failure_ = std::move(what);
  }
  /** Runs an `after_pending_work` callback on a backend's thread: an exception is logged, never lost. */
  void run_pending_work_callback(const std::function<void()>& fn) const noexcept;

  device(int id, std::string_view platform, std::string name, int process_index)
      : id_(id), platform_(platform), name_(std::move(name)), process_index_(process_index) {}

private:
  int id_;
  std::string_view platform_;
  std::string name_;
  int process_index_;
  std::mutex retired_mutex_;
  std::vector<std::shared_ptr<detail::ring_allocation>> retired_rings_;  // the newest last
  std::atomic<const outfeed*> attached_{nullptr};  // the attached receiver's handle
  mutable std::mutex work_failure_mutex_;
  std::uint64_t work_failures_ = 0;  // note_work_failure calls so far
  std::string work_failure_;         // the last one's text
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
  /** Number of processes of the launcher (1 without one); a backend may know better. */
  virtual int process_count() const noexcept { return current_process().count; }
  /** The devices this process can use. */
  virtual std::span<device* const> local_devices() const noexcept = 0;
  /** Number of local devices. */
  std::size_t device_count() const noexcept { return local_devices().size(); }

protected:
  client() = default;
};

namespace detail {
/** A client destroyed where its devices are still in use (from their own work, which cannot join
 *  its own thread, or from a consumer of a receiver it could only abandon) keeps them here until the
 *  process ends. Never destroyed, so nothing joins their threads at exit. */
template <class Device>
void keep_devices_until_exit(std::vector<std::unique_ptr<Device>>& devices) {
  static auto* const mutex = new std::mutex();
  static auto* const kept = new std::vector<std::unique_ptr<Device>>();
  std::lock_guard lock(*mutex);
  for (auto& d : devices) kept->push_back(std::move(d));
  devices.clear();
}

/** What makes a backend's device list unusable (a null device, one listed twice), or "" when
 *  nothing does: the registry refuses such a client, which receivers would otherwise blame on the
 *  user's list. */
inline std::string devices_defect(std::span<device* const> devs) {
  std::vector<const device*> sorted(devs.begin(), devs.end());
  std::sort(sorted.begin(), sorted.end(), std::less<>());
  if (!sorted.empty() && sorted.front() == nullptr) return "holds a null device";
  const auto same = std::adjacent_find(sorted.begin(), sorted.end());
  return same == sorted.end() ? std::string() : "lists device '" + printable((*same)->name()) + "' twice";
}
}  // namespace detail

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/backend/device_impl.hpp>
#endif
