#pragma once
// Definitions of reader.hpp (the readers, the receiver state): included by it when header-only, else compiled once.
#include <devtap/receiver/reader.hpp>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

DEVTAP_FUNC void receiver_state::record_failure(const device_stream& stream, std::string consumer_name, std::exception_ptr error, std::uint64_t at_ns) {
  {
    std::lock_guard lock(failures_mutex);
    if (++failures_by_source[{stream.device_name, consumer_name}] > kept_failures_per_source) return;
  }
  std::string message = "unknown exception";
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    message = message_of(e);
  } catch (...) {
  }
  log(log_level::error, "receiver '{}': consumer '{}' on {} threw: {} (postponed to close())", name, consumer_name,
      stream.device_name, message);
  mark(stream, marker_kind::error, 1, "consumer '" + consumer_name + "' threw: " + message, at_ns);
  std::lock_guard lock(failures_mutex);
  failures.push_back({stream.device_name, std::move(consumer_name), std::move(message), std::move(error)});
}

DEVTAP_FUNC void device_reader::run(std::stop_token stop) {
  std::stop_callback wake_on_stop(stop, [this] { wake_reader(stream_.ring->host); });
  ring_read_here = stream_.ring->host.consumer;  // a tap or call from a consumer into this ring must not wait (wake.hpp)
  receiver_read_here = state_.id;
  stream_given_up_here = &stream_.abandoned;  // a shared consumer looks again once it has its lock
  const bool can_sleep = stream_.ring->producers_wake_reader;
  unsigned idle = 0;
  auto idle_since = std::chrono::steady_clock::now();
  std::uint64_t since_progress = 0;
  for (;;) {
    const record_ref rec = reader_.peek();
    switch (rec.kind) {
      case record_kind::data:
        idle = 0;
        // First: a reader close() gave up on calls no consumer again, not even with the end queued behind.
        if (stream_.abandoned.load(std::memory_order_acquire)) {
          count_lost();
          return;
        }
        if (rec.header->consumer_id == end_of_stream_id) {
          reader_.release(rec);
          reader_.publish();
          publish_counts();
          end_stream();  // publishes the position once the consumers have seen the end
          return;
        }
        dispatch(rec);
        reader_.release(rec);
        if (sinks_full_) [[unlikely]] write_full_sinks();
        if (++since_progress % progress_every == 0) {
          pass_on_staged(false);  // before the position says they were read (flush() waits on it)
          publish_progress();
          wait_for_merges();
        }
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
    pass_on_staged(false);
    reader_.publish();
    publish_progress();
    wait_for_merges(), since_progress = 0;  // (the next wait comes 64 records on)
    if (stream_.device_done.load(std::memory_order_acquire)) {
      if (reader_.peek(std::memory_order_seq_cst).kind != record_kind::empty) continue;
      if (!stream_.ring->host_can_produce || all_claims_read()) {
        end_stream();
        return;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));  // it is committed soon, or close() gives up
    }
    if (stop.stop_requested()) {  // abandoned at a close() timeout, with the ring empty
      count_lost();
      return;
    }
    if (idle++ == 0) {
      idle_since = std::chrono::steady_clock::now();
      reader_just_woke = false;  // it has read what woke it
      // Caught up with a producer that may still be writing: its next records land on the very
      // line the look at the head just read. Looking again at once would pull that line back and
      // forth for every record (two trips between the CPUs each, about 110 ns: docs/ring.md, "The
      // pause after catching up"), so wait a moment and come back to whole lines.
      // Only where cpu threads produce (a GPU's writes do not take lines away from the reader),
      // not after a call (its caller waits for the answer and may call again at once), not on a
      // small ring (producers could fill it meanwhile), and cut short by a caller taking a reply slot.
      if (can_sleep && !last_was_call_ && stream_.ring->host.capacity >= catch_up_pause_min_capacity) {
        pause_after_catching_up(idle_since);
        continue;
      }
    }
    // Idle: spin (with pause) for ~20 µs so a trickle of records is picked up at once, then yield,
    // then sleep; the spin costs CPU only while records keep coming.
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
                 return stop.stop_requested() || stream_.device_done.load(std::memory_order_seq_cst) ||
                        stream_.sinks_write_asked.load(std::memory_order_seq_cst) != stream_.sinks_written.load(std::memory_order_relaxed);
               })) {
      std::this_thread::yield();  // claimed, not yet committed: it will be soon
    }
    report_heavy_fence_lost();
  }
}

DEVTAP_FUNC void device_reader::pause_after_catching_up(std::chrono::steady_clock::time_point since) const {
  const ring_view& ring = stream_.ring->host;
  do {
    for (int k = 0; k < 8; ++k) cpu_relax();
    if (calls_in_flight(ring)) return;
  } while (std::chrono::steady_clock::now() - since < catch_up_pause);
}

DEVTAP_FUNC bool device_reader::refresh_table() {
  const std::uint32_t v = state_.table_version.load(std::memory_order_acquire);
  if (v == table_version_) return false;
  std::lock_guard lock(state_.table_mutex);
  table_ = state_.entries;
  table_version_ = state_.table_version.load(std::memory_order_relaxed);
  scope_consumers_.clear(), staging_consumers_.clear();
  for (const auto& entry : table_) {
    if (entry->kind == point_kind::scope) scope_consumers_.push_back(entry.get());
    if (entry->stages_records) staging_consumers_.push_back(entry.get());
  }
  if (!state_.sinks.empty())
    for (std::size_t i = points_.size(); i < table_.size(); ++i)
      points_.push_back({static_cast<std::uint32_t>(i + 1) | (table_[i]->answers_calls ? call_id_flag : 0), table_[i]->kind,
                         table_[i]->fingerprint, table_[i]->name});
  return true;
}

DEVTAP_FUNC void device_reader::refuse_call(const record_ref& rec, call_errc error, std::string_view why) {
  // The flag says a stamp comes first, whether or not this receiver counts it (dispatch).
  const std::size_t skip = (rec.header->consumer_id & stamped_id_flag) != 0 ? sizeof(tap_stamp) : 0;
  call_request request;
  if (rec.payload_bytes < skip + sizeof request) return;  // not a call's shape: nowhere to answer
  std::memcpy(&request, rec.payload + skip, sizeof request);
  if (request.slot < reply_slot_count) answer_call(stream_.ring->host, request, error, why.data(), why.size());
}

DEVTAP_FUNC void device_reader::end_answers() {
  close_ring(stream_.ring->host, ring_reader_gone);  // first: a caller woken below must see it
  wake_callers(stream_.ring->host);
}

// inline in compiled mode too: run() is its only caller, and always_inline needs a body no link replaces.
inline void device_reader::dispatch(const record_ref& rec) {
  // The stamp flag counts only where this receiver asked for stamps (a call's stamp comes before its call_request);
  // where it does not count, the id keeps the flag and no consumer has such an id (a call is refused, no_handler).
  const std::uint32_t cid = rec.header->consumer_id;
  const bool stamped = state_.options.timestamps && (cid & stamped_id_flag) != 0 && rec.payload_bytes >= sizeof(tap_stamp);
  const std::uint32_t id = stamped ? cid & ~stamped_id_flag : cid;
  const bool is_call = (id & call_id_flag) != 0;
  last_was_call_ = is_call;
  record_stamp stamp{0, records_read_++, false};  // unstamped: its place in the stream as read
  const std::byte* payload = rec.payload;
  std::size_t payload_bytes = rec.payload_bytes;
  if (stamped) {
    tap_stamp s;  // timestamps on: the device's time and tap count come first
    std::memcpy(&s, payload, sizeof s);
    stamp = {s.time_ns - static_cast<std::uint64_t>(clock_offset_ns_), s.sequence, true};  // onto the host's clock
    payload += sizeof s;
    payload_bytes -= sizeof s;
  }
  consumer_entry* entry = id == scope_record_id ? nullptr : lookup(id);
  if (!state_.sinks.empty()) [[unlikely]]
    to_sinks(id, entry, rec, stamp, payload, payload_bytes);
  if (id == scope_record_id) [[unlikely]] {  // every consumer of scope_event gets it; none is not an error
    refresh_table();
    // It counts once: in records if a consumer took it, else count_untaken_scope.
    scope_outcome_ = nullptr, in_scope_loop_ = true;
    bool taken = false;
    for (consumer_entry* scope_consumer : scope_consumers_) {
      if (stream_.abandoned.load(std::memory_order_acquire)) break;  // close() gave up during the last one
      taken = hand_over(*scope_consumer, rec, id, false, stamp, payload, payload_bytes) || taken;
    }
    in_scope_loop_ = false;
    if (taken) ++delivered_records_, delivered_bytes_ += payload_bytes;
    else count_untaken_scope();
    return;
  }
  if (entry == nullptr) [[unlikely]] {
    add_owned(stream_.unknown_ids, 1);
    if (is_call) refuse_call(rec, call_errc::no_handler, "no handler has that id");
    if (stream_.unknown_by_id[id]++ == 0) {
      if (staged_) pass_on_staged(false);  // before the log sink, which may take long (as a consumer's call)
      const std::string what = (is_call ? "call for " : "record for ") + unknown_id_text(id), outcome = is_call ? "refused" : "skipped";
      log(log_level::error, "receiver '{}': {} on {} ({}; logged once)", state_.name, what, stream_.device_name, outcome);
      state_.mark(stream_, marker_kind::error, 1, what + " (" + outcome + ")", sink_time_ns_);
    }
    return;
  }
  if (hand_over(*entry, rec, id, is_call, stamp, payload, payload_bytes)) ++delivered_records_, delivered_bytes_ += payload_bytes;
}

// inline in compiled mode too: run() is its only caller, and always_inline needs a body no link replaces.
inline bool device_reader::hand_over(consumer_entry& entry, const record_ref& rec, std::uint32_t id, bool is_call,
                                          const record_stamp& stamp, const std::byte* payload, std::size_t payload_bytes) {
  const bool fits = rec.header->fingerprint == entry.fingerprint && entry.answers_calls == is_call;
  if (!fits) [[unlikely]]
    return settle(delivery::mismatch, false, entry, rec, id, is_call);
  // A consumer that does not set records aside may take long: records set aside for a merge go first,
  // or the merge would take their device for quiet while it holds an earlier record.
  if (entry.stages_records) {
    staged_ = true;
  } else if (staged_ && !pass_on_staged(false)) [[unlikely]] {  // given up on during the merge's call
    return settle(delivery::given_up, true, entry, rec, id, is_call);
  }
  delivery result;
  try {
    result = entry.deliver(stream_.index, *stream_.dev, stamp, payload, payload_bytes);
  } catch (...) {
    count_one(stream_.consumer_errors);
    state_.record_failure(stream_, entry.name, std::current_exception(), sink_time_ns_);
    return false;
  }
  if (result == delivery::delivered) [[likely]]
    return true;
  // A merged consumer counts what becomes of the record when it delivers it; a scope record is the
  // exception: its reader counts it once, whichever consumers get it.
  if (result == delivery::held) return entry.kind == point_kind::scope;
  return settle(result, true, entry, rec, id, is_call);
}

DEVTAP_FUNC bool device_reader::settle(delivery result, bool fits, consumer_entry& entry, const record_ref& rec,
                                       std::uint32_t id, bool is_call) {
  switch (result) {
    case delivery::delivered:
      return true;
    case delivery::mismatch:
      count_one(stream_.mismatches);
      if (is_call && !fits)  // (else the handler answered it)
        refuse_call(rec, call_errc::type_mismatch,
                    entry.answers_calls ? "the handler behind this call_point takes or returns other types"
                                        : "this point is a consumer's, not a handler's");
      if (stream_.mismatch_by_id[id]++ == 0) {
        if (staged_) pass_on_staged(false);  // before the log sink, as above
        // fits: the record's type is the consumer's, but its bytes do not decode as one.
        log(log_level::error,
            fits ? "receiver '{}': record for consumer '{}' on {} has its type's fingerprint ({}) but does not decode as "
                   "one (a size or span count that does not fit, a bool neither 0 nor 1; skipped; logged once)"
                 : "receiver '{}': record for consumer '{}' on {} does not match its type (fingerprint {} expected {}, "
                   "{} payload bytes; skipped; logged once)",
            state_.name, entry.name, stream_.device_name, rec.header->fingerprint, entry.fingerprint, rec.payload_bytes);
        state_.mark(stream_, marker_kind::error, 1, "record for consumer '" + entry.name + "' does not match its type (skipped)", sink_time_ns_);
      }
      return false;
    case delivery::failed_before:
      count_one(stream_.consumer_errors);
      return false;
    case delivery::returned_before:
      count_one(stream_.ignored);
      return false;
    case delivery::held:
      return false;
    case delivery::given_up:
      count_one(stream_.lost_at_close);
      if (!in_scope_loop_) mark_given_up();  // (a scope record: once, after its loop)
      return false;
  }
  return false;
}

DEVTAP_FUNC void device_reader::to_sinks(std::uint32_t id, const consumer_entry* entry, const record_ref& rec,
                                         record_stamp stamp, const std::byte* payload, std::size_t payload_bytes) {
  static const point_description scope_description{scope_record_id, point_kind::scope, type_fingerprint_v<scope_event>, "scope"};
  if (!stamp.stamped) stamp.time_ns = stamp_now_ns();  // sinks place an unstamped record at its arrival
  sink_time_ns_ = stamp.time_ns;
  const point_description* point = nullptr;
  if (id == scope_record_id) point = &scope_description;
  else if (entry != nullptr && points_[(id & ~call_id_flag) - 1].id == id)  // (a tap on a handler's id: unknown to the files)
    point = &points_[(id & ~call_id_flag) - 1];
  const std::uint64_t dropped =
      std::atomic_ref<std::uint64_t>(stream_.ring->host.consumer->dropped_records).load(std::memory_order_relaxed);
  const sink_record r{stream_.index, id, rec.header->fingerprint, stamp, payload, payload_bytes, dropped};
  for (auto& sink : state_.sinks) sinks_full_ = sink->record(r, point, entry) || sinks_full_;
}

DEVTAP_FUNC void device_reader::end_stream() {
  refresh_table();
  // Before any consumer's end, which may take long; given up on during the merge's call: no ends.
  if (!pass_on_staged(false)) return count_lost();
  for (auto& entry : table_) {
    if (stream_.abandoned.load(std::memory_order_acquire)) return count_lost();  // during the last end: no more
    try {
      entry->finish(stream_.index, *stream_.dev);
    } catch (...) {
      state_.record_failure(stream_, entry->name, std::current_exception());
    }
  }
  stream_.consumed.store(reader_.position(), std::memory_order_release);
  end_answers();
  state_.end_sinks(stream_);
  log(log_level::debug, "receiver '{}': stream of {} ended", state_.name, stream_.device_name);
  state_.mark_done(stream_.finished);
}

DEVTAP_FUNC bool device_reader::pass_on_staged(bool lost) {
  staged_ = false;
  for (int step = lost ? 1 : 0; step < 2; ++step)  // post to every merge, then hand in (reader.hpp)
    for (consumer_entry* entry : staging_consumers_) try {
        step == 0 ? entry->post_staged(stream_.index) : entry->pass_on_staged(stream_.index, lost);
      } catch (...) {
        state_.record_failure(stream_, entry->name, std::current_exception());
      }
  return !stream_.abandoned.load(std::memory_order_acquire);
}

DEVTAP_FUNC void device_reader::count_lost() {
  pass_on_staged(true);  // close() gave up on this device: what was set aside is counted, not delivered
  publish_progress();
  std::uint64_t lost = 0;
  // Up to the tail: a producer that claimed before the ring closed may still be writing, and what
  // others committed behind it counts too (claims since are aborted: skips). One still writing after
  // half the grace is not waited for (docs/outfeed.md). A tail that cannot be read: what is committed.
  const auto give_up_at = std::chrono::steady_clock::now() + close_grace / 2;
  std::optional<std::uint64_t> tail;
  try {
    tail = stream_.ring->claimed_position(give_up_at);
  } catch (const std::exception&) {  // (out of the reader's thread it would end the process)
  }
  while (!tail || static_cast<std::int64_t>(*tail - reader_.position()) > 0) {
    const record_ref rec = reader_.peek();
    if (rec.kind == record_kind::malformed || (rec.kind == record_kind::empty && (!tail || std::chrono::steady_clock::now() > give_up_at)))
      break;
    if (rec.kind == record_kind::empty) {
      std::this_thread::yield();
      continue;
    }
    if (rec.kind == record_kind::data && rec.header->consumer_id != end_of_stream_id) ++lost;
    reader_.release(rec);
  }
  reader_.publish();
  end_answers();
  stream_.lost_at_close.fetch_add(lost, std::memory_order_relaxed);  // (a merged consumer counts what it held)
  if (lost != 0) {
    log(log_level::error, "receiver '{}': {} record(s) left on {} {} were not delivered", state_.name, lost, stream_.device_name,
        state_.open_failed.load(std::memory_order_relaxed) ? "when the receiver failed to open" : "after close() gave up on it");
    state_.mark(stream_, marker_kind::lost, lost, "records left in the ring when close() gave up on the device");
  }
  state_.end_sinks(stream_);  // (`reader_exited` follows as the thread leaves run(): receiver_impl.hpp)
}

/** What was wrong with a malformed record, for the report. */
DEVTAP_FUNC std::string describe_malformed(const record_ref& rec) {
  if (rec.stamp_kind != stamp_record && rec.stamp_kind != stamp_discard) return "stamp of unknown kind " + std::to_string(rec.stamp_kind);
  const std::string what = rec.stamp_kind == stamp_record ? "record" : "discarded claim";
  if (rec.bytes != 0) return what + " whose header does not fit in the " + std::to_string(rec.bytes) + " bytes before the ring's end";
  return what + " of length " + std::to_string(rec.length);
}

DEVTAP_FUNC void device_reader::stop_malformed(const record_ref& rec) {
  pass_on_staged(false);  // the records before it were good
  // What the ring holds from the malformed record on cannot be parsed into records (its framing is
  // broken): counted in bytes, from the reader's position to the producers' tail.
  std::string left;
  try {
    if (const auto tail = stream_.ring->claimed_position(std::chrono::steady_clock::now() + std::chrono::milliseconds(100)))
      left = "; " + describe_bytes(*tail - reader_.position()) + " from it on were not delivered";
  } catch (const std::exception&) {  // a GPU that cannot be read: the failure is reported without the count
  }
  stream_.failure = "malformed record on device '" + stream_.device_name + "' at ring offset " +
                    std::to_string(reader_.offset()) + " (" + describe_malformed(rec) + "): its stream was stopped" + left;
  log(log_level::error, "receiver '{}': {}", state_.name, stream_.failure);
  state_.mark(stream_, marker_kind::error, 1, stream_.failure);
  state_.end_sinks(stream_);
  end_answers();  // blocked producers and waiting callers must not wait for a stopped reader
  publish_progress();
  state_.mark_done(stream_.finished);
}

DEVTAP_FUNC void abandon(device_stream& stream) {
  // Closed first: a claim count_lost's look at the tail misses sees it and aborts (partner: host_tap; docs/ring.md).
  close_ring(stream.ring->host, ring_reader_gone);
  stream.abandoned.store(true, std::memory_order_seq_cst);
  stream.thread.request_stop();
  wake_reader(stream.ring->host);
  wake_callers(stream.ring->host);  // even while the reader is still inside a handler
}
}  // namespace detail
DEVTAP_END_NAMESPACE
