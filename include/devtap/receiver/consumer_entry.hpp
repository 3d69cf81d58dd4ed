#pragma once
/** How the receiver holds attached consumers without knowing their types (internal). */
#include <devtap/backend/device.hpp>
#include <devtap/tap/json_value.hpp>
#include <devtap/receiver/record_sink.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/receiver/consumer.hpp>
#include <devtap/receiver/consumer_check.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/tap_info.hpp>

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
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

/** Tag for `receiver::attach`: one consumer instance fed by every device in timestamp order. */
struct merged_t {
  explicit constexpr merged_t() = default;
};
/** Pass to `receiver::attach` to feed one consumer instance every device's records in the order
 *  they were tapped (needs receiver_options::timestamps; docs/timeline.md). */
inline constexpr merged_t merged{};

namespace detail {

// What became of a record handed to a consumer. `held`: taken by an entry that delivers it later
// and counts the outcome itself (a merged consumer), so the reader counts nothing. `given_up`:
// close() gave up on the device while the reader waited for a shared consumer's lock.
enum class delivery { delivered, mismatch, failed_before, returned_before, held, given_up };

/** The `abandoned` flag of the stream this thread reads (set by its reader), or null. */
inline thread_local const std::atomic<bool>* stream_given_up_here = nullptr;

/** Gives the thread_local `var` the value `value` for a scope, and its old value back on every way
 *  out (e.g. a merged consumer's delivery, which is for any device: no stream's flag there). */
template <class T>
struct thread_mark {
  thread_mark(T& var, std::type_identity_t<T> value) : var_(var), was_(std::exchange(var, value)) {}
  thread_mark(const thread_mark&) = delete;  // (and no assignment: it holds a reference)
  ~thread_mark() { var_ = was_; }
  T& var_;
  T was_;
};

/** Whether close() gave up on the stream this thread reads (never on other threads). */
inline bool given_up_here() noexcept {
  return stream_given_up_here != nullptr && stream_given_up_here->load(std::memory_order_acquire);
}

/** Takes a shared consumer's lock; false if close() gave up on this reader's device while another
 *  device's call held it (the reader looked before; once close() has thrown, no consumer is called). */
inline bool lock_shared(std::unique_lock<std::mutex>& lock) {
  lock.lock();
  return !given_up_here();
}


/** A whole value from a record's payload; nullopt when the payload does not match T. */
template <class T>
std::optional<T> decode_value(const std::byte* payload, std::size_t size) {
  if constexpr (copied_on_resume_v<T> && !has_bools_v<T>) {
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
  consumer_entry(std::uint64_t fingerprint_, std::string name_, bool answers_calls_ = false)
      : fingerprint(fingerprint_), name(std::move(name_)), answers_calls(answers_calls_) {}
  virtual ~consumer_entry() = default;
  /** Decodes and hands over one record; throws what the consumer threw. */
  virtual delivery deliver(std::size_t device_index, const device& dev, const record_stamp& stamp,
                           const std::byte* payload, std::size_t size) = 0;
  /** The device's stream ended. */
  virtual void finish(std::size_t device_index, const device& dev) = 0;
  /** close() is done with the devices: a consumer that holds records back delivers them now. */
  virtual void close_held() {}
  /** The receiver was destroyed from a consumer: what is held back is never delivered. */
  virtual void abandon_held() {}
  /** A merged consumer's flag "a call into the consumer runs", owned by its helper thread too
   *  (which close() may leave running, still using its device); none for other consumers. */
  virtual std::weak_ptr<const std::atomic<bool>> call_running_flag() const noexcept { return {}; }
  /** The first of the reader's two steps below: records it set aside for this consumer become
   *  visible to it, without waiting for a call into it (which another consumer's step may wait for). */
  virtual void post_staged(std::size_t device_index) { (void)device_index; }
  /** The device's reader caught up, or is about to call a consumer that may take long, or stops:
   *  records it set aside for this consumer go on now (`lost`: its stream was given up on, they are
   *  counted as lost_at_close instead). */
  virtual void pass_on_staged(std::size_t device_index, bool lost) { (void)device_index, (void)lost; }
  /** The reader, with nothing set aside, every 64 records and when its ring is empty: it waits here
   *  while the consumer holds too much of the device's records (back-pressure), until `until`; the
   *  first consumer that waits sets it (a default time_point: not yet set). */
  virtual void wait_for_room(std::size_t device_index, std::chrono::steady_clock::time_point& until) {
    (void)device_index, (void)until;
  }
  /** Whether this consumer sets records aside until pass_on_staged (the reader calls it only then). */
  bool stages_records = false;
  /** Whether a payload decodes as this consumer's type (checked before a merged consumer keeps it). */
  virtual bool accepts(const std::byte* payload, std::size_t size) const {
    (void)payload, (void)size;
    return true;
  }
  /** Appends the value as a JSON object, for the trace file's event arguments: its fields where it
   *  decodes as this consumer's type, else its size. */
  virtual void describe(const std::byte* payload, std::size_t size, std::string& out) const {
    (void)payload;
    out += "{\"bytes\":";
    append_json_number(out, size);
    out += '}';
  }

  const std::uint64_t fingerprint;
  std::string name;  // set by attach() before the entry is published (the default names its id)
  const bool answers_calls;  // a call handler (receiver::serve): its records are calls, answered in their slot
  // Set by attach() before the entry is published: what the trace and recording call its records.
  point_kind kind = point_kind::tap;
};

/** describe() for a consumer of T: the decoded value's fields, or the size of what does not decode. */
template <class T>
void describe_as(const std::byte* payload, std::size_t size, std::string& out) {
  if constexpr (receivable<T>) {
    if (const std::optional<T> value = decode_value<T>(payload, size)) {
      append_json_args(out, *value);
      return;
    }
  }
  out += "{\"bytes\":";
  append_json_number(out, size);
  out += ",\"undecodable\":true}";
}

/** A coroutine per device, or a single instance shared by all devices. It keeps the factory
 *  alive: a capturing lambda that is itself the coroutine refers to its captures through it. */
template <class T, class Fn>
class coroutine_entry final : public consumer_entry {
  static_assert(check_consumer<T, Fn>());  // also where receiver::attach does not ask first

public:
  /** One instance per device of `devices` (their order is the device index), or a single one. */
  coroutine_entry(std::string name_, Fn factory, bool one_instance, const std::vector<const device*>& devices)
      : consumer_entry(type_fingerprint_v<T>, std::move(name_)), factory_(std::move(factory)),
        shared_(one_instance && devices.size() > 1), devices_left_(devices.size()) {
    for (std::size_t i = 0; i < (one_instance ? 1 : devices.size()); ++i) {
      auto l = std::make_unique<instance>();
      // A factory may ask its inbox for the device at once; a shared one has none before a value.
      l->box.source = shared_ || devices.empty() ? nullptr : devices[i];
      // The instance's own inbox, not a temporary: a coroutine may take it by reference (`inbox<T>&&`),
      // and its frame then refers to it for as long as it runs.
      l->co = factory_(std::move(l->in));
      instances_.push_back(std::move(l));
    }
  }

  delivery deliver(std::size_t device_index, const device& dev, const record_stamp& stamp, const std::byte* payload,
                   std::size_t size) override {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (shared_ && !lock_shared(lock)) return delivery::given_up;
    instance& l = *instances_[shared_ ? 0 : device_index];
    if (l.failed) return delivery::failed_before;
    if (l.co.done()) return delivery::returned_before;
    if constexpr (!receivable<T>) {
      return delivery::mismatch;  // rejected by check_consumer: no second error from inside <optional>
    } else if constexpr (copied_on_resume_v<T>) {
      if (size != sizeof(T) || (has_bools_v<T> && !bools_valid(load_raw<T>(payload)))) return delivery::mismatch;
      l.box.value = payload;  // the coroutine copies it out as it resumes (see inbox::next)
    } else if (!decode(payload, size, l.box.value.emplace())) {
      l.box.value.reset();
      return delivery::mismatch;
    }
    l.box.source = &dev;
    l.box.stamp = stamp;
    l.box.pending = true;
    resume(l);
    if (!l.box.pending) return delivery::delivered;
    l.box.pending = false;  // it returned without `co_await in.next()`: the value never reached it
    l.box.value = {};
    return delivery::returned_before;
  }

  bool accepts(const std::byte* payload, std::size_t size) const override {
    if constexpr (!receivable<T>) return false;
    else if constexpr (copied_on_resume_v<T>) return size == sizeof(T) && (!has_bools_v<T> || bools_valid(load_raw<T>(payload)));
    else return decode_value<T>(payload, size).has_value();
  }
  void describe(const std::byte* payload, std::size_t size, std::string& out) const override {
    describe_as<T>(payload, size, out);
  }

  void finish(std::size_t device_index, const device& dev) override {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (shared_) {
      if (!lock_shared(lock)) return;     // given up on: no end of stream either
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
    inbox<T> in{&box};  // before `co`: its frame may refer to it until destroyed
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

/** A plain callable: `fn(value)` or `fn(value, device)` per record. One instance, called by each
 *  device's reader: concurrently across devices unless shared (a lock), as the reference calls its
 *  tap function. Not copied per device: what it captures by reference would still be shared, and
 *  some callables that claim to be copyable (holding a vector of unique_ptr) cannot be copied. */
template <class T, class Fn>
class callable_entry final : public consumer_entry {
  static_assert(check_consumer<T, Fn>());  // also where receiver::attach does not ask first

public:
  callable_entry(std::string name_, Fn fn, bool shared, std::size_t devices)
      : consumer_entry(type_fingerprint_v<T>, std::move(name_)), fn_(std::move(fn)), locked_(shared && devices > 1) {}

  // A callable that threw keeps receiving later records (as the reference keeps calling its tap
  // function): one bad value must not silence the rest of a stream. The reader keeps what it threw.
  delivery deliver(std::size_t, const device& dev, const record_stamp& stamp, const std::byte* payload,
                   std::size_t size) override {
    std::unique_lock lock(mutex_, std::defer_lock);
    if (locked_ && !lock_shared(lock)) return delivery::given_up;
    if constexpr (!receivable<T>) {
      return delivery::mismatch;  // rejected by check_consumer: no second error from inside <optional>
    } else {
      const std::optional<T> value = decode_value<T>(payload, size);
      if (!value) return delivery::mismatch;
      if constexpr (std::invocable<Fn&, const T&, const tap_info&> && !std::invocable<Fn&, const T&, const device&>)
        std::invoke(fn_, *value, info_of(dev, stamp));  // (std::invoke: a member pointer is a callable too)
      else if constexpr (std::invocable<Fn&, const T&, const device&>)
        std::invoke(fn_, *value, dev);
      else if constexpr (std::invocable<Fn&, const T&>)
        std::invoke(fn_, *value);  // else rejected by check_consumer, which already said why
      return delivery::delivered;
    }
  }
  void finish(std::size_t, const device&) override {}

  bool accepts(const std::byte* payload, std::size_t size) const override {
    if constexpr (!receivable<T>) return false;
    else return decode_value<T>(payload, size).has_value();
  }
  void describe(const std::byte* payload, std::size_t size, std::string& out) const override {
    describe_as<T>(payload, size, out);
  }

private:
  Fn fn_;
  const bool locked_;
  std::mutex mutex_;
};

}  // namespace detail
DEVTAP_END_NAMESPACE
