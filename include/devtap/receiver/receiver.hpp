#pragma once
/** `receiver`: the RAII scope that drains devices' rings into attached consumers.
 *
 * One std::jthread per device reads that device's ring in place and drives its consumers in
 * emission order; `close()` ends every stream after the work already submitted, `flush()` waits
 * for what was committed, and nothing goes unreported (see docs/outfeed.md). */
#include <devtap/backend/default.hpp>
#include <devtap/backend/device.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/receiver/consumer.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/ring/read.hpp>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** How a receiver is set up. Give `devices` or `backends`, not both; neither means every device. */
struct receiver_options {
  std::vector<device*> devices{};         ///< these devices
  std::vector<std::string> backends{};    ///< or every device of these backends
  std::size_t budget_bytes = std::size_t{256} << 20;  ///< ring memory in all, split evenly over the devices
  overflow_policy overflow = overflow_policy::block;
  std::chrono::milliseconds close_timeout = std::chrono::seconds(10);  ///< also bounds flush()
  std::string name{};                     ///< for logs and errors
};

/** Counters of one device's stream. */
struct device_stats {
  std::string device;
  std::uint64_t records = 0;          ///< delivered to a consumer
  std::uint64_t bytes = 0;            ///< payload bytes delivered
  std::uint64_t dropped_records = 0;  ///< not written: `drop` policy and a full ring
  std::uint64_t dropped_bytes = 0;
  std::uint64_t unknown_ids = 0;      ///< records for no attached consumer (skipped)
  std::uint64_t type_mismatches = 0;  ///< fingerprint or payload did not match the consumer's type (skipped)
  std::uint64_t consumer_errors = 0;  ///< records a consumer threw on, and later ones it then missed
  std::uint64_t ignored = 0;          ///< records for a consumer coroutine that had already returned
  bool stream_failed = false;         ///< a malformed record stopped this device's stream
  std::string failure;                ///< why, with the ring offset
};

/** Counters of every device of a receiver. */
struct receiver_stats {
  std::vector<device_stats> devices;
  /** All devices added up. */
  device_stats total() const {
    device_stats t;
    t.device = "total";
    for (const auto& d : devices) {
      t.records += d.records, t.bytes += d.bytes, t.dropped_records += d.dropped_records;
      t.dropped_bytes += d.dropped_bytes, t.unknown_ids += d.unknown_ids, t.type_mismatches += d.type_mismatches;
      t.consumer_errors += d.consumer_errors, t.ignored += d.ignored;
      t.stream_failed = t.stream_failed || d.stream_failed;
    }
    return t;
  }
};

namespace detail {

/** The devices a receiver drains: those given, those of the backends given, or every initialised one. */
inline std::vector<device*> resolve_receiver_devices(const receiver_options& options) {
  if (!options.devices.empty()) return options.devices;
  std::vector<device*> out;
  if (!options.backends.empty()) {
    for (const auto& name : options.backends)
      for (device* d : devtap::devices(name)) out.push_back(d);
  } else {
    for (client* c : devtap::backends())
      for (device* d : c->local_devices()) out.push_back(d);
  }
  return out;
}

struct receiver_core;

/** One device's ring, reader thread and counters. */
struct channel {
  device* dev = nullptr;
  std::size_t lane = 0;
  std::string device_name;
  std::unique_ptr<ring_allocation> ring;
  // Producers read `out` on every tap; the reader writes the counters on every record: apart,
  // or each record costs a cache-line transfer (measured: 2x at 16 B).
  alignas(64) devtap::outfeed out;
  alignas(64) std::atomic<std::uint64_t> records{0}, bytes{0}, unknown_ids{0}, mismatches{0}, consumer_errors{0},
      ignored{0};
  std::atomic<std::uint64_t> consumed{0};  // reader position after released records: flush() waits on it
  std::atomic<bool> device_done{false};    // producers that cannot write an end marker (CUDA) are done
  std::atomic<bool> finished{false};
  std::string failure;                     // written before `finished`
  std::jthread thread;
};

struct receiver_core {
  std::string name;
  receiver_options options;
  std::vector<std::unique_ptr<channel>> channels;

  std::mutex table_mutex;
  std::vector<std::shared_ptr<consumer_entry>> entries;  // index = id - 1
  std::atomic<std::uint32_t> table_version{0};

  std::mutex failures_mutex;
  std::vector<consumer_failure> failures;

  std::mutex done_mutex;
  std::condition_variable done_cv;

  void record_failure(const channel& ch, std::string consumer_name, std::exception_ptr error) {
    std::string message = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    log(log_level::error, "receiver '{}': consumer '{}' on {} threw: {} (postponed to close())", name, consumer_name,
        ch.device_name, message);
    std::lock_guard lock(failures_mutex);
    failures.push_back({ch.device_name, std::move(consumer_name), std::move(message), std::move(error)});
  }

  void mark_finished(channel& ch) {
    {
      std::lock_guard lock(done_mutex);
      ch.finished.store(true, std::memory_order_release);
    }
    done_cv.notify_all();
  }
};

/** Adds to a counter that only this reader thread writes: a plain add, not a locked one. */
inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

inline void ring_doorbell(const ring_view& ring) noexcept {
  std::atomic_ref<std::uint32_t> bell(ring.consumer->doorbell);
  bell.fetch_add(1, std::memory_order_seq_cst);
  bell.notify_all();
}

/** Marks the ring closed (1: no new taps; 2: the reader is gone too) and wakes blocked producers. */
inline void close_ring(const ring_view& ring, std::uint32_t how) noexcept {
  std::atomic_ref<std::uint32_t>(ring.consumer->closed).store(how, std::memory_order_seq_cst);
  ring_reader::wake_producers(ring);
}

/** The cpu end of a stream: written by the device's executor after the work queued before close(). */
inline void write_end_marker(channel& ch) {
  const ring_view& ring = ch.ring->host;
  std::atomic_ref<std::uint32_t> closed(ring.consumer->closed);
  closed.store(1, std::memory_order_seq_cst);  // before the claim: later claims see it and abort
  std::uint64_t pos;
  if (!claim_waiting(ring, record_bytes(0), pos, 2)) return;  // the reader gave up (close timed out)
  commit<host_atomics>(ring, pos, end_of_stream_id, 0, 0);
}

/** Records a reader delivers between two updates of its channel's counters and position. */
inline constexpr std::uint64_t progress_every = 64;

/** The reader loop of one device: runs on its jthread until the end marker, a malformed record, or stop. */
inline void drain(std::stop_token stop, receiver_core& core, channel& ch) {
  ring_reader reader(ch.ring->host);
  std::vector<std::shared_ptr<consumer_entry>> table;
  std::uint32_t table_version = ~0u;
  std::unordered_set<std::uint32_t> reported;  // ids already logged as unknown or mismatched
  const bool can_sleep = ch.ring->producers_wake_reader;
  std::stop_callback wake_on_stop(stop, [&ch] { ring_doorbell(ch.ring->host); });

  auto refresh = [&] {
    const std::uint32_t v = core.table_version.load(std::memory_order_acquire);
    if (v == table_version) return false;
    std::lock_guard lock(core.table_mutex);
    table = core.entries;
    table_version = core.table_version.load(std::memory_order_relaxed);
    return true;
  };
  auto lookup = [&](std::uint32_t id) -> consumer_entry* {
    if (id - 1 < table.size() || (refresh() && id - 1 < table.size())) return table[id - 1].get();
    return nullptr;
  };
  auto end_stream = [&] {
    refresh();
    for (auto& entry : table) {
      try {
        entry->finish(ch.lane, *ch.dev);
      } catch (...) {
        core.record_failure(ch, entry->name, std::current_exception());
      }
    }
    ch.consumed.store(reader.position(), std::memory_order_release);
    log(log_level::debug, "receiver '{}': stream of {} ended", core.name, ch.device_name);
    core.mark_finished(ch);
  };
  // Progress is published every `progress_every` records and whenever the ring runs dry, not per
  // record: stats() and flush() see it soon enough, and the hot loop stays free of shared stores.
  std::uint64_t delivered_records = 0, delivered_bytes = 0, published_position = reader.position();
  auto publish_counts = [&] {
    if (delivered_records == 0) return;
    bump(ch.records, delivered_records);
    bump(ch.bytes, delivered_bytes);
    delivered_records = delivered_bytes = 0;
  };
  auto publish_progress = [&] {  // an idle reader calls this on every poll: it writes only news
    publish_counts();
    if (reader.position() == published_position) return;
    published_position = reader.position();
    ch.consumed.store(published_position, std::memory_order_release);
  };
  auto dispatch = [&](const record_ref& rec) {
    const std::uint32_t id = rec.header->consumer_id;
    consumer_entry* entry = lookup(id);
    if (entry == nullptr) {
      bump(ch.unknown_ids, 1);
      if (reported.insert(id).second)
        log(log_level::error, "receiver '{}': record for unknown consumer id {} on {} (skipped; logged once)",
            core.name, id, ch.device_name);
      return;
    }
    delivery result = delivery::mismatch;
    if (rec.header->fingerprint == entry->fingerprint) {
      try {
        result = entry->deliver(ch.lane, *ch.dev, rec.payload, rec.payload_bytes);
      } catch (...) {
        bump(ch.consumer_errors, 1);
        core.record_failure(ch, entry->name, std::current_exception());
        return;
      }
    }
    switch (result) {
      case delivery::delivered:
        ++delivered_records;
        delivered_bytes += rec.payload_bytes;
        break;
      case delivery::mismatch:
        bump(ch.mismatches, 1);
        if (reported.insert(id).second)
          log(log_level::error,
              "receiver '{}': record for consumer '{}' on {} does not match its type (fingerprint {} expected {}, "
              "{} payload bytes; skipped; logged once)",
              core.name, entry->name, ch.device_name, rec.header->fingerprint, entry->fingerprint, rec.payload_bytes);
        break;
      case delivery::failed_before:
        bump(ch.consumer_errors, 1);
        break;
      case delivery::returned_before:
        bump(ch.ignored, 1);
        break;
    }
  };

  unsigned idle = 0;
  auto idle_since = std::chrono::steady_clock::now();
  std::uint64_t since_progress = 0;
  for (;;) {
    const record_ref rec = reader.peek();
    switch (rec.kind) {
      case record_kind::data:
        idle = 0;
        if (rec.header->consumer_id == end_of_stream_id) {
          reader.release(rec);
          reader.publish();
          publish_counts();
          end_stream();  // publishes the position once the consumers have seen the end
          return;
        }
        dispatch(rec);
        reader.release(rec);
        if (++since_progress % progress_every == 0) publish_progress();
        continue;
      case record_kind::skip:
        reader.release(rec);
        continue;
      case record_kind::malformed: {
        ch.failure = "malformed record on device '" + ch.device_name + "' at ring offset " +
                     std::to_string(reader.offset()) + " (length word " + std::to_string(rec.header->length) +
                     "): its stream was stopped";
        log(log_level::error, "receiver '{}': {}", core.name, ch.failure);
        close_ring(ch.ring->host, 2);  // blocked producers must not wait for a reader that has stopped
        publish_progress();
        core.mark_finished(ch);
        return;
      }
      case record_kind::empty:
        break;
    }
    reader.publish();
    publish_progress();
    if (ch.device_done.load(std::memory_order_acquire)) {
      if (reader.peek(std::memory_order_seq_cst).kind == record_kind::empty) {
        end_stream();
        return;
      }
      continue;
    }
    if (stop.stop_requested()) return;  // abandoned at a close() timeout
    // Idle: spin (with pause) for ~20 µs so a trickle of records is picked up at once, then yield,
    // then sleep; the spin costs CPU only while records keep coming.
    if (idle++ == 0) idle_since = std::chrono::steady_clock::now();
    if (idle % 32 != 0) {  // the clock is read on every 32nd empty poll only
      cpu_relax();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - idle_since;
    if (waited < std::chrono::microseconds(20)) {
      cpu_relax();
      continue;
    }
    if (waited < std::chrono::microseconds(200)) {
      std::this_thread::yield();
      continue;
    }
    if (!can_sleep) {  // CUDA producers cannot wake us: poll, at most every 250 µs
      std::this_thread::sleep_for(std::chrono::microseconds(waited < std::chrono::milliseconds(2) ? 20 : 250));
      continue;
    }
    // Sleep on the doorbell. Set the flag, then look at the tail: a claim this misses is ordered
    // after the flag, so its commit sees the flag and rings (try_claim/commit, Dekker-style).
    std::atomic_ref<std::uint32_t> bell(ch.ring->host.consumer->doorbell);
    std::atomic_ref<std::uint32_t> sleeping(ch.ring->host.consumer->reader_sleeping);
    const std::uint32_t seen = bell.load(std::memory_order_seq_cst);
    sleeping.store(1, std::memory_order_seq_cst);
    const bool claimed = std::atomic_ref<std::uint64_t>(ch.ring->host.producer->tail).load(std::memory_order_seq_cst) !=
                         reader.position();
    if (!claimed && !stop.stop_requested() && !ch.device_done.load(std::memory_order_seq_cst))
      bell.wait(seen, std::memory_order_seq_cst);
    sleeping.store(0, std::memory_order_relaxed);
    if (claimed) std::this_thread::yield();  // claimed, not yet committed: it will be soon
  }
}

/** What producers that cannot throw (CUDA kernels) left in the ring's sticky error word, as text. */
inline std::string sticky_error_text(const channel& ch) {
  auto* words = ch.ring->host.consumer;
  const std::uint32_t code = std::atomic_ref<std::uint32_t>(words->sticky_error).load(std::memory_order_acquire);
  const std::uint32_t detail_value = std::atomic_ref<std::uint32_t>(words->sticky_detail).load(std::memory_order_relaxed);
  std::string text;
  if (code & sticky_record_too_large)
    text += "a tap on the device refused a record of " + std::to_string(detail_value) +
            " bytes: larger than the device accepts (" +
            describe_bytes(max_record_bytes(ch.ring->host.capacity) - sizeof(record_header)) +
            "); raise receiver_options::budget_bytes";
  if (code & sticky_ring_full)
    text += std::string(text.empty() ? "" : "; ") + "taps on the device found its ring full (overflow_policy::error)";
  return text;
}

}  // namespace detail

/** Drains the rings of a set of devices into consumers attached with `attach`. At most one per device. */
class receiver {
public:
  /** Starts one reader thread per device. Throws std::invalid_argument for bad options, outfeed_error
   *  when a device already has a receiver. */
  explicit receiver(receiver_options options = {}) : core_(std::make_shared<detail::receiver_core>()) {
    if (!options.devices.empty() && !options.backends.empty())
      throw std::invalid_argument("devtap: receiver_options: give `devices` or `backends`, not both");
    core_->name = options.name.empty() ? std::string("receiver") : options.name;
    std::vector<device*> devs = detail::resolve_receiver_devices(options);
    if (devs.empty()) throw std::invalid_argument("devtap: receiver '" + core_->name + "' has no devices");
    for (std::size_t i = 0; i < devs.size(); ++i) {
      if (devs[i] == nullptr) throw std::invalid_argument("devtap: receiver_options.devices holds a null device");
      if (std::find(devs.begin(), devs.begin() + static_cast<std::ptrdiff_t>(i), devs[i]) != devs.begin() + static_cast<std::ptrdiff_t>(i))
        throw std::invalid_argument("devtap: device '" + devs[i]->name() + "' is listed twice");
    }
    const std::uint64_t share = options.budget_bytes / devs.size();
    const std::uint64_t capacity = std::bit_floor(std::min<std::uint64_t>(share, detail::max_ring_capacity));
    if (capacity < 256)
      throw std::invalid_argument("devtap: receiver '" + core_->name + "': budget_bytes " +
                                  std::to_string(options.budget_bytes) + " leaves less than 256 bytes per device");
    core_->options = std::move(options);

    for (std::size_t i = 0; i < devs.size(); ++i) {
      auto ch = std::make_unique<detail::channel>();
      ch->dev = devs[i];
      ch->lane = i;
      ch->device_name = devs[i]->name();
      ch->ring = devs[i]->allocate_ring(capacity);
      ch->out = devtap::outfeed(ch->ring->producer, core_->options.overflow, ch->device_name.c_str(),
                                     ch->ring->host_can_produce);
      core_->channels.push_back(std::move(ch));
    }
    for (std::size_t i = 0; i < core_->channels.size(); ++i) {
      detail::channel& ch = *core_->channels[i];
      if (!ch.dev->try_attach(&ch.out)) {
        for (std::size_t j = 0; j < i; ++j) core_->channels[j]->dev->detach(&core_->channels[j]->out);
        throw outfeed_error("devtap: device '" + ch.device_name +
                            "' already has a receiver attached (at most one receiver per device at once)");
      }
    }
    for (auto& ch : core_->channels)
      ch->thread = std::jthread([core = core_, c = ch.get()](std::stop_token st) { detail::drain(st, *core, *c); });
    log(log_level::debug, "receiver '{}' started on {} device(s), {} ring each, overflow policy {}", core_->name,
        core_->channels.size(), detail::describe_bytes(capacity), static_cast<int>(core_->options.overflow));
  }

  receiver(const receiver&) = delete;
  receiver& operator=(const receiver&) = delete;

  /** Closes if `close()` was not called; never throws: logs what close() would have thrown. */
  ~receiver() {
    if (closed_) return;
    try {
      close();
    } catch (const std::exception& e) {
      log(log_level::error, "receiver '{}' destroyed without close(); close() would have thrown: {}", core_->name,
          e.what());
    } catch (...) {
      log(log_level::error, "receiver '{}' destroyed without close(); close() would have thrown", core_->name);
    }
  }

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

  /** The producer handle of `dev` (host threads tap through it; CUDA kernels take it as an argument). */
  devtap::outfeed outfeed(const device& dev) const { return channel_of(dev).out; }

  /** The devices this receiver drains, in lane order. */
  std::vector<device*> devices() const {
    std::vector<device*> out;
    for (const auto& ch : core_->channels) out.push_back(ch->dev);
    return out;
  }

  /** Returns once everything committed before the call has been consumed. Launches no device work.
   *  Throws timeout_error after close_timeout, naming the devices still behind. */
  void flush() {
    std::vector<std::uint64_t> targets;
    for (const auto& ch : core_->channels) targets.push_back(ch->ring->claimed_position());
    const auto deadline = std::chrono::steady_clock::now() + core_->options.close_timeout;
    for (auto pause = std::chrono::microseconds(1);; pause = std::min(pause * 2, std::chrono::microseconds(500))) {
      std::vector<std::string> behind;
      for (std::size_t i = 0; i < targets.size(); ++i) {
        const auto& ch = *core_->channels[i];
        const std::uint64_t done = ch.consumed.load(std::memory_order_acquire);
        if (!ch.finished.load(std::memory_order_acquire) && static_cast<std::int64_t>(done - targets[i]) < 0)
          behind.push_back(ch.device_name);
      }
      if (behind.empty()) return;
      if (std::chrono::steady_clock::now() > deadline)
        throw timeout_error("devtap: receiver '" + core_->name + "': flush() timed out; devices behind: " +
                                detail::join(behind, std::identity{}),
                            behind);
      std::this_thread::sleep_for(pause);
    }
  }

  /** Ends every stream after the work already submitted, waits for the consumers, joins the threads.
   *  Throws timeout_error (devices that did not finish) or tap_error (every consumer failure). */
  void close() {
    if (closed_) return;
    closed_ = true;
    auto& core = *core_;
    for (auto& ch : core.channels) {
      detail::channel* c = ch.get();
      if (c->ring->host_can_produce)
        c->dev->after_pending_work([keep = core_, c] {
          detail::write_end_marker(*c);
          c->dev->detach(&c->out);  // on the device's own executor: later work there sees no receiver
        });
      else
        c->dev->after_pending_work([keep = core_, c] {
          detail::close_ring(c->ring->host, 1);
          c->device_done.store(true, std::memory_order_seq_cst);
          detail::ring_doorbell(c->ring->host);
        });
    }
    const auto deadline = std::chrono::steady_clock::now() + core.options.close_timeout;
    {
      std::unique_lock lock(core.done_mutex);
      core.done_cv.wait_until(lock, deadline, [&] {
        return std::all_of(core.channels.begin(), core.channels.end(),
                           [](const auto& ch) { return ch->finished.load(std::memory_order_acquire); });
      });
    }
    std::vector<std::string> stuck;
    for (auto& ch : core.channels) {
      if (ch->finished.load(std::memory_order_acquire)) {
        ch->thread.join();
      } else {
        stuck.push_back(ch->device_name);
        ch->thread.request_stop();
        detail::close_ring(ch->ring->host, 2);
      }
      ch->dev->detach(&ch->out);
    }
    for (auto& ch : core.channels) {
      if (!ch->thread.joinable()) continue;
      // A reader stuck inside a consumer cannot be joined without hanging: give it a moment, then let it go
      // (it owns a reference to the shared state, so nothing it touches is freed under it).
      for (int i = 0; i < 100 && !ch->finished.load(std::memory_order_acquire); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (ch->thread.joinable()) ch->thread.detach();
    }
    std::vector<consumer_failure> failures;
    {
      std::lock_guard lock(core.failures_mutex);
      failures = core.failures;
    }
    for (auto& ch : core.channels) {
      if (!ch->failure.empty() && ch->finished.load(std::memory_order_acquire))
        failures.push_back({ch->device_name, "(stream)", ch->failure, {}});
      if (std::string sticky = detail::sticky_error_text(*ch); !sticky.empty())
        failures.push_back({ch->device_name, "(device)", std::move(sticky), {}});
    }
    std::string errors;
    for (const auto& f : failures) errors += "\n  [" + f.device + "] " + f.consumer + ": " + f.message;
    if (!stuck.empty())
      throw timeout_error("devtap: receiver '" + core.name + "': close() timed out after " +
                              std::to_string(core.options.close_timeout.count()) +
                              " ms; devices that did not finish: " + detail::join(stuck, std::identity{}) +
                              (errors.empty() ? "" : "; also:" + errors),
                          stuck);
    if (!failures.empty())
      throw tap_error("devtap: receiver '" + core.name + "': " + std::to_string(failures.size()) +
                          " consumer failure(s):" + errors,
                      std::move(failures));
  }

  /** Counters per device (safe to call at any time). */
  receiver_stats stats() const {
    receiver_stats st;
    for (const auto& ch : core_->channels) {
      device_stats d;
      d.device = ch->device_name;
      d.records = ch->records.load(std::memory_order_relaxed);
      d.bytes = ch->bytes.load(std::memory_order_relaxed);
      d.unknown_ids = ch->unknown_ids.load(std::memory_order_relaxed);
      d.type_mismatches = ch->mismatches.load(std::memory_order_relaxed);
      d.consumer_errors = ch->consumer_errors.load(std::memory_order_relaxed);
      d.ignored = ch->ignored.load(std::memory_order_relaxed);
      auto* words = ch->ring->host.consumer;
      d.dropped_records = std::atomic_ref<std::uint64_t>(words->dropped_records).load(std::memory_order_relaxed);
      d.dropped_bytes = std::atomic_ref<std::uint64_t>(words->dropped_bytes).load(std::memory_order_relaxed);
      if (ch->finished.load(std::memory_order_acquire) && !ch->failure.empty()) {
        d.stream_failed = true;
        d.failure = ch->failure;
      }
      st.devices.push_back(std::move(d));
    }
    return st;
  }

  /** The name given in the options (or "receiver"). */
  const std::string& name() const noexcept { return core_->name; }

private:
  template <class T, class Fn>
  tap_point<T> attach_impl(Fn fn, bool one_instance, std::string name) {
    static_assert(detail::coroutine_factory<T, Fn> || detail::value_callable<T, Fn>,
                  "devtap: a consumer of T is a coroutine `devtap::consumer<T> f(devtap::inbox<T>)` or a callable "
                  "taking `const T&` (optionally followed by `const devtap::device&`)");
    if (closed_) throw std::logic_error("devtap: attach() on receiver '" + core_->name + "' after close()");
    const std::size_t devices = core_->channels.size();
    std::lock_guard lock(core_->table_mutex);
    const auto id = static_cast<std::uint32_t>(core_->entries.size() + 1);
    if (name.empty()) name = "consumer#" + std::to_string(id);
    std::shared_ptr<detail::consumer_entry> entry;
    if constexpr (detail::coroutine_factory<T, Fn>)
      entry = std::make_shared<detail::coroutine_entry<T, Fn>>(std::move(name), std::move(fn), one_instance ? 1 : devices,
                                                                 devices);
    else
      entry = std::make_shared<detail::callable_entry<T, Fn>>(std::move(name), std::move(fn), one_instance, devices);
    core_->entries.push_back(std::move(entry));
    core_->table_version.fetch_add(1, std::memory_order_release);
    return tap_point<T>{id, type_fingerprint_v<T>};
  }

  detail::channel& channel_of(const device& dev) const {
    for (const auto& ch : core_->channels)
      if (ch->dev == &dev) return *ch;
    throw std::invalid_argument("devtap: device '" + dev.name() + "' is not drained by receiver '" + core_->name + "'");
  }

  std::shared_ptr<detail::receiver_core> core_;
  bool closed_ = false;
};

DEVTAP_END_NAMESPACE
