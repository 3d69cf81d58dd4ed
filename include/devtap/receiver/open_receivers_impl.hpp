#pragma once
// The definitions that keep the list of open receivers (open_receivers.hpp): included by
// receiver_impl.hpp, so header-only and compiled mode alike.
#include <devtap/receiver/open_receivers.hpp>
#include <devtap/receiver/receiver.hpp>

#include <algorithm>
#include <memory>
#include <mutex>
#include <string>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC void detail::forget(const receiver_state& state) noexcept {
  auto& list = open_receivers();
  std::lock_guard lock(list.mutex);
  std::erase_if(list.open, [&](const auto& open) { return open.get() == &state; });
}

namespace detail {
inline bool drains_device(const receiver_state& state, const device* dev) {  // (every device when null)
  return !dev || std::ranges::any_of(state.streams, [dev](const auto& stream) { return stream->dev == dev; });
}
}  // namespace detail

DEVTAP_FUNC detail::closing_mark::closing_mark(std::shared_ptr<receiver_state> closed_here) : state(std::move(closed_here)) {
  auto& list = open_receivers();
  std::lock_guard lock(list.mutex);
  list.closing.push_back({state, std::this_thread::get_id()});  // first: if it cannot grow, the state stays open
  std::erase(list.open, state);
}

DEVTAP_FUNC detail::closing_mark::closing_mark(std::shared_ptr<receiver_state> closed_here, const std::unique_lock<std::mutex>&)
    : state(std::move(closed_here)) {  // (the list's lock held)
  open_receivers().closing.push_back({state, std::this_thread::get_id()});
  std::erase(open_receivers().open, state);
}

DEVTAP_FUNC detail::closing_mark::~closing_mark() {
  auto& list = open_receivers();
  {
    std::lock_guard lock(list.mutex);
    // One mark only: a close_receiver that this thread runs meanwhile adds and takes off its own.
    const auto it = std::ranges::find_if(list.closing, [this](const auto& e) {
      return e.state == state && e.by == std::this_thread::get_id();
    });
    if (it != list.closing.end()) list.closing.erase(it);
  }
  list.closing_done.notify_all();
}

DEVTAP_FUNC bool detail::consumer_of_open_receiver_draining(const device& dev) noexcept {
  auto& list = open_receivers();
  std::lock_guard lock(list.mutex);
  for (const auto& state : list.open)
    if (drains_device(*state, &dev) && inside(*state, false) != nullptr) return true;
  for (const auto& e : list.closing)
    if (drains_device(*e.state, &dev) && inside(*e.state, false) != nullptr) return true;
  return false;
}

/** Closes the receivers still open that drain `dev` (all of them when null), logging what close()
 *  throws. One at a time, each taken off the list under its lock, and closed through its state
 *  alone: its owner, or a consumer that one close() calls, may destroy the receiver meanwhile. */
DEVTAP_FUNC bool detail::close_open_receivers(const device* dev) {
  bool all_closed = true;
  for (auto& list = open_receivers();;) {
    std::unique_lock lock(list.mutex);
    const auto drains = [dev](const std::shared_ptr<receiver_state>& state) { return drains_device(*state, dev); };
    const auto it = std::ranges::find_if(list.open, drains);
    if (it == list.open.end() && dev != nullptr) {
      // One that another close() still closes (close(), ~receiver, the exit handler, another
      // client's destructor) uses the device until that close ends.
      bool any = false;
      for (const auto& e : list.closing) {
        if (!drains(e.state)) continue;
        // This thread handles it (a log line of that close, and its sink), or that close waits for
        // this thread: the device stays. Asked under the list's lock: its devices are all there.
        if (e.by == std::this_thread::get_id() || inside(*e.state, true) != nullptr) return false;
        any = true;
      }
      if (!any) return all_closed;
      list.closing_done.wait(lock);  // until an entry goes; then look again
      continue;
    }
    if (it == list.open.end()) return all_closed;
    const std::shared_ptr<receiver_state> state = *it;
    // On `closing` while this thread handles it, so that another client's destructor waits for it.
    const char* const where = inside(*state, true);  // (under the lock, as above)
    const closing_mark handled_here(state, lock);
    lock.unlock();
    const std::string when = dev == nullptr ? "at exit" : "as the client of device '" + dev->name() + "' is destroyed";
    if (dev != nullptr)  // (a receiver must be closed before the devices it drains go)
      log(log_level::warn, "receiver '{}' still drains device '{}', whose client is being destroyed: closed first",
          state->name, dev->name());
    // std::exit from a consumer or a device's work: close() would wait for this very thread. What
    // its rings still hold is neither delivered nor counted.
    if (where != nullptr && dev == nullptr) {
      log(log_level::error,
          "receiver '{}' not closed at exit: std::exit was called from {}, which close() would wait for; what its "
          "rings still hold is not delivered",
          state->name, where);
      // Abandoned, so that device work blocked in a tap into it ends, and kept on `closing` for
      // good: a client destroyed later in the exit must keep the devices its readers still use.
      const std::unique_lock claim(state->close_mutex, std::try_to_lock);
      if (claim.owns_lock() && state->close_once()) abandon_receiver(state);
      const std::lock_guard relist(list.mutex);
      list.closing.push_back({state, std::thread::id()});  // (by no thread: never taken off)
      continue;
    } else if (where != nullptr) {  // the client is destroyed from there: abandoned, as ~receiver would
      all_closed = false;  // (also when a close() elsewhere holds it: it waits for this thread too)
      const std::unique_lock claim(state->close_mutex, std::try_to_lock);
      if (!claim.owns_lock() || !state->close_once()) continue;
      log(log_level::error,
          "receiver '{}' abandoned, not drained: the client of device '{}' is destroyed from {}; its devices are "
          "kept until the process exits",
          state->name, dev->name(), where);
      abandon_receiver(state);
      continue;
    }
    try {
      close_receiver(state);
    } catch (const std::exception& e) {
      log(log_level::error, "receiver '{}' closed {}: {}", state->name, when, e.what());
    } catch (...) {
      log(log_level::error, "receiver '{}' closed {} with an unknown error", state->name, when);
    }
  }
}

DEVTAP_END_NAMESPACE
