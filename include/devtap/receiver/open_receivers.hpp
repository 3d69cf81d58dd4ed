#pragma once
/** The receivers open in this process: closed at normal exit (std::exit, return from main) by a
 *  handler that the first receiver registers with std::atexit (defined in receiver.hpp). */
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>

#include <mutex>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

struct open_receiver_list {
  std::mutex mutex;
  std::vector<receiver*> open;
  bool handler_registered = false;
};

/** Leaked on purpose: the exit handler uses it after static destructors may have run. */
inline open_receiver_list& open_receivers() {
  static auto* const list = new open_receiver_list();
  return *list;
}

void close_open_receivers_at_exit();

}  // namespace detail
DEVTAP_END_NAMESPACE
