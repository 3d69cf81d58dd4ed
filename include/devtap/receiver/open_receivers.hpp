#pragma once
/** The receivers open in this process: closed at normal exit (std::exit, return from main) by a
 *  handler that the first receiver registers with std::atexit (defined in receiver.hpp). */
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

struct receiver_state;

struct open_receiver_list {
  std::mutex mutex;
  // Their states, not the receivers: one taken off the list is closed through its state, which
  // its owner may be destroying the receiver meanwhile.
  std::vector<std::shared_ptr<receiver_state>> open;
  // Those a thread has taken off `open` and still closes or abandons (it uses their devices until
  // it is done): a client's destructor must not free those devices under it. `closing_done` is
  // notified as each entry goes.
  struct closing_entry {
    std::shared_ptr<receiver_state> state;
    std::thread::id by;
  };
  std::vector<closing_entry> closing;
  std::condition_variable closing_done;
  // Receivers whose close() let a call into user code run on (a reader stuck in a consumer or
  // handler, a merged consumer's helper): it may use its device (a `const device&`,
  // tap_info::device), so a client destroyed meanwhile keeps that device for good. Weak: the
  // threads that run on own what they use, and the state goes with its last one, as before.
  struct left_running_entry {
    std::string name;
    std::vector<const device*> devices;
    std::weak_ptr<receiver_state> state;                                // its detached readers own it
    std::vector<std::weak_ptr<const std::atomic<bool>>> merged_calls;  // each merged consumer's "in a call"
  };
  std::vector<left_running_entry> left_running;
  bool handler_registered = false;
};

/** Leaked on purpose: the exit handler uses it after static destructors may have run. */
inline open_receiver_list& open_receivers() {
  static auto* const list = new open_receiver_list();
  return *list;
}

/** Room on the list for one receiver more (may throw), taken before its files are started: the
 *  add_open() after them grows the list only if other receivers opened meanwhile. */
void reserve_open();
/** Puts `state` on the list (closed at exit, or by a client destroyed first; the handler is set). */
void add_open(std::shared_ptr<receiver_state> state);
/** Closes the receivers still open that drain `dev` (every one when null), logging what they throw.
 *  False when one that drains `dev` could only be abandoned: this thread is its consumer or its
 *  devices' work, which close() would wait for. */
bool close_open_receivers(const device* dev);
/** close_open_receivers without its last question (whether a call left running may use `dev`). */
bool close_each_open_receiver(const device* dev);
/** At normal exit: closes every receiver still open (each drained within its close_timeout; its
 *  consumers see their end of stream). */
inline void close_open_receivers_at_exit() { close_open_receivers(nullptr); }
/** close() or an abandon let go of `state`'s readers or merged consumers while one may still run
 *  user code (see left_running). */
void note_left_running(const std::shared_ptr<receiver_state>& state) noexcept;
/** Whether this thread is a consumer of a receiver, open or closing, that drains `dev`. */
bool consumer_of_open_receiver_draining(const device& dev) noexcept;
/** From `open` to `closing`, by this thread, while it closes or abandons the receiver; taken off
 *  `closing` at the end of its scope. */
struct closing_mark {
  explicit closing_mark(std::shared_ptr<receiver_state> state);
  closing_mark(std::shared_ptr<receiver_state> state, const std::unique_lock<std::mutex>& list_lock_held);
  ~closing_mark();
  closing_mark(const closing_mark&) = delete;
  closing_mark& operator=(const closing_mark&) = delete;
  std::shared_ptr<receiver_state> state;
};
/** When a client is destroyed before the receivers that drain its devices (device.hpp). */
inline bool close_open_receivers_draining(const device& dev) noexcept {
  try {
    return close_open_receivers(&dev);
  } catch (...) {  // (the log, or the list's allocation): the device goes anyway
    return true;
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
