#pragma once
// The definitions that keep the list of open receivers (open_receivers.hpp): included by
// receiver_impl.hpp, so header-only and compiled mode alike.
#include <devtap/receiver/open_receivers.hpp>
#include <devtap/receiver/receiver.hpp>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC void detail::forget(const receiver_state& state) noexcept {
  auto& list = open_receivers();
  std::lock_guard lock(list.mutex);
  std::erase_if(list.open, [&](const auto& open) { return open.get() == &state; });
}

DEVTAP_FUNC void detail::forget_closed(const receiver_state& state) {
  auto& list = open_receivers();
  std::unique_lock lock(list.mutex);
  // Not a close that waits for this thread (its consumer or device work, or the log sink, which
  // any close may log through), nor one abandoned at exit (on `closing` by no thread, for good).
  // inside() only while such a close is on `closing`: its devices are all there then.
  list.closing_done.wait(lock, [&] {
    return inside_log_sink() || std::ranges::none_of(list.closing, [&](const auto& e) {
             return e.state.get() == &state && e.by != std::this_thread::get_id() && e.by != std::thread::id();
           }) || inside(state, true) != nullptr;
  });
  lock.unlock();
  forget(state);
}

DEVTAP_FUNC void detail::reserve_open() {
  auto& list = open_receivers();
  std::lock_guard lock(list.mutex);
  if (list.open.size() == list.open.capacity()) list.open.reserve(std::max<std::size_t>(8, 2 * list.open.capacity()));
}

DEVTAP_FUNC void detail::add_open(std::shared_ptr<receiver_state> state) {
  auto& list = open_receivers();
  std::lock_guard lock(list.mutex);
  if (!list.handler_registered) list.handler_registered = std::atexit(close_open_receivers_at_exit) == 0;
  close_receivers_draining.store(&close_open_receivers_draining, std::memory_order_release);
  consumer_of_receiver_draining.store(&consumer_of_open_receiver_draining, std::memory_order_release);
  list.open.push_back(std::move(state));
}

namespace detail {
inline bool drains_device(const receiver_state& state, const device* dev) {  // (every device when null)
  return !dev || std::ranges::any_of(state.streams, [dev](const auto& stream) { return stream->dev == dev; });
}

/** Whether the reader of `stream` was let go by a close() (or an abandon) and has not left yet. */
inline bool reader_left_running(const device_stream& stream) {
  return stream.abandoned.load(std::memory_order_relaxed) && !stream.reader_exited.load(std::memory_order_acquire);
}

/** Where a call into user code that was let run on still runs ("on the reader of cpu:1", "in a
 *  merged consumer"); empty once none does. What it locks goes into `keep`, which the caller
 *  releases after the list's lock: a last owner there would run the state's destructor (user code).
 *  (A reader that lets go of the state while it is locked here leaves that destructor to this
 *  thread: a narrow window, accepted; the readers' own ends never wait for it.) */
inline std::vector<std::string> calls_left_running(const open_receiver_list::left_running_entry& entry,
                                                   std::vector<std::shared_ptr<const void>>& keep) {
  std::vector<std::string> where;
  if (auto state = entry.state.lock()) {
    keep.push_back(state);  // first: nothing below may leave `state` the last owner here
    for (const auto& stream : state->streams)
      if (reader_left_running(*stream)) where.push_back("on the reader of " + stream->device_name);
  }
  for (const auto& weak : entry.merged_calls)
    if (auto calling = weak.lock()) {
      keep.push_back(calling);
      if (calling->load(std::memory_order_seq_cst)) where.push_back("in a merged consumer");
    }
  return where;
}

/** Drops the entries of `left_running` that run no user code any more (the list's lock held). */
inline void take_finished(open_receiver_list& list, std::vector<std::shared_ptr<const void>>& keep) {
  std::erase_if(list.left_running, [&](const auto& entry) { return calls_left_running(entry, keep).empty(); });
}
}  // namespace detail

DEVTAP_FUNC void detail::note_left_running(const std::shared_ptr<receiver_state>& state) noexcept {
  std::vector<std::shared_ptr<const void>> keep;  // released after the lock below
  try {
    open_receiver_list::left_running_entry entry{state->name, {}, state, {}};
    for (const auto& stream : state->streams) entry.devices.push_back(stream->dev);
    {
      std::lock_guard lock(state->table_mutex);
      for (const auto& consumer : state->entries)
        if (auto calling = consumer->call_running_flag(); !calling.expired()) entry.merged_calls.push_back(std::move(calling));
    }
    auto& list = open_receivers();
    std::lock_guard lock(list.mutex);
    take_finished(list, keep);
    list.left_running.push_back(std::move(entry));
  } catch (...) {  // out of memory: a client destroyed while the call runs frees the device (as before)
  }
}

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

namespace detail {
/** Whether a call into user code that a close() let run on (left_running) may still use `dev`;
 *  logs each. Asked after the receivers on `dev` were closed: those closes may have let one go. */
inline bool calls_left_running_on(const device& dev) {
  std::vector<std::shared_ptr<const void>> keep;  // released after the lock below
  std::vector<std::pair<std::string, std::string>> still_running;  // receiver, where its call runs
  {
    auto& list = open_receivers();
    std::lock_guard lock(list.mutex);
    take_finished(list, keep);
    for (const auto& entry : list.left_running)
      if (std::ranges::find(entry.devices, &dev) != entry.devices.end())
        for (std::string& where : calls_left_running(entry, keep)) still_running.emplace_back(entry.name, std::move(where));
  }
  for (const auto& [name, where] : still_running)
    log(log_level::warn,
        "receiver '{}': a consumer or handler call, or a trace or record file write, that close() gave up on still runs ({}); device '{}' is kept "
        "until the process exits",
        name, where, dev.name());
  return !still_running.empty();
}
}  // namespace detail

DEVTAP_FUNC bool detail::close_open_receivers(const device* dev) {
  // (Once one could not be closed the devices are kept anyway, and its lines say why.)
  const bool closed = close_each_open_receiver(dev);
  return dev == nullptr || !closed ? closed : !calls_left_running_on(*dev);
}

/** Closes the receivers still open that drain `dev` (all of them when null), logging what close()
 *  throws. One at a time, each taken off the list under its lock, and closed through its state
 *  alone: its owner, or a consumer that one close() calls, may destroy the receiver meanwhile. */
DEVTAP_FUNC bool detail::close_each_open_receiver(const device* dev) {
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
        // this thread (also the log sink of another thread: any close may log): the device stays.
        // Asked under the list's lock: its devices are all there.
        if (e.by == std::this_thread::get_id() || inside_log_sink() || inside(*e.state, true) != nullptr) return false;
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
