#pragma once
/** `receiver`: the RAII scope that drains devices' rings into attached consumers.
 *
 * One std::jthread per device reads that device's ring in place and drives its consumers in
 * emission order; `close()` ends every stream after the work already submitted, `flush()` waits
 * for what was committed, and nothing goes unreported (see docs/outfeed.md). */
#include <devtap/backend/default.hpp>
#include <devtap/backend/device.hpp>
#include <devtap/detail/text.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/receiver/call_entry.hpp>
#include <devtap/receiver/consumer.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/receiver/merged_entry.hpp>
#include <devtap/receiver/open_receivers.hpp>
#include <devtap/receiver/options.hpp>
#include <devtap/receiver/reader.hpp>
#include <devtap/receiver/recording.hpp>
#include <devtap/receiver/report.hpp>
#include <devtap/receiver/stats.hpp>
#include <devtap/receiver/trace_writer.hpp>
#include <devtap/ring/close.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/scope.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
struct receiver_access;
/** Where a wait for the streams would wait for itself: a device's own work (close, barrier, or the
 *  destructor waits behind it) or a reader thread (a consumer calling in). Null when neither. */
const char* inside(const receiver_state& state, bool devices_too = true);
void refuse_inside(const receiver_state& state, const char* call, bool devices_too);
/** receiver::close() on the state alone: the receiver may be destroyed meanwhile (a consumer). */
void close_receiver(std::shared_ptr<receiver_state> keep);
/** Where close() would wait for this thread: no consumer is called again, every stream is given up
 *  and its ring retired, not drained. The caller has claimed `closed`. */
void abandon_receiver(const std::shared_ptr<receiver_state>& state);
/** Off the list of open receivers: the exit handler leaves it alone. */
void forget(const receiver_state& state) noexcept;
/** forget() of a receiver closed already, once a close still running on another thread (a
 *  client's destructor, the exit handler) has ended: until then it drains, calling consumers. */
void forget_closed(const receiver_state& state);
}  // namespace detail

/** Drains the rings of a set of devices into consumers attached with `attach`. At most one per device. */
class receiver {
public:
  /** Starts one reader thread per device. Throws std::invalid_argument for bad options, outfeed_error
   *  when a device already has a receiver. */
  explicit receiver(receiver_options options = {});

  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  /** Closes if `close()` was not called; never throws: logs what close() would have thrown. */
  ~receiver();

  /** Registers a consumer of `T` values and returns the tap point that reaches it.
   *  `fn` is a coroutine `consumer<T>(inbox<T>)` (one instance per device) or a callable taking
   *  `const T&` (and optionally `const device&`). */
  template <class T, class Fn>
  tap_point<T> attach(Fn fn, std::string name = {}) {
    return attach_impl<T>(std::move(fn), false, std::move(name));
  }
  /** As above, with one instance shared by all devices (fed one record at a time). */
  template <class T, class Fn>
  tap_point<T> attach(Fn fn, shared_t, std::string name = {}) {
    return attach_impl<T>(std::move(fn), true, std::move(name));
  }
  /** As above, one instance fed by every device in the order the records were tapped (ties: by
   *  device, then sequence). Needs receiver_options::timestamps (std::logic_error without). A record
   *  waits until every other device has shown a later one, ended, or been quiet for merge_lag. */
  template <class T, class Fn>
  tap_point<T> attach(Fn fn, merged_t, std::string name = {}) {
    if (!state_->options.timestamps)
      throw std::logic_error("devtap: attach(fn, devtap::merged) on receiver '" + state_->name +
                             "' needs receiver_options::timestamps = true (records are merged by the time they were tapped)");
    return attach_impl<T>(std::move(fn), true, std::move(name), true);
  }

  /** Serves calls: device code asks with `ctx.call(point, request)` (cpu) or `out.call(point,
   *  request)` (CUDA, host threads) and gets `fn`'s answer. `fn` takes `const Req&` (optionally
   *  followed by `const tap_info&` — with timestamps, when and as which number the call was made — or
   *  `const device&`) and returns a Rep; it runs on the device's reader thread, after every record
   *  the caller made before the call. Calls from different devices may run at once. */
  template <class Req, class Rep, class Fn>
  call_point<Req, Rep> serve(Fn fn, std::string name = {}) {
    return serve_impl<Req, Rep>(std::move(fn), false, std::move(name));
  }
  /** As above, with calls from every device run one at a time. */
  template <class Req, class Rep, class Fn>
  call_point<Req, Rep> serve(Fn fn, shared_t, std::string name = {}) {
    return serve_impl<Req, Rep>(std::move(fn), true, std::move(name));
  }

  /** The producer handle of `dev` (host threads tap through it; CUDA kernels take it as an argument). */
  devtap::outfeed outfeed(const device& dev) const { return stream_of(dev).out; }

  /** The devices this receiver drains, in the order of receiver_options::devices. */
  std::vector<device*> devices() const;

  /** Returns once everything committed before the call has been consumed, and written to the trace
   *  file and the recording if the receiver has them. Launches no device work. Throws timeout_error
   *  after close_timeout, naming the devices still behind. */
  void flush();

  /** Returns once the work submitted to every device before the call has finished and every record
   *  that work tapped has been consumed (the reference runtime's barrier_wait). cpu: behind each
   *  executor's queue; CUDA: after the device's pending work, on a helper thread. Bounded by
   *  close_timeout (timeout_error naming the devices still busy or behind). */
  void barrier();

  /** Ends every stream after the work already submitted, waits for the consumers, joins the threads.
   *  Throws timeout_error (devices that did not finish) or tap_error (every consumer failure). */
  void close();

  /** Counters per device (safe to call at any time). */
  receiver_stats stats() const;

  /** Names a kernel's scope id (out.scope_begin(id)) in the trace file and the recording. */
  void name_scope(std::uint32_t id, std::string_view name);

  /** The name given in the options (or "receiver"). */
  const std::string& name() const noexcept { return state_->name; }

private:
  template <class T, class Fn>
  tap_point<T> attach_impl(Fn fn, bool one_instance, std::string name, bool merge = false,
                           detail::point_kind kind = detail::point_kind::tap) {
    static_assert(detail::check_consumer<T, Fn>());  // one message at the user's line: what T or Fn lacks
    // Only `state` from here: a coroutine factory is user code, which may close or even destroy this
    // receiver; it runs before the table's lock is taken, so it may also attach.
    const std::shared_ptr<detail::receiver_state> state = state_;
    const auto closed = [&] { return std::logic_error("devtap: attach() on receiver '" + state->name + "' after close()"); };
    if (state->closed.load(std::memory_order_acquire)) throw closed();
    const std::size_t devices = state->streams.size();
    std::vector<const device*> by_index;  // the devices in their stream's order
    for (const auto& stream : state->streams) by_index.push_back(stream->dev);
    std::shared_ptr<detail::consumer_entry> entry;
    if constexpr (detail::coroutine_factory<T, Fn>)
      entry = std::make_shared<detail::coroutine_entry<T, Fn>>(std::move(name), std::move(fn), one_instance, by_index);
    else
      entry = std::make_shared<detail::callable_entry<T, Fn>>(std::move(name), std::move(fn), one_instance, devices);
    std::unique_lock lock(state->table_mutex);
    // Again under the lock, which close() sets `closed` under (close_once): past this check, the
    // entry is in the table before any end of stream is written, so its readers end it.
    if (state->closed.load(std::memory_order_acquire)) throw closed();
    const auto id = static_cast<std::uint32_t>(state->entries.size() + 1);
    if (entry->name.empty()) entry->name = "consumer#" + std::to_string(id);
    entry->kind = std::is_same_v<T, scope_event> ? detail::point_kind::scope : kind;  // scope: also fed every scope
    if (merge) {
      // A raw pointer: the state owns the entry, so it outlives every call of these (and the helper
      // thread must never hold the state: it could end up its last owner).
      detail::receiver_state* s = state.get();
      const bool scope = entry->kind == detail::point_kind::scope;
      detail::merged_entry::outcome_sink sink{
          [s, scope](std::size_t device, std::uint64_t records, std::uint64_t bytes) {
            if (scope) return;  // a scope record's reader counts it (hand_over)
            s->streams[device]->records.fetch_add(records, std::memory_order_relaxed);
            s->streams[device]->bytes.fetch_add(bytes, std::memory_order_relaxed);
          },
          [s, scope, consumer = entry->name](std::size_t device, std::exception_ptr e, bool at_end, std::uint64_t at_ns) {
            if (!at_end && !scope) s->streams[device]->consumer_errors.fetch_add(1, std::memory_order_relaxed);
            s->record_failure(*s->streams[device], consumer, std::move(e), at_ns);  // (reported, scope or not)
          },
          [s, scope](std::size_t device, detail::delivery result) {
            if (scope) return;  // counted once, by its reader
            auto& stream = *s->streams[device];
            (result == detail::delivery::returned_before ? stream.ignored
             : result == detail::delivery::mismatch      ? stream.mismatches  // (accepts() took it: not expected)
                                                         : stream.consumer_errors)
                .fetch_add(1, std::memory_order_relaxed);
          },
          [s, scope](std::size_t device, std::uint64_t records) {
            if (scope) return;  // counted by its reader, as delivered
            s->streams[device]->lost_at_close.fetch_add(records, std::memory_order_relaxed);
            s->mark(*s->streams[device], detail::marker_kind::lost, records, "records a merged consumer held when close() gave up");
          }};
      const detail::point_kind kind = entry->kind;
      // What a device's held records may take: its ring's size, at least 1 MiB (docs/timeline.md).
      const std::size_t hold_limit = std::max<std::size_t>(
          detail::ring_capacity_of(state->options.budget_bytes, state->streams.size(), state->name), std::size_t{1} << 20);
      const detail::merge_limits limits{hold_limit, state->merges_holding};
      entry = std::make_shared<detail::merged_entry>(std::move(entry), by_index, state->options.merge_lag, limits,
                                                     std::move(sink), state->id);
      entry->kind = kind;
    }
    const detail::point_description point{id, entry->kind, entry->fingerprint, entry->name};
    state->entries.push_back(std::move(entry));
    state->table_version.fetch_add(1, std::memory_order_release);
    lock.unlock();
    define_in_sinks(*state, point);
    return tap_point<T>{id, type_fingerprint_v<T>, state->id};
  }
  // Outside the table's lock, which close() takes: a record file's write into a pipe nobody reads
  // may block. No record of the point exists before attach() or serve() returns it.
  static void define_in_sinks(detail::receiver_state& state, const detail::point_description& point) {
    for (auto& sink : state.sinks) sink->define(point);
  }

  template <class Req, class Rep, class Fn>
  call_point<Req, Rep> serve_impl(Fn fn, bool one_at_a_time, std::string name) {
    static_assert(detail::check_handler<Req, Rep, Fn>());  // one message at the user's line
    if (state_->closed.load(std::memory_order_acquire)) throw std::logic_error("devtap: serve() on receiver '" + state_->name + "' after close()");
    std::vector<detail::ring_view> rings;
    for (const auto& stream : state_->streams) rings.push_back(stream->ring->host);
    std::unique_lock lock(state_->table_mutex);
    if (state_->closed.load(std::memory_order_acquire))  // again, as in attach_impl
      throw std::logic_error("devtap: serve() on receiver '" + state_->name + "' after close()");
    const auto id = static_cast<std::uint32_t>(state_->entries.size() + 1);
    if (name.empty()) name = "handler#" + std::to_string(id);
    const detail::point_description point{id | detail::call_id_flag, detail::point_kind::call, call_fingerprint_v<Req, Rep>, name};
    state_->entries.push_back(
        std::make_shared<detail::call_entry<Req, Rep, Fn>>(std::move(name), std::move(fn), one_at_a_time, std::move(rings)));
    state_->table_version.fetch_add(1, std::memory_order_release);
    lock.unlock();
    define_in_sinks(*state_, point);
    return call_point<Req, Rep>{id | detail::call_id_flag, call_fingerprint_v<Req, Rep>, state_->id};
  }

  const char* inside(bool devices_too = true) const { return detail::inside(*state_, devices_too); }
  void refuse_inside(const char* call, bool devices_too) const { detail::refuse_inside(*state_, call, devices_too); }

  void flush_until(std::chrono::steady_clock::time_point deadline, const char* call);

  detail::device_stream& stream_of(const device& dev) const;

  friend struct detail::receiver_access;

  std::shared_ptr<detail::receiver_state> state_;
};

namespace detail {
/** What devtap's own consumers (the printer) need of a receiver beyond its public face. */
struct receiver_access {
  /** Attaches a printer's consumer: the trace draws its lines (line_sink), not its records. */
  template <class T, class Fn>
  static tap_point<T> attach_printer(receiver& rx, Fn fn, std::string name) {
    return rx.attach_impl<T>(std::move(fn), false, std::move(name), false, point_kind::print);
  }
  /** Hands a printed line to the trace file (if any): `dev` is one of the receiver's devices. */
  static std::function<void(const device&, std::uint64_t, std::string_view)> line_sink(receiver& rx) {
    if (rx.state_->sinks.empty()) return {};
    receiver_state* s = rx.state_.get();  // the printer's consumer is the state's: it never outlives it
    return [s](const device& dev, std::uint64_t time_ns, std::string_view text) {
      for (const auto& stream : s->streams)
        if (stream->dev == &dev)
          for (auto& sink : s->sinks)
            sink->line(stream->index, time_ns, text, ring_read_here == stream->ring->host.consumer);
    };
  }
};
}  // namespace detail

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/receiver/receiver_impl.hpp>
#endif
