#pragma once
/** How the receiver holds attached consumers without knowing their types (internal). */
#include <devtap/backend/device.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/receiver/consumer.hpp>
#include <devtap/tap/fingerprint.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** Tag for `receiver::attach`: one consumer instance fed by every device, one record at a time. */
struct shared_t {
  explicit constexpr shared_t() = default;
};
/** Pass to `receiver::attach` to share one consumer instance across devices. */
inline constexpr shared_t shared{};

namespace detail {

enum class delivery { delivered, mismatch, failed_before, returned_before };

/** A whole value from a record's payload; nullopt when the payload does not match T. */
template <class T>
std::optional<T> decode_value(const std::byte* payload, std::size_t size) {
  if constexpr (copied_on_resume_v<T>) {
    if (size != sizeof(T)) return std::nullopt;
    return load_raw<T>(payload);
  } else {
    std::optional<T> value(std::in_place);
    if (!decode(payload, size, *value)) return std::nullopt;
    return value;
  }
}

/** One attached consumer. `deliver` and `finish` for a device are called from that device's thread only. */
struct consumer_entry {
  consumer_entry(std::uint64_t fingerprint_, std::string name_) : fingerprint(fingerprint_), name(std::move(name_)) {}
  virtual ~consumer_entry() = default;
  /** Decodes and hands over one record; throws what the consumer threw. */
  virtual delivery deliver(std::size_t device_index, const device& dev, const std::byte* payload, std::size_t size) = 0;
  /** The device's stream ended. */
  virtual void finish(std::size_t device_index, const device& dev) = 0;

  const std::uint64_t fingerprint;
  const std::string name;
};

template <class T, class Fn>
concept coroutine_factory = std::invocable<Fn&, inbox<T>> && std::same_as<std::invoke_result_t<Fn&, inbox<T>>, consumer<T>>;

template <class T, class Fn>
concept value_callable = std::invocable<Fn&, const T&> || std::invocable<Fn&, const T&, const device&>;

/** A coroutine per device, or a single instance shared by all devices. It keeps the factory
 *  alive: a capturing lambda that is itself the coroutine refers to its captures through it. */
template <class T, class Fn>
class coroutine_entry final : public consumer_entry {
public:
  coroutine_entry(std::string name_, Fn factory, std::size_t instances, std::size_t devices)
      : consumer_entry(type_fingerprint_v<T>, std::move(name_)), factory_(std::move(factory)),
        shared_(instances == 1 && devices > 1), devices_left_(devices) {
    for (std::size_t i = 0; i < instances; ++i) {
      auto l = std::make_unique<instance>();
      l->co = factory_(inbox<T>(&l->box));
      instances_.push_back(std::move(l));
    }
  }

  delivery deliver(std::size_t device_index, const device& dev, const std::byte* payload, std::size_t size) override {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (shared_) lock.lock();
    instance& l = *instances_[shared_ ? 0 : device_index];
    if (l.failed) return delivery::failed_before;
    if (l.co.done()) return delivery::returned_before;
    if constexpr (copied_on_resume_v<T>) {
      if (size != sizeof(T)) return delivery::mismatch;
      l.box.value = payload;  // the coroutine copies it out as it resumes (see inbox::next)
    } else if (!decode(payload, size, l.box.value.emplace())) {
      l.box.value.reset();
      return delivery::mismatch;
    }
    l.box.source = &dev;
    l.box.pending = true;
    resume(l);
    return delivery::delivered;
  }

  void finish(std::size_t device_index, const device& dev) override {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (shared_) {
      lock.lock();
      if (--devices_left_ != 0) return;  // a shared consumer ends with the last stream
    }
    instance& l = *instances_[shared_ ? 0 : device_index];
    if (l.failed || l.co.done()) return;
    l.box.value = {};
    l.box.source = &dev;
    l.box.pending = true;
    resume(l);
  }

private:
  struct instance {
    mailbox<T> box;
    consumer<T> co;
    bool failed = false;
  };
  static void resume(instance& l) {
    try {
      l.co.resume();
    } catch (...) {
      l.failed = true;
      throw;
    }
  }

  Fn factory_;
  const bool shared_;
  std::size_t devices_left_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<instance>> instances_;  // destroyed (frames first) before factory_
};

/** A plain callable: `fn(value)` or `fn(value, device)` per record. */
template <class T, class Fn>
class callable_entry final : public consumer_entry {
public:
  callable_entry(std::string name_, Fn fn, bool shared, std::size_t devices)
      : consumer_entry(type_fingerprint_v<T>, std::move(name_)), fn_(std::move(fn)),
        shared_(shared && devices > 1), failed_(devices, 0) {}

  delivery deliver(std::size_t device_index, const device& dev, const std::byte* payload, std::size_t size) override {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (shared_) lock.lock();
    char& failed = failed_[shared_ ? 0 : device_index];
    if (failed) return delivery::failed_before;
    const std::optional<T> value = decode_value<T>(payload, size);
    if (!value) return delivery::mismatch;
    try {
      if constexpr (std::invocable<Fn&, const T&, const device&>)
        fn_(*value, dev);
      else
        fn_(*value);
    } catch (...) {
      failed = 1;  // every later record for it is counted, not delivered
      throw;
    }
    return delivery::delivered;
  }
  void finish(std::size_t, const device&) override {}

private:
  Fn fn_;
  const bool shared_;
  std::mutex mutex_;
  std::vector<char> failed_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
