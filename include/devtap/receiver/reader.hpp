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
#include <devtap/receiver/record_sink.hpp>
#include <devtap/ring/close.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/ring/read.hpp>
#include <devtap/ring/wake.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/scope.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
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
  // The furthest position a flush() waits for: below it, the reader waits for no merge's room.
  std::atomic<std::uint64_t> flush_target{0};
  std::atomic<bool> device_done{false};    // producers that cannot write an end marker (CUDA) are done
  // flush() asks the reader to write the file sinks' part of this device (a number per request);
  // the reader answers with the number it saw, the next time it finds the ring empty.
  std::atomic<std::uint64_t> sinks_write_asked{0}, sinks_written{0};
  // Set by close() when it gives up on this device: the reader calls no consumer again; it counts
  // what is left in the ring (lost_at_close), then leaves.
  std::atomic<bool> abandoned{false};
  std::atomic<bool> reader_exited{false};  // set as the reader's thread leaves run(), whichever way
  std::atomic<std::uint64_t> lost_at_close{0};
  std::atomic<bool> finished{false};
  // Set on the device by close()'s callback once the device's pending work is done and
  // `work_failure` is written (before the end marker, so a reader that saw the end implies it);
  // close() waits for it as for `finished`: a reader whose stream failed finishes before it.
  std::atomic<bool> work_done{false};
  std::atomic<bool> ended_by_close{false};  // close()'s end ran (once, whatever a device does with it)
  bool work_done_in_time = false;  // close()'s one look at work_done past its wait: all it reports agrees
  // Written by the reader before `finished`; read by close() after it.
  std::string failure;
  std::uint64_t dropped_told_sinks = 0;  // the drop count end_sinks gave the files
  // The device's work failures when the receiver opened; at close(), after its pending work, the
  // last one's text if there were more (device::work_failure_since), read by close() after `work_done`
  // (only if it was set in time: the device may write it later).
  std::uint64_t work_failures_seen = 0;
  std::string work_failure;
  std::map<std::uint32_t, std::uint64_t> unknown_by_id;   // consumer id -> records skipped
  std::map<std::uint32_t, std::uint64_t> mismatch_by_id;  // consumer id -> records skipped
  std::jthread thread;
  std::thread::id reader_id;  // thread's, kept apart: close() joins or detaches `thread` while others ask
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
  // The consumers go first: a merged consumer's helper thread, joined as it goes, may still report
  // a failure through everything below (failures, sinks).
  ~receiver_state() { entries.clear(); }

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
  // Held by close(): here, not in the receiver, because a merged consumer that close() calls may
  // destroy the receiver (close() then goes on with the state alone).
  std::mutex close_mutex;
  std::atomic<std::thread::id> closing_thread{};  // the thread in close(), while it runs
  // close() began (or the receiver was destroyed from a consumer): in the state, not the receiver,
  // so that the exit handler or a client's destructor can close one its owner is destroying.
  std::atomic<bool> closed{false};
  std::atomic<bool> open_failed{false};  // the constructor gave up after its readers started (count_lost's words)
  // barrier() calls waiting: meanwhile no reader waits for a merge's room (barrier_waiting).
  std::atomic<int> barriers_waiting{0};
  // The merged consumers that hold records (merge_room): shared, as a merge's helper may outlive the state.
  std::shared_ptr<std::atomic<int>> merges_holding = std::make_shared<std::atomic<int>>(0);
  /** Sets `closed`; true if this call did. Under the table's lock: an attach() or serve() that saw it
   *  unset under that lock has published its entry before any end of stream is written, so each
   *  reader's last look at the table (end_stream) finds it and ends it. */
  bool close_once() {
    std::lock_guard lock(table_mutex);
    return !closed.exchange(true, std::memory_order_acq_rel);
  }

  // The trace file and the recording (receiver_options::trace_file, record_file): made before the
  // readers start, closed by close() after them; each reader feeds them every record it reads.
  std::vector<std::unique_ptr<record_sink>> sinks;

  /** Tells every sink (a marker on `stream`'s track): at `at_ns`, the time the sinks gave the record
   *  it is about (so that its track's times do not go back at the next record), else (0) now. */
  void mark(const device_stream& stream, marker_kind kind, std::uint64_t count, std::string_view text, std::uint64_t at_ns = 0) {
    const bool from_reader = ring_read_here == stream.ring->host.consumer;  // the device's own reader
    if (at_ns == 0 && !sinks.empty()) at_ns = stamp_now_ns();
    for (auto& sink : sinks) sink->marker(stream.index, at_ns, kind, count, text, from_reader);
  }
  /** The stream's reader is done: its last word to the sinks. */
  void end_sinks(device_stream& stream) {
    if (sinks.empty()) return;
    const std::uint64_t dropped =
        std::atomic_ref<std::uint64_t>(stream.ring->host.consumer->dropped_records).load(std::memory_order_relaxed);
    stream.dropped_told_sinks = dropped;
    for (auto& sink : sinks) sink->end(stream.index, stamp_now_ns(), dropped);
  }

  /** Exceptions kept per consumer and device; later ones are counted (a callable that throws on
   *  every record must not grow memory without bound). */
  static constexpr std::uint64_t kept_failures_per_source = 16;
  std::map<std::pair<std::string, std::string>, std::uint64_t> failures_by_source;  // (device, consumer) -> thrown

  /** A consumer threw (`at_ns`: its record's time for the sinks, as mark() takes it). */
  void record_failure(const device_stream& stream, std::string consumer_name, std::exception_ptr error, std::uint64_t at_ns = 0);

  /** Sets `finished` or `work_done` (close() waits on both under done_mutex). */
  void mark_done(std::atomic<bool>& flag) {
    {
      std::lock_guard lock(done_mutex);
      flag.store(true, std::memory_order_release);  // partner: close()'s acquire loads
    }
    done_cv.notify_all();
  }
};

// Counts a barrier() in receiver_state::barriers_waiting while it waits: what it waits for is the
// records of work queued before it, which a reader waiting for a merge's room would slow to a trickle.
struct barrier_waiting {
  explicit barrier_waiting(receiver_state& s) : state(s) { state.barriers_waiting.fetch_add(1, std::memory_order_relaxed); }
  barrier_waiting(const barrier_waiting&) = delete;
  ~barrier_waiting() { state.barriers_waiting.fetch_sub(1, std::memory_order_relaxed); }
  receiver_state& state;
};

/** Raises `value` to `to` unless it is already there or past it. */
inline void raise_to(std::atomic<std::uint64_t>& value, std::uint64_t to) noexcept {
  std::uint64_t now = value.load(std::memory_order_relaxed);
  while (static_cast<std::int64_t>(to - now) > 0 && !value.compare_exchange_weak(now, to, std::memory_order_relaxed)) {
  }
}

/** What flush() waits for on this device: its claimed position, read by `deadline` (none: not in
 *  time). Below it, the reader waits for no merge's room (device_reader::wait_for_merges). */
inline std::optional<std::uint64_t> flush_target_of(device_stream& stream, std::chrono::steady_clock::time_point deadline) {
  const std::optional<std::uint64_t> target = stream.ring->claimed_position(deadline);
  if (target) raise_to(stream.flush_target, *target);
  return target;
}

/** Adds to a counter that only its reader thread writes: a plain add, not a locked one. */
inline void add_owned(std::atomic<std::uint64_t>& counter, std::uint64_t n) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

/** The reader of one device: `run` loops until the end marker, a malformed record, or a stop. */
class device_reader {
public:
  /** Records delivered between two updates of the stream's counters and position. */
  static constexpr std::uint64_t progress_every = 64;
  /** How long the reader looks away after catching up with the producers (run()): long enough for a
   *  busy producer to fill several lines, short against the ~20 µs it spins when idle. */
  static constexpr std::chrono::nanoseconds catch_up_pause{2000};
  /** Only rings this large pause: producers would have to write the whole ring (just published
   *  empty) within the pause, 32 GB/s, to be held back by it. */
  static constexpr std::uint64_t catch_up_pause_min_capacity = std::uint64_t{64} << 10;

  device_reader(receiver_state& state, device_stream& stream)
      : state_(state), stream_(stream), reader_(stream.ring->host), published_position_(reader_.position()),
        clock_offset_ns_(stream.ring->clock_offset_ns) {}

  void run(std::stop_token stop);

private:
  // Spins until catch_up_pause has passed since `since`, or a caller holds a reply slot.
  void pause_after_catching_up(std::chrono::steady_clock::time_point since) const;
  // A snapshot of the consumer table, refreshed when attach() changed it.
  bool refresh_table();
  // Whether every claim in a host-produced ring was read: one made before the ring closed may still
  // be being written when its device was not waited for (end_stream_without_waiting). A tail that
  // cannot be read: no, and close()'s give-up settles it (count_lost).
  bool all_claims_read() const noexcept {
    try {
      return stream_.ring->claimed_position(std::chrono::steady_clock::now()) == reader_.position();
    } catch (...) {
      return false;
    }
  }

  consumer_entry* lookup(std::uint32_t id) {
    id &= ~call_id_flag;  // a handler's calls carry the flag; its table index does not
    if (id - 1 < table_.size() || (refresh_table() && id - 1 < table_.size())) return table_[id - 1].get();
    return nullptr;
  }

  [[gnu::always_inline]] inline void dispatch(const record_ref& rec);  // inlined into run(), as hand_over

  // Hands a record to one consumer and counts what came of it; true when it was delivered. Inlined
  // into the reader's loop: a call per record more cost 16 B streams ~10 % (docs/performance.md).
  [[gnu::always_inline]] inline bool hand_over(consumer_entry& entry, const record_ref& rec, std::uint32_t id, bool is_call, const record_stamp& stamp,
                 const std::byte* payload, std::size_t payload_bytes);
  // hand_over's rare outcomes, out of the reader's loop: counts, logs once, refuses a call.
  [[gnu::cold]] bool settle(delivery result, bool fits, consumer_entry& entry, const record_ref& rec,
                                           std::uint32_t id, bool is_call);

  void to_sinks(std::uint32_t id, const consumer_entry* entry, const record_ref& rec, record_stamp stamp,
                const std::byte* payload, std::size_t payload_bytes);

  // A call no handler answers (none, or of other types): answered with `error`, so its caller
  // fails at once instead of waiting for ever.
  void refuse_call(const record_ref& rec, call_errc error, std::string_view why);

  // The reader's last act, however it stops: no answer comes after it, so waiting callers give up.
  void end_answers();

  void end_stream();

  // Whenever the reader catches up, is about to call a consumer that does not set records aside,
  // or stops: what consumers set aside goes on (merged_entry.hpp); `lost` when close() gave up.
  // False when close() gave up on the stream by the end (a merged call may have stuck past it).
  // Two steps: every merge sees what was set aside for it (post_staged) before the reader waits for
  // any merge's lock, which a long call into that consumer holds: a record kept from the others
  // meanwhile let them take this device for quiet and deliver later records first.
  bool pass_on_staged(bool lost);

  // Back-pressure from merged consumers that hold too much of this device (merged_entry.hpp): right
  // after pass_on_staged, every 64 records and when the ring is empty, so the reader reads 64 records
  // or all there is between two waits; all waits together at most one room_wait. Not while a second
  // merge holds records (its order could break: merge_room), nor below a flush()'s position, nor
  // during close() or barrier(): those wait for a ring's worth or their work's records.
  void wait_for_merges() {
    if (staging_consumers_.empty() || state_.merges_holding->load(std::memory_order_relaxed) > 1 ||
        static_cast<std::int64_t>(stream_.flush_target.load(std::memory_order_relaxed) - reader_.position()) > 0 ||
        state_.closed.load(std::memory_order_relaxed) || state_.barriers_waiting.load(std::memory_order_relaxed) != 0)
      return;
    std::chrono::steady_clock::time_point until{};
    for (consumer_entry* entry : staging_consumers_) entry->wait_for_room(stream_.index, until);
  }

  // The reader's last act on a device close() gave up on: count, without delivering, the records
  // still committed in the ring, so they are reported rather than silently gone.
  void count_lost();

  void stop_malformed(const record_ref& rec);

  // Progress is published every `progress_every` records and whenever the ring runs dry, not per
  // record: stats() and flush() see it soon enough, and the hot loop stays free of shared stores.
  void publish_counts() {
    if (delivered_records_ == 0) return;
    stream_.records.fetch_add(delivered_records_, std::memory_order_relaxed);  // (a merged consumer counts from
    stream_.bytes.fetch_add(delivered_bytes_, std::memory_order_relaxed);      // other threads)
    delivered_records_ = delivered_bytes_ = 0;
  }

  // A sink's buffer for this device is full (to_sinks): written now, after what consumers set aside
  // went on, since the write may block, and a record held back here meanwhile would not stop the
  // merge from taking this device for quiet (the merged order: docs/timeline.md).
  void write_full_sinks() {
    sinks_full_ = false;
    pass_on_staged(false);
    for (auto& sink : state_.sinks) sink->write_out(stream_.index);
  }

  void publish_progress() {  // an idle reader calls this on every poll: it writes only news
    publish_counts();
    if (reader_.position() != published_position_) {
      published_position_ = reader_.position();
      stream_.consumed.store(published_position_, std::memory_order_release);
    }
    const std::uint64_t asked = stream_.sinks_write_asked.load(std::memory_order_acquire);  // flush()'s, below
    if (asked == stream_.sinks_written.load(std::memory_order_relaxed)) return;
    for (auto& sink : state_.sinks) sink->write_out(stream_.index);
    stream_.sinks_written.store(asked, std::memory_order_release);  // pairs with write_sinks_out's acquire
  }

  receiver_state& state_;
  device_stream& stream_;
  ring_reader reader_;
  std::vector<std::shared_ptr<consumer_entry>> table_;
  std::vector<point_description> points_;          // by table index, for the sinks
  std::vector<consumer_entry*> scope_consumers_;   // every consumer of scope_event (in table_)
  std::vector<consumer_entry*> staging_consumers_; // every consumer that sets records aside (in table_)
  std::uint32_t table_version_ = ~0u;
  std::uint64_t delivered_records_ = 0, delivered_bytes_ = 0, published_position_;
  std::uint64_t records_read_ = 0;  // the sequence number of unstamped records
  std::uint64_t sink_time_ns_ = 0;  // the time the sinks gave the record being dispatched (markers about it)
  std::int64_t clock_offset_ns_;    // the device's clock minus the host's (a GPU's; 0 for cpu rings)
  bool last_was_call_ = false;      // the last record read was a call (its caller waits: no pause)
  bool staged_ = false;             // a consumer set a record aside since the last pass_on_staged
  bool sinks_full_ = false;         // a sink's buffer for this device wants writing (write_full_sinks)
  // The sinks are told of a record counted in lost_at_close as they are of the ring's (count_lost).
  void mark_given_up() { state_.mark(stream_, marker_kind::lost, 1, "a record whose consumer close() gave up on", sink_time_ns_); }
  // A scope record no consumer took counts once: where the first other outcome says, else in
  // ignored (in lost_at_close once close() gave up on the stream).
  void count_untaken_scope() {
    std::atomic<std::uint64_t>& outcome = scope_outcome_ != nullptr ? *scope_outcome_
                                          : stream_.abandoned.load(std::memory_order_acquire) ? stream_.lost_at_close
                                                                                              : stream_.ignored;
    outcome.fetch_add(1, std::memory_order_relaxed);
    if (&outcome == &stream_.lost_at_close) mark_given_up();
  }
  // A record counts once; a scope record too, however many consumers get it (dispatch).
  void count_one(std::atomic<std::uint64_t>& counter) {
    if (!in_scope_loop_) counter.fetch_add(1, std::memory_order_relaxed);  // (merged consumers count from other threads)
    else if (scope_outcome_ == nullptr) scope_outcome_ = &counter;
  }
  bool in_scope_loop_ = false;      // handing a scope record to its consumers
  std::atomic<std::uint64_t>* scope_outcome_ = nullptr;  // where it counts if none took it (the first other outcome)
};

/** Gives up on a stream: its reader calls no consumer again, counts what is left and exits; taps
 *  and the end marker stop waiting for space. */
void abandon(device_stream& stream);
/** How long close() waits, past close_timeout, for the readers it gave up on to count what they
 *  leave (one wait for all of them): a reader stuck in a consumer is let go after it. */
inline constexpr std::chrono::milliseconds close_grace{100};

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/receiver/reader_impl.hpp>
#endif
