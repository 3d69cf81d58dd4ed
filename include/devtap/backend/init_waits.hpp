#pragma once
// Which thread waits for which backend's initialisation (registry.hpp), to refuse a wait that
// closes a ring: two create()s on two threads that ask for each other's backend waited in
// call_once for each other for ever (internal).
#include <devtap/config.hpp>

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

class init_waits {
public:
  /** This thread is about to wait for slot `asked`, whose create() runs on `owner(slot)` (a default
   *  id: none yet). Returns the slots of the ring that waiting would close, `asked` first (empty:
   *  the wait is registered; end it with `done()`). The ring is followed by each owner's latest
   *  wait, under the lock that registers waits, so of two threads closing a ring the later sees it. */
  template <class Owner>
  std::vector<std::size_t> start(std::size_t asked, Owner owner) {
    const std::thread::id self = std::this_thread::get_id();
    std::lock_guard lock(mutex_);
    std::vector<std::size_t> ring{asked};
    for (std::size_t slot = asked; ring.size() <= waits_.size() + 1;) {
      const std::thread::id by = owner(slot);
      if (by == self) return ring;
      const auto latest = std::find_if(waits_.rbegin(), waits_.rend(), [by](const auto& w) { return w.first == by; });
      // its owner runs (the wait it registered before taking the create() on is for this slot): no ring
      if (by == std::thread::id() || latest == waits_.rend() || latest->second == slot) break;
      slot = latest->second;
      ring.push_back(slot);
    }
    waits_.emplace_back(self, asked);
    return {};
  }
  void done() {  // this thread's latest wait is over
    const std::thread::id self = std::this_thread::get_id();
    std::lock_guard lock(mutex_);
    const auto latest = std::find_if(waits_.rbegin(), waits_.rend(), [self](const auto& w) { return w.first == self; });
    if (latest != waits_.rend()) waits_.erase(std::next(latest).base());
  }

private:
  std::mutex mutex_;
  std::vector<std::pair<std::thread::id, std::size_t>> waits_;  // oldest first; a thread's latest last
};

}  // namespace detail
DEVTAP_END_NAMESPACE
