#pragma once
// The definitions that keep the list of open receivers (open_receivers.hpp): included by
// receiver_impl.hpp, so header-only and compiled mode alike.
#include <devtap/receiver/open_receivers.hpp>
#include <devtap/receiver/receiver.hpp>

#include <algorithm>
#include <mutex>
#include <string>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC void receiver::forget(bool destroying) noexcept {  // the exit handler leaves it alone
  auto& list = detail::open_receivers();
  std::unique_lock lock(list.mutex);
  std::erase(list.open, this);
  // The exit handler or a client's destructor may be closing it on another thread
  // (close_open_receivers): *this must outlive that close, unless the close waits for this very
  // thread. (Its devices live until that close returns: inside() may look at them.)
  if (!destroying || std::ranges::count(list.closing, this) == 0 || inside() != nullptr) return;
  list.closed_elsewhere.wait(lock, [&] { return std::ranges::count(list.closing, this) == 0; });
}

/** Closes the receivers still open that drain `dev` (all of them when null), logging what close()
 *  throws. One at a time, each taken off the list under its lock: a consumer that one close() calls
 *  may destroy another receiver (which leaves the list), or this one (its name is read first). */
DEVTAP_FUNC void detail::close_open_receivers(const device* dev) {
  for (auto& list = open_receivers();;) {
    std::unique_lock lock(list.mutex);
    const auto it = std::ranges::find_if(list.open, [dev](auto* r) { return !dev || std::ranges::count(r->devices(), dev); });
    if (it == list.open.end()) return;
    receiver* const rx = *it;
    list.open.erase(it);
    list.closing.push_back(rx);  // its destructor, on another thread, now waits for the close below
    const std::string name = rx->name();
    lock.unlock();
    const struct done_closing {
      open_receiver_list& list;
      const receiver* rx;
      ~done_closing() {
        {
          std::lock_guard relock(list.mutex);
          list.closing.erase(std::ranges::find(list.closing, rx));
        }
        list.closed_elsewhere.notify_all();
      }
    } done{list, rx};
    const std::string when = dev == nullptr ? "at exit" : "as the client of device '" + dev->name() + "' is destroyed";
    if (dev != nullptr)  // (a receiver must be closed before the devices it drains go)
      log(log_level::warn, "receiver '{}' still drains device '{}', whose client is being destroyed: closed first", name, dev->name());
    try {
      rx->close();
    } catch (const std::exception& e) {
      log(log_level::error, "receiver '{}' closed {}: {}", name, when, e.what());
    } catch (...) {
      log(log_level::error, "receiver '{}' closed {} with an unknown error", name, when);
    }
  }
}

DEVTAP_END_NAMESPACE
