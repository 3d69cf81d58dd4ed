#pragma once
/** A single-thread FIFO executor: the engine of a cpu device (and of the cuda device's helper). */
#include <devtap/config.hpp>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>
#include <type_traits>
#include <utility>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** A move-only `void()` callable (std::move_only_function is C++23). */
class unique_task {
public:
  unique_task() = default;
  template <class F>
    requires(!std::is_same_v<std::remove_cvref_t<F>, unique_task> && std::is_invocable_v<std::decay_t<F>&>)
  unique_task(F&& fn) : impl_(std::make_unique<model<std::decay_t<F>>>(std::forward<F>(fn))) {}

  explicit operator bool() const noexcept { return impl_ != nullptr; }
  void operator()() { impl_->call(); }

private:
  struct concept_t {
    virtual ~concept_t() = default;
    virtual void call() = 0;
  };
  template <class F>
  struct model final : concept_t {
    explicit model(F&& f) : fn(std::move(f)) {}
    explicit model(const F& f) : fn(f) {}
    void call() override { fn(); }
    F fn;
  };
  std::unique_ptr<concept_t> impl_;
};

/** One thread running posted tasks in order. Destruction runs what is already queued, then joins.
 *
 * Tasks must not throw (callers wrap them: packaged_task, or a try/catch that logs). */
class executor {
public:
  executor();
  executor(const executor&) = delete;
  executor& operator=(const executor&) = delete;
  ~executor();

  /** Queues `task` behind everything posted before it. */
  void post(unique_task task);

  /** Tasks posted so far: a cpu client's destructor drains its devices until none posts more. */
  std::uint64_t posted() {
    std::lock_guard lock(mutex_);
    return posted_;
  }
  /** Waits until everything posted before the call has run. Not from the executor's own thread. */
  void wait_idle();

  /** True when called from the executor's own thread. */
  bool on_executor_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }

private:
  void loop(std::stop_token stop);

  std::mutex mutex_;
  std::condition_variable_any ready_;
  std::deque<unique_task> queue_;
  std::uint64_t posted_ = 0;  // under mutex_
  std::jthread thread_;  // last: starts after, and is joined before, the members it uses
};

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/backend/executor_impl.hpp>
#endif
