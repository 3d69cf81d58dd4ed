#pragma once
// The definitions of the cpu executor (declared in executor.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/executor.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC executor::executor() : thread_([this](std::stop_token stop) { loop(stop); }) {}

DEVTAP_FUNC executor::~executor() {
  thread_.request_stop();  // wakes the condition_variable_any wait
  thread_.join();
}

DEVTAP_FUNC void executor::post(unique_task task) {
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(task));
    ++posted_;
  }
  ready_.notify_one();
}

DEVTAP_FUNC void executor::wait_idle() {
  std::promise<void> done;
  std::future<void> ran = done.get_future();
  post([&done] { done.set_value(); });
  ran.wait();
}

DEVTAP_FUNC void executor::loop(std::stop_token stop) {
  for (;;) {
    unique_task task;
    {
      std::unique_lock lock(mutex_);
      // Returns when there is work, or when stop was requested; queued work still runs on stop.
      ready_.wait(lock, stop, [this] { return !queue_.empty(); });
      if (queue_.empty()) return;  // stop requested and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace detail

DEVTAP_END_NAMESPACE
