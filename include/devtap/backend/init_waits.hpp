#pragma once
// Which thread waits for which backend's initialisation (registry.hpp), to refuse a wait that
// closes a ring: two create()s on two threads that ask for each other's backend, through one
// registry or two, would wait for each other for ever (internal).
#include <devtap/config.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <iterator>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** One backend's start, as a wait names it: the thread running its create() (a default id: none
 *  yet), and the backend's name for messages. */
struct backend_start {
  const std::atomic<std::thread::id>* owner;
  std::string_view name;
};

/** The waits of the whole process: a ring may pass through several registries. */
class init_waits {
public:
  static init_waits& process() {
    static init_waits& waits = *new init_waits;  // never destroyed: registries may outlive statics
    return waits;
  }

  /** This thread is about to wait for `asked`. Returns the names of the ring that waiting would
   *  close, `asked`'s first (empty: the wait is registered; end it with `done()`). The ring is
   *  followed by each owner's latest wait, under the lock that registers waits, so of two threads
   *  closing a ring the later sees it. A waiting thread's registry lives until it is done (its
   *  call is under way), so the owners read here are alive. */
  std::vector<std::string_view> start(backend_start asked) {
    const std::thread::id self = std::this_thread::get_id();
    std::lock_guard lock(mutex_);
    std::vector<std::string_view> ring{asked.name};
    for (backend_start at = asked; ring.size() <= waits_.size() + 1;) {
      const std::thread::id by = at.owner->load(std::memory_order_relaxed);
      if (by == self) return ring;
      const auto latest = std::find_if(waits_.rbegin(), waits_.rend(), [by](const auto& w) { return w.first == by; });
      // its owner runs (the wait it registered before taking the create() on is for this start): no ring
      if (by == std::thread::id() || latest == waits_.rend() || latest->second.owner == at.owner) break;
      at = latest->second;
      ring.push_back(at.name);
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
  std::vector<std::pair<std::thread::id, backend_start>> waits_;  // oldest first; a thread's latest last
};

}  // namespace detail
DEVTAP_END_NAMESPACE
