#pragma once
/** The cpu backend: `DEVTAP_CPU_DEVICES=N` host devices, each a thread that runs the work given to it. */
#include <devtap/backend/device.hpp>
#include <devtap/backend/executor.hpp>
#include <devtap/backend/process.hpp>
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/tap_point.hpp>

#include <algorithm>
#include <atomic>
#include <concepts>
#include <stdexcept>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

class cpu_device;

/** What work running on a cpu device receives: its device, and taps into that device's outfeed. */
class cpu_context {
public:
  explicit cpu_context(cpu_device& dev) noexcept : device_(&dev) {}

  /** The device this work runs on. */
  cpu_device& device() const noexcept { return *device_; }

  /** Taps `value` to the consumer behind `point` on this device's attached receiver.
   * Throws `outfeed_error` when no receiver is attached (it never blocks forever). */
  template <class T>
  void tap(const tap_point<T>& point, const T& value) const;

  /** Asks the handler behind `point` (receiver::serve) and blocks this device's thread until its
   *  answer. The handler sees every tap this work made before the call. Throws `call_error` when
   *  there is no answer: the handler threw (its message), the receiver closed or gave up on the
   *  device, the point is not served here, or the types differ (docs/call.md). */
  template <class Req, class Rep>
  Rep call(const call_point<Req, Rep>& point, const Req& request) const;

  /** Marks a span of this work's time: `auto s = ctx.scope("forward");` taps its begin now and its
   *  end when `s` is destroyed (or at `s.end()`), as records in order with this work's taps. The
   *  receiver's trace file draws it; consumers of devtap::scope_event receive both ends. Throws
   *  `outfeed_error` as `tap` does. */
  [[nodiscard]] scope_guard scope(std::string_view name) const;

private:
  cpu_device* device_;
};

/** Work a cpu device accepts: callable with `cpu_context&`, or with nothing. */
template <class F>
concept cpu_work = std::invocable<F&, cpu_context&> || std::invocable<F&>;

namespace detail {

inline constexpr std::string_view cpu_platform = "cpu";
inline constexpr int max_cpu_devices = 1024;

template <class F>
struct cpu_work_result {
  using type = std::invoke_result_t<F&>;
};
template <class F>
  requires std::invocable<F&, cpu_context&>
struct cpu_work_result<F> {
  using type = std::invoke_result_t<F&, cpu_context&>;
};
template <class F>
using cpu_work_result_t = typename cpu_work_result<F>::type;

template <class F>
decltype(auto) invoke_cpu_work(F& fn, cpu_context& ctx) {
  if constexpr (std::invocable<F&, cpu_context&>) return std::invoke(fn, ctx);
  else return std::invoke(fn);
}

/** Parses `DEVTAP_CPU_DEVICES`: null or blank → 1; otherwise an integer in [1, 1024] (white space
 *  around it allowed) or backend_error. */
int cpu_device_count_from(const char* text);

}  // namespace detail

/** A host device: one executor thread running the work given to it, in submission order. */
class cpu_device final : public device {
public:
  cpu_device(int id, int process_index);

  /** Queues `fn` (taking `cpu_context&` or nothing) and returns a future of its result; an
   * exception thrown by `fn` is stored in the future. */
  template <cpu_work F>
  std::future<detail::cpu_work_result_t<std::decay_t<F>>> submit(F&& fn) {
    using R = detail::cpu_work_result_t<std::decay_t<F>>;
    std::packaged_task<R()> task([this, f = std::forward<F>(fn)]() mutable -> R {
      cpu_context ctx(*this);
      return detail::invoke_cpu_work(f, ctx);
    });
    auto result = task.get_future();
    executor_.post(std::move(task));
    return result;
  }

  /** Runs `fn` on the device behind the work queued before it, waits, and returns its result or
   * rethrows its exception. Called from the device's own thread, runs `fn` at once (no deadlock). */
  template <cpu_work F>
  detail::cpu_work_result_t<std::decay_t<F>> run(F&& fn) {
    if (executor_.on_executor_thread()) {
      cpu_context ctx(*this);
      return detail::invoke_cpu_work(fn, ctx);
    }
    // Blocking, so fn can be borrowed rather than moved into the queue.
    return submit([&fn](cpu_context& ctx) -> detail::cpu_work_result_t<std::decay_t<F>> {
             return detail::invoke_cpu_work(fn, ctx);
           }).get();
  }

  DEVTAP_INLINE_VIRTUAL std::unique_ptr<detail::ring_allocation> allocate_ring(std::uint64_t capacity) override;

  bool runs_on_this_thread() const noexcept override { return executor_.on_executor_thread(); }

  /** Queues `fn` behind the work already submitted; an exception from `fn` is logged. */
  DEVTAP_INLINE_VIRTUAL void after_pending_work(std::function<void()> fn) override;

private:
  friend class cpu_client;  // its destructor drains every device before any goes
  detail::executor executor_;  // joined (after running what is queued) when the device is destroyed
};

template <class T>
void cpu_context::tap(const tap_point<T>& point, const T& value) const {
  const outfeed out = device_->attached_outfeed("tap");  // a copy: the receiver may go while this tap waits
  out.tap(point, value);
}

inline scope_guard cpu_context::scope(std::string_view name) const {
  return scope_guard(device_->attached_outfeed("scope"), name);  // the guard holds a copy of the outfeed
}

template <class Req, class Rep>
Rep cpu_context::call(const call_point<Req, Rep>& point, const Req& request) const {
  std::string message;
  const outfeed out = device_->attached_outfeed("call");  // a copy: the receiver may go while this call waits
  const call_result<Rep> result = detail::host_call(out, point, request, &message);
  if (!result.ok()) throw call_error(result.error(), message);
  return *result;
}

/** The cpu backend's client: owns its devices; destroying it drains and joins their threads. */
class cpu_client final : public client {
public:
  /** `devices` host devices (1 to 1024) for the process described by `process`, each with its
   *  own thread; throws backend_error when the count is outside that range or a thread cannot start. */
  explicit cpu_client(int devices, process_info process = current_process());
  DEVTAP_INLINE_VIRTUAL ~cpu_client() override;

  std::string_view platform() const noexcept override { return detail::cpu_platform; }
  int process_index() const noexcept override { return process_.index; }
  /** Number of processes in this job (1 without a launcher). */
  int process_count() const noexcept override { return process_.count; }
  std::span<device* const> local_devices() const noexcept override { return views_; }
  /** The same devices, typed. */
  std::span<cpu_device* const> cpu_devices() const noexcept { return cpu_views_; }

private:
  process_info process_;
  std::vector<std::unique_ptr<cpu_device>> owned_;
  std::vector<device*> views_;
  std::vector<cpu_device*> cpu_views_;
};

namespace detail {
// The device count set in code (0: none), and the count of the first cpu client created from it.
std::atomic<int>& configured_cpu_devices() noexcept;
std::atomic<int>& created_cpu_devices() noexcept;
std::mutex& cpu_device_count_mutex() noexcept;  // held by create() from its read to its publish
std::string& cpu_start_failure();  // why create() failed (created_cpu_devices() is then -1)
}  // namespace detail

/** The cpu backend policy: always present, lowest priority, required (its failure is fatal). */
struct cpu_backend {
  static constexpr std::string_view name = detail::cpu_platform;
  static constexpr int priority = 0;
  static constexpr bool required = true;
  /** `DEVTAP_CPU_DEVICES` devices when set (a malformed value throws `backend_error`), else the
   *  count given to `set_cpu_device_count`, else 1. */
  static std::unique_ptr<cpu_client> create();
};

/** Sets how many devices the cpu backend creates (1 to 1024), in code rather than through
 *  `DEVTAP_CPU_DEVICES`, which wins when both are given. Call it before the first use of the cpu
 *  backend: afterwards it throws std::logic_error (the devices exist); a count out of range throws
 *  std::invalid_argument. */
void set_cpu_device_count(int count);

/** `d` as a cpu device; throws `backend_error` if it belongs to another backend. */
cpu_device& as_cpu_device(device& d);

/** `c` as the cpu backend's client; throws `backend_error` if it is another backend's. */
cpu_client& as_cpu_client(client& c);

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/backend/cpu_impl.hpp>
#endif
