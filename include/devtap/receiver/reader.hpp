#pragma once
/** Where records are read: one `device_reader` per device runs on that device's jthread, reads
 *  its ring in place (ring/read.hpp), and hands each record to its consumer (consumer_entry.hpp),
 *  in emission order. `device_stream` is what the receiver and that thread share. */
#include <devtap/backend/device.hpp>
#include <devtap/detail/text.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/receiver/options.hpp>
#include <devtap/ring/close.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/ring/read.hpp>
#include <devtap/ring/wake.hpp>
#include <devtap/tap/outfeed.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <map>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** One device's ring, reader thread and counters. */
struct device_stream {
  device* dev = nullptr;
  std::size_t index = 0;  // in the receiver's device list; consumers keep one instance per index
  std::string device_name;
  std::shared_ptr<ring_allocation> ring;  // shared with the device, which keeps it past close (device::retire_ring)
  // Producers read `out` on every tap; the reader writes the counters on every record: apart,
  // or each record costs a cache-line transfer (measured: 2x at 16 B).
  alignas(64) devtap::outfeed out;
  alignas(64) std::atomic<std::uint64_t> records{0}, bytes{0}, unknown_ids{0}, mismatches{0}, consumer_errors{0},
      ignored{0};
  std::atomic<std::uint64_t> consumed{0};  // reader position after released records: flush() waits on it
  std::atomic<bool> device_done{false};    // producers that cannot write an end marker (CUDA) are done
  // Set by close() when it gives up on this device: the reader calls no consumer again; it counts
  // what is left in the ring (lost_at_close) and sets `reader_exited`.
  std::atomic<bool> abandoned{false};
  std::atomic<bool> reader_exited{false};
  std::atomic<std::uint64_t> lost_at_close{0};
  std::atomic<bool> finished{false};
  // Written by the reader before `finished`; read by close() after it.
  std::string failure;
  std::map<std::uint32_t, std::uint64_t> unknown_by_id;   // consumer id -> records skipped
  std::map<std::uint32_t, std::uint64_t> mismatch_by_id;  // consumer id -> records skipped
  std::jthread thread;
};

/** The ids of receivers: a tap_point carries its receiver's, so a point of another never delivers. */
inline std::uint32_t next_receiver_id() noexcept {
  static std::atomic<std::uint32_t> last{0};
  std::uint32_t id = last.fetch_add(1, std::memory_order_relaxed) + 1;
  while (id == 0) id = last.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 means "no receiver"
  return id;
}

/** What a receiver's threads share: the consumer table, the failures, the finish signal. */
struct receiver_state {
  std::uint32_t id = next_receiver_id();
  std::string name;
  receiver_options options;
  std::vector<std::unique_ptr<device_stream>> streams;

  std::mutex table_mutex;
  std::vector<std::shared_ptr<consumer_entry>> entries;  // index = id - 1
  std::atomic<std::uint32_t> table_version{0};

  std::mutex failures_mutex;
  std::vector<consumer_failure> failures;

  std::mutex done_mutex;
  std::condition_variable done_cv;

  /** Exceptions kept per consumer and device; later ones are counted (a callable that throws on
   *  every record must not grow memory without bound). */
  static constexpr std::uint64_t kept_failures_per_source = 16;
  std::map<std::pair<std::string, std::string>, std::uint64_t> failures_by_source;  // (device, consumer) -> thrown

  void record_failure(const device_stream& stream, std::string consumer_name, std::exception_ptr error) {
    {
      std::lock_guard lock(failures_mutex);
      if (++failures_by_source[{stream.device_name, consumer_name}] > kept_failures_per_source) return;
    }
    std::string message = "unknown exception";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    log(log_level::error, "receiver '{}': consumer '{}' on {} threw: {} (postponed to close())", name, consumer_name,
        stream.device_name, message);
    std::lock_guard lock(failures_mutex);
    failures.push_back({stream.device_name, std::move(consumer_name), std::move(message), std::move(error)});
  }

  void mark_finished(device_stream& stream) {
    {
      std::lock_guard lock(done_mutex);
      stream.finished.store(true, std::memory_order_release);
    }
    done_cv.notify_all();
  }
};

/** Adds to a counter that only its reader thread writes: a plain add, not a locked one. */
inline void add_owned(std::atomic<std::uint64_t>& counter, std::uint64_t n) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/** The reader of one device: `run` loops until the end marker, a malformed record, or a stop. */
class device_reader {
public:
  /** Records delivered between two updates of the stream's counters and position. */
  static constexpr std::uint64_t progress_every = 64;

  device_reader(receiver_state& state, device_stream& stream)
      : state_(state), stream_(stream), reader_(stream.ring->host), published_position_(reader_.position()) {}

  void run(std::stop_token stop) {
    std::stop_callback wake_on_stop(stop, [this] { wake_reader(stream_.ring->host); });
    const bool can_sleep = stream_.ring->producers_wake_reader;
    unsigned idle = 0;
    auto idle_since = std::chrono::steady_clock::now();
    std::uint64_t since_progress = 0;
    for (;;) {
      const record_ref rec = reader_.peek();
      switch (rec.kind) {
        case record_kind::data:
          idle = 0;
          if (rec.header->consumer_id == end_of_stream_id) {
            reader_.release(rec);
            reader_.publish();
            publish_counts();
            end_stream();  // publishes the position once the consumers have seen the end
            return;
          }
          if (stream_.abandoned.load(std::memory_order_acquire)) {
            count_lost();
            return;
          }
          dispatch(rec);
          reader_.release(rec);
          if (++since_progress % progress_every == 0) publish_progress();
          continue;
        case record_kind::skip:
          reader_.release(rec);
          continue;
        case record_kind::malformed:
          stop_malformed(rec);
          return;
        case record_kind::empty:
          break;
      }
      reader_.publish();
      publish_progress();
      if (stream_.device_done.load(std::memory_order_acquire)) {
        if (reader_.peek(std::memory_order_seq_cst).kind == record_kind::empty) {
          end_stream();
          return;
        }
        continue;
      }
      if (stop.stop_requested()) {  // abandoned at a close() timeout, with the ring empty
        count_lost();
        return;
      }
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
      } else if (waited < std::chrono::microseconds(200)) {
        std::this_thread::yield();
      } else if (!can_sleep) {  // CUDA producers cannot wake us: poll, at most every 250 µs
        std::this_thread::sleep_for(std::chrono::microseconds(waited < std::chrono::milliseconds(2) ? 20 : 250));
      } else if (reader_sleep(stream_.ring->host, reader_.position(), [&] {
                   return stop.stop_requested() || stream_.device_done.load(std::memory_order_seq_cst);
                 })) {
        std::this_thread::yield();  // claimed, not yet committed: it will be soon
      }
    }
  }

private:
  // A snapshot of the consumer table, refreshed when attach() changed it.
  bool refresh_table() {
    const std::uint32_t v = state_.table_version.load(std::memory_order_acquire);
    if (v == table_version_) return false;
    std::lock_guard lock(state_.table_mutex);
    table_ = state_.entries;
    table_version_ = state_.table_version.load(std::memory_order_relaxed);
    return true;
  }

  consumer_entry* lookup(std::uint32_t id) {
    if (id - 1 < table_.size() || (refresh_table() && id - 1 < table_.size())) return table_[id - 1].get();
    return nullptr;
  }

  void dispatch(const record_ref& rec) {
    const std::uint32_t id = rec.header->consumer_id;
    consumer_entry* entry = lookup(id);
    if (entry == nullptr) {
      add_owned(stream_.unknown_ids, 1);
      if (stream_.unknown_by_id[id]++ == 0)
        log(log_level::error, "receiver '{}': record for unknown consumer id {} on {} (skipped; logged once)",
            state_.name, id, stream_.device_name);
      return;
    }
    delivery result = delivery::mismatch;
    if (rec.header->fingerprint == entry->fingerprint) {
      try {
        result = entry->deliver(stream_.index, *stream_.dev, rec.payload, rec.payload_bytes);
      } catch (...) {
        add_owned(stream_.consumer_errors, 1);
        state_.record_failure(stream_, entry->name, std::current_exception());
        return;
      }
    }
    switch (result) {
      case delivery::delivered:
        ++delivered_records_;
        delivered_bytes_ += rec.payload_bytes;
        break;
      case delivery::mismatch:
        add_owned(stream_.mismatches, 1);
        if (stream_.mismatch_by_id[id]++ == 0)
          log(log_level::error,
              "receiver '{}': record for consumer '{}' on {} does not match its type (fingerprint {} expected {}, "
              "{} payload bytes; skipped; logged once)",
              state_.name, entry->name, stream_.device_name, rec.header->fingerprint, entry->fingerprint,
              rec.payload_bytes);
        break;
      case delivery::failed_before:
        add_owned(stream_.consumer_errors, 1);
        break;
      case delivery::returned_before:
        add_owned(stream_.ignored, 1);
        break;
    }
  }

  void end_stream() {
    refresh_table();
    for (auto& entry : table_) {
      try {
        entry->finish(stream_.index, *stream_.dev);
      } catch (...) {
        state_.record_failure(stream_, entry->name, std::current_exception());
      }
    }
    stream_.consumed.store(reader_.position(), std::memory_order_release);
    log(log_level::debug, "receiver '{}': stream of {} ended", state_.name, stream_.device_name);
    state_.mark_finished(stream_);
  }

  // The reader's last act on a device close() gave up on: count, without delivering, the records
  // still committed in the ring, so they are reported rather than silently gone.
  void count_lost() {
    publish_progress();
    std::uint64_t lost = 0;
    for (record_ref rec = reader_.peek(); rec.kind == record_kind::data || rec.kind == record_kind::skip;
         rec = reader_.peek()) {
      if (rec.kind == record_kind::data && rec.header->consumer_id != end_of_stream_id) ++lost;
      reader_.release(rec);
    }
    reader_.publish();
    stream_.lost_at_close.store(lost, std::memory_order_relaxed);
    if (lost != 0)
      log(log_level::error, "receiver '{}': {} record(s) left on {} after close() gave up on it were not delivered",
          state_.name, lost, stream_.device_name);
    stream_.reader_exited.store(true, std::memory_order_release);
  }

  void stop_malformed(const record_ref& rec) {
    stream_.failure = "malformed record on device '" + stream_.device_name + "' at ring offset " +
                      std::to_string(reader_.offset()) + " (length word " + std::to_string(rec.header->length) +
                      "): its stream was stopped";
    log(log_level::error, "receiver '{}': {}", state_.name, stream_.failure);
    close_ring(stream_.ring->host, ring_reader_gone);  // blocked producers must not wait for a stopped reader
    publish_progress();
    state_.mark_finished(stream_);
  }

  // Progress is published every `progress_every` records and whenever the ring runs dry, not per
  // record: stats() and flush() see it soon enough, and the hot loop stays free of shared stores.
  void publish_counts() {
    if (delivered_records_ == 0) return;
    add_owned(stream_.records, delivered_records_);
    add_owned(stream_.bytes, delivered_bytes_);
    delivered_records_ = delivered_bytes_ = 0;
  }

  void publish_progress() {  // an idle reader calls this on every poll: it writes only news
    publish_counts();
    if (reader_.position() == published_position_) return;
    published_position_ = reader_.position();
    stream_.consumed.store(published_position_, std::memory_order_release);
  }

  receiver_state& state_;
  device_stream& stream_;
  ring_reader reader_;
  std::vector<std::shared_ptr<consumer_entry>> table_;
  std::uint32_t table_version_ = ~0u;
  std::uint64_t delivered_records_ = 0, delivered_bytes_ = 0, published_position_;
};

/** Gives up on a stream: its reader calls no consumer again, counts what is left and exits; taps
 *  and the end marker stop waiting for space. */
inline void abandon(device_stream& stream) {
  stream.abandoned.store(true, std::memory_order_release);
  stream.thread.request_stop();
  close_ring(stream.ring->host, ring_reader_gone);
  wake_reader(stream.ring->host);
}

/** Waits until the work submitted to each stream's device before the call has finished (its
 *  after_pending_work callback ran), or `deadline`; returns the devices still busy. */
inline std::vector<std::string> wait_for_pending_work(const std::vector<std::unique_ptr<device_stream>>& streams,
                                                      std::chrono::steady_clock::time_point deadline) {
  struct pending_work {
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<char> done;
  };
  auto work = std::make_shared<pending_work>();  // shared: a late callback outlives a timed-out wait
  work->done.assign(streams.size(), 0);
  for (std::size_t i = 0; i < streams.size(); ++i)
    streams[i]->dev->after_pending_work([work, i] {
      {
        std::lock_guard lock(work->mutex);
        work->done[i] = 1;
      }
      work->cv.notify_all();
    });
  std::vector<std::string> busy;
  std::unique_lock lock(work->mutex);
  work->cv.wait_until(lock, deadline, [&] { return std::find(work->done.begin(), work->done.end(), 0) == work->done.end(); });
  for (std::size_t i = 0; i < work->done.size(); ++i)
    if (!work->done[i]) busy.push_back(streams[i]->device_name);
  return busy;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
