#pragma once
/** How the receiver holds a call handler (receiver::serve) without knowing its types (internal). */
#include <devtap/backend/device.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/ring/call.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/tap_info.hpp>

#include <concepts>
#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

template <class Req, class Rep, class Fn>
concept handler_with_info = std::invocable<Fn&, const Req&, const tap_info&> &&
                            std::convertible_to<std::invoke_result_t<Fn&, const Req&, const tap_info&>, Rep>;
template <class Req, class Rep, class Fn>
concept handler_with_device = std::invocable<Fn&, const Req&, const device&> &&
                              std::convertible_to<std::invoke_result_t<Fn&, const Req&, const device&>, Rep>;
template <class Req, class Rep, class Fn>
concept handler_alone = std::invocable<Fn&, const Req&> && std::convertible_to<std::invoke_result_t<Fn&, const Req&>, Rep>;
/** A handler that takes tap_info and not the device. The device is asked first, as for consumers: a
 *  generic `(const Req&, const auto& d)` whose body uses the device must never be instantiated
 *  with a tap_info (a hard error, not a failed check). */
template <class Req, class Rep, class Fn>
constexpr bool handler_with_info_only() {
  if constexpr (handler_with_device<Req, Rep, Fn>) return false;
  else return handler_with_info<Req, Rep, Fn>;
}

/** Every requirement `receiver::serve<Req, Rep>(fn)` puts on its types and handler, as one sentence
 *  at the user's line (the first unmet one). */
template <class Req, class Rep, class Fn>
constexpr bool check_handler() {
  if constexpr (!receivable<Req>)
    static_assert(dependent_false_v<Req>, "devtap: serve<Req, Rep>: Req must be a plain type a tap could carry, "
                                          "default constructible (the receiver decodes each request into a Req)");
  else if constexpr (!reply_type<Rep>)
    static_assert(dependent_false_v<Rep>, "devtap: serve<Req, Rep>: Rep must be a plain, trivially copyable, default "
                                          "constructible type (it is copied into the caller's reply slot)");
  else if constexpr (sizeof(Rep) > max_reply_bytes)
    static_assert(dependent_false_v<Rep>, "devtap: serve<Req, Rep>: Rep is larger than a reply slot holds "
                                          "(devtap::detail::max_reply_bytes, 224 bytes)");
  else if constexpr (!handler_with_device<Req, Rep, Fn> && !handler_with_info_only<Req, Rep, Fn>() &&
                     !handler_alone<Req, Rep, Fn>)
    static_assert(dependent_false_v<Fn>, "devtap: a call handler takes `const Req&` (optionally followed by `const "
                                         "devtap::tap_info&` or `const devtap::device&`) and returns a Rep (or what "
                                         "converts to one)");
  return true;
}

/** A call handler: decodes the request, runs `fn`, and writes its answer (or its exception's message)
 *  into the caller's reply slot on that device's ring. Calls from different devices run at once
 *  unless `shared` (then one at a time). */
template <class Req, class Rep, class Fn>
class call_entry final : public consumer_entry {
  static_assert(check_handler<Req, Rep, Fn>());

public:
  call_entry(std::string name_, Fn fn, bool shared, std::vector<ring_view> rings)
      : consumer_entry(call_fingerprint_v<Req, Rep>, std::move(name_), true), fn_(std::move(fn)),
        shared_(shared && rings.size() > 1), rings_(std::move(rings)) {
    kind = point_kind::call;
  }

  // A handler that threw keeps answering later calls (each failure is that call's alone); the
  // reader keeps what it threw for close().
  delivery deliver(std::size_t device_index, const device& dev, const record_stamp& stamp, const std::byte* payload,
                   std::size_t size) override {
    call_request request;
    if (size < sizeof request) return delivery::mismatch;  // no slot to answer in
    std::memcpy(&request, payload, sizeof request);
    if (request.slot >= reply_slot_count) return delivery::mismatch;
    const ring_view& ring = rings_[device_index];
    std::optional<Req> value = decode_value<Req>(payload + sizeof request, size - sizeof request);
    if (!value) {
      static constexpr char why[] = "the request does not decode as the handler's Req";
      answer_call(ring, request, call_errc::type_mismatch, why, sizeof why - 1);
      return delivery::mismatch;
    }
    std::unique_lock lock(mutex_, std::defer_lock);
    if (shared_ && !lock_shared(lock)) return delivery::given_up;  // its caller was told call_errc::closed
    try {
      Rep reply = invoke(*value, dev, stamp);
      if (lock.owns_lock()) lock.unlock();  // answer_call wakes the caller, which may call again at once
      answer_call(ring, request, call_errc::none, &reply, sizeof reply);
    } catch (const std::exception& e) {
      const char* message = message_of(e);
      answer_call(ring, request, call_errc::handler_failed, message, std::strlen(message));
      throw;
    } catch (...) {
      static constexpr char why[] = "unknown exception";
      answer_call(ring, request, call_errc::handler_failed, why, sizeof why - 1);
      throw;
    }
    return delivery::delivered;
  }
  void finish(std::size_t, const device&) override {}
  void describe(const std::byte* payload, std::size_t size, std::string& out) const override {  // the request
    if (size >= sizeof(call_request)) describe_as<Req>(payload + sizeof(call_request), size - sizeof(call_request), out);
    else consumer_entry::describe(payload, size, out);
  }

private:
  Rep invoke(const Req& request, const device& dev, const record_stamp& stamp) {
    // std::invoke: a member pointer passes the checks (std::invocable), so it is called as they say.
    if constexpr (handler_with_device<Req, Rep, Fn>) return static_cast<Rep>(std::invoke(fn_, request, dev));
    else if constexpr (handler_with_info<Req, Rep, Fn>) return static_cast<Rep>(std::invoke(fn_, request, info_of(dev, stamp)));
    else return static_cast<Rep>(std::invoke(fn_, request));
  }

  Fn fn_;
  const bool shared_;
  const std::vector<ring_view> rings_;  // the host view of each device's ring, by device index
  std::mutex mutex_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
