#pragma once
/** Consumer coroutines: `consumer<T>` is what a consumer returns, `inbox<T>` what it reads from.
 *
 *   devtap::consumer<Progress> report(devtap::inbox<Progress> in) {
 *     while (auto p = co_await in.next()) { ... }   // std::nullopt at end of stream
 *   }
 *
 * The receiver drives it: it hands over one record and resumes the coroutine, which runs until
 * its next `co_await in.next()`. The record's bytes are released only then, which is why a span
 * inside a received value stays valid until the next `co_await`. */
#include <devtap/backend/device.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/tap_info.hpp>

#include <coroutine>
#include <cstddef>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
/** Plain values: the consumer copies them straight out of the ring when it resumes, once. */
template <class T>
inline constexpr bool copied_on_resume_v = is_raw_v<T> && std::is_default_constructible_v<T>;

/** A copied_on_resume_v value straight from its bytes (no zero-fill first). */
template <class T>
T load_raw(const std::byte* bytes) noexcept {
  T value;  // default-initialised: the copy overwrites every byte
  std::memcpy(static_cast<void*>(&value), bytes, sizeof(T));
  return value;
}

/** The hand-over slot between the receiver thread and one consumer coroutine. */
template <class T>
struct mailbox {
  // copied_on_resume_v: the payload in the ring; otherwise the decoded value. Empty: end of the stream.
  std::conditional_t<copied_on_resume_v<T>, const std::byte*, std::optional<T>> value{};
  const device* source = nullptr;
  record_stamp stamp{};
  bool pending = false;
};
}  // namespace detail

template <class T>
class consumer;

/** Where a consumer coroutine reads its values from, one device's stream (or all, when shared). */
template <class T>
class inbox {
public:
  explicit inbox(detail::mailbox<T>* box) noexcept : box_(box) {}

  /** What `next()` returns; the only thing a consumer coroutine may `co_await`. */
  struct next_awaiter {
    detail::mailbox<T>* box;
    bool await_ready() const noexcept { return box->pending; }
    void await_suspend(std::coroutine_handle<>) const noexcept {}
    std::optional<T> await_resume() const noexcept(std::is_nothrow_move_constructible_v<T>) {
      box->pending = false;
      if constexpr (detail::copied_on_resume_v<T>) {
        // The record's bytes stay in the ring until this coroutine suspends again.
        if (box->value == nullptr) return std::nullopt;
        return detail::load_raw<T>(box->value);  // this form compiles to one copy into the result
      } else {
        return std::move(box->value);
      }
    }
  };

  /** Awaitable: the next value, or `std::nullopt` once the stream has ended. */
  next_awaiter next() noexcept { return next_awaiter{box_}; }

  /** The device the current value came from; before the first value, the device whose stream
   *  this inbox reads. Throws std::logic_error for a shared consumer before its first value. */
  const devtap::device& device() const { return source("device()"); }

  /** When and where the current value was tapped (receiver_options::timestamps), or, without
   *  timestamps, when it was handed over; its device and sequence number. */
  tap_info info() const { return detail::info_of(source("info()"), box_->stamp); }

private:
  const devtap::device& source(const char* call) const {
    if (box_->source == nullptr)
      throw std::logic_error(std::string("devtap: inbox::") + call +
                             " of a shared consumer before its first value: it reads every device's stream");
    return *box_->source;
  }

  detail::mailbox<T>* box_;
};

namespace detail {
template <class T, class Fn>
class coroutine_entry;

/** The promise of a consumer coroutine: it keeps what the coroutine threw for the receiver. */
template <class T>
struct consumer_promise {
  std::exception_ptr error;
  consumer<T> get_return_object() noexcept;
  std::suspend_always initial_suspend() noexcept { return {}; }
  std::suspend_always final_suspend() noexcept { return {}; }
  void return_void() noexcept {}
  void unhandled_exception() noexcept { error = std::current_exception(); }
  // Only the receiver resumes a consumer, when a record arrives; anything else it awaited would
  // resume it on another thread, concurrently with the receiver, after the record was freed.
  template <class A>
  A&& await_transform(A&& awaitable) noexcept {
    static_assert(std::is_same_v<std::remove_cvref_t<A>, typename inbox<T>::next_awaiter>,
                  "devtap: a consumer coroutine may co_await only `in.next()` of its own inbox");
    return std::forward<A>(awaitable);
  }
};
}  // namespace detail

/** The return type of a consumer coroutine. Created suspended; the receiver starts and resumes it. */
template <class T>
class consumer {
public:
  using promise_type = detail::consumer_promise<T>;

  consumer() = default;
  consumer(consumer&& other) noexcept : handle_(std::exchange(other.handle_, {})) {}
  consumer& operator=(consumer&& other) noexcept {
    if (this != &other) {
      reset();
      handle_ = std::exchange(other.handle_, {});
    }
    return *this;
  }
  ~consumer() { reset(); }

  /** True once the coroutine has returned or thrown. */
  bool done() const noexcept { return !handle_ || handle_.done(); }

private:
  friend struct detail::consumer_promise<T>;
  template <class, class>
  friend class detail::coroutine_entry;

  explicit consumer(std::coroutine_handle<promise_type> h) noexcept : handle_(h) {}
  // Runs the coroutine until it waits for its next value; rethrows what it threw. The receiver's only.
  [[gnu::always_inline]] void resume() {
    if (done()) return;
    handle_.resume();
    if (handle_.done() && handle_.promise().error) std::rethrow_exception(std::exchange(handle_.promise().error, {}));
  }
  void reset() noexcept {
    if (handle_) handle_.destroy();
    handle_ = {};
  }
  std::coroutine_handle<promise_type> handle_{};
};

template <class T>
consumer<T> detail::consumer_promise<T>::get_return_object() noexcept {
  return consumer<T>(std::coroutine_handle<consumer_promise>::from_promise(*this));
}

DEVTAP_END_NAMESPACE
