#pragma once
// The definitions of receiver's type-independent members (declared in receiver.hpp): included by
// receiver.hpp when header-only, compiled once into the library in compiled mode.
#include <devtap/receiver/device_work.hpp>
#include <devtap/receiver/receiver.hpp>

#include <optional>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC receiver::receiver(receiver_options options) : state_(std::make_shared<detail::receiver_state>()) {
  state_->name = options.name.empty() ? std::string("receiver") : options.name;
  std::vector<device*> devs = detail::checked_receiver_devices(options, state_->name);
  const std::uint64_t capacity = detail::ring_capacity_of(options.budget_bytes, devs.size(), state_->name);
  state_->options = std::move(options);
  const std::vector<std::string> names = detail::names_within(devs);  // what stats, reports and files call them
  {  // before any device is attached: a file that cannot be opened leaves nothing behind (each is
     // emptied only once the receiver has its devices: record_sink::start)
    const std::uint64_t origin = detail::stamp_now_ns();
    std::vector<detail::recorded_device> recorded;
    for (std::size_t i = 0; i < devs.size(); ++i) recorded.push_back({devs[i]->id(), std::string(devs[i]->platform()), names[i]});
    if (!state_->options.trace_file.empty())
      state_->sinks.push_back(std::make_unique<detail::trace_writer>(state_->options.trace_file, state_->name, names, origin));
    if (!state_->options.record_file.empty())
      state_->sinks.push_back(std::make_unique<detail::recording_writer>(state_->options.record_file, state_->name, recorded,
                                                                         state_->options.timestamps, origin));
  }

  for (std::size_t i = 0; i < devs.size(); ++i) {
    auto stream = std::make_unique<detail::device_stream>();
    stream->dev = devs[i];
    stream->index = i;
    stream->device_name = names[i];
    stream->ring = detail::allocate_checked_ring(*devs[i], capacity, state_->name, names[i]);
    (void)devs[i]->work_failure_since(stream->work_failures_seen);  // only later failures are this receiver's
    if (state_->options.timestamps) stream->ring->calibrate_clock();  // a GPU's clock against the host's
    // The ring's copy of the name, not the stream's or the device's: a tap that fails after the
    // receiver, or the device's client, is gone still names it.
    stream->ring->device_name = names[i];
    stream->out = devtap::outfeed(stream->ring->producer, state_->options.overflow, stream->ring->device_name.c_str(),
                                  stream->ring->host_can_produce && devs[i]->host_can_tap(), state_->id,
                                  state_->options.timestamps);
    state_->streams.push_back(std::move(stream));
  }
  // Attached in one order for every receiver (the devices' addresses): of two receivers opened at
  // once on shared devices, the one that takes the first shared device gets all of them, instead of
  // each taking some and both giving up.
  std::vector<detail::device_stream*> by_address;
  for (auto& stream : state_->streams) by_address.push_back(stream.get());
  std::sort(by_address.begin(), by_address.end(),
            [](const detail::device_stream* a, const detail::device_stream* b) { return std::less<>{}(a->dev, b->dev); });
  std::size_t attached = 0;
  auto give_up = [&] {  // as close() leaves a device: work that found the outfeed meanwhile is refused, not stranded
    for (std::size_t j = 0; j < attached; ++j) {
      detail::device_stream& stream = *by_address[j];
      // No reader will read it (none started, or abandoned and joined): a call gives up at reader_gone.
      detail::close_ring(stream.ring->host, detail::ring_reader_gone), detail::wake_callers(stream.ring->host);
      stream.dev->detach(&stream.out);
      stream.dev->retire_ring(stream.ring);
      (void)detail::post_after_pending_work(*stream.dev, [keep = state_] {}, state_);
    }
    state_->sinks.clear();  // now, not with the state: files this receiver made go before it throws
  };
  for (; attached < by_address.size(); ++attached)
    if (!by_address[attached]->dev->try_attach(&by_address[attached]->out)) {
      give_up();
      throw outfeed_error("devtap: device '" + by_address[attached]->device_name +
                          "' already has a receiver attached (at most one receiver per device at once)");
    }
  auto stop_readers_and_give_up = [&] {
    state_->open_failed.store(true, std::memory_order_relaxed);  // (seen by each reader after its abandon)
    for (auto& stream : state_->streams)
      if (stream->thread.joinable()) detail::abandon(*stream), stream->thread.join();
    give_up();
  };
  try {  // a thread that cannot start (EAGAIN), a list that cannot grow: no device stays attached
    for (auto& stream : state_->streams) {
      stream->thread = std::jthread([state = state_, s = stream.get()](std::stop_token st) {
        struct exit_mark {  // on every way out of run(): a reader close() let go is not running any more
          detail::device_stream& stream;
          ~exit_mark() { stream.reader_exited.store(true, std::memory_order_release); }
        } const mark{*s};
        detail::device_reader(*state, *s).run(st);
      });
      stream->reader_id = stream->thread.get_id();
    }
    detail::reserve_open();
  } catch (...) {
    stop_readers_and_give_up();
    try {
      throw;
    } catch (const std::exception& e) {
      throw outfeed_error("devtap: receiver '" + state_->name + "' could not start its readers: " + e.what());
    }
  }
  try {  // files last (readers buffer till then), the recording first (only its start refuses): failing leaves them as they were
    for (auto sink = state_->sinks.rbegin(); sink != state_->sinks.rend(); ++sink) (*sink)->start();
    detail::add_open(state_);
  } catch (...) {
    stop_readers_and_give_up();
    throw;
  }
  log(log_level::debug, "receiver '{}' started on {} device(s), {} ring each, overflow policy {}", state_->name,
      state_->streams.size(), detail::describe_bytes(capacity), detail::policy_name(state_->options.overflow));
}

DEVTAP_FUNC receiver::~receiver() {
  if (state_->closed.load(std::memory_order_acquire)) {
    detail::forget_closed(*state_);
    return;
  }
  if (const char* where = inside()) {  // close() would wait for this very thread: give up at once
    // Unless a close() on another thread (a client's destructor, the exit handler) holds it: that
    // close drains it once this thread returns. Abandoned under the close's lock, so such a close
    // that comes later waits before the devices go, and on the closing list, so that a client
    // destroyed meanwhile waits too.
    const detail::closing_mark abandoning(state_);
    const std::unique_lock claim(state_->close_mutex, std::try_to_lock);
    if (!claim.owns_lock() || !state_->close_once()) return;
    log(log_level::error, "receiver '{}' destroyed from {}: its streams are abandoned, not drained", state_->name,
        where);
    detail::abandon_receiver(state_);
    return;
  }
  // Off the open list, onto the closing one in one step (close() below, or the exit handler's: not
  // both): a client destroyed meanwhile elsewhere waits for this close (on no list, it did not).
  std::optional<detail::closing_mark> closing;
  try {
    closing.emplace(state_);
  } catch (...) {  // (the list could not grow)
    detail::forget(*state_);
  }
  try {
    close();
  } catch (const std::exception& e) {
    closing.reset();  // closed: a log sink that destroys a client must not find it still closing
    log(log_level::error, "receiver '{}' destroyed without close(); close() would have thrown: {}", state_->name, e.what());
  } catch (...) {
    closing.reset();
    log(log_level::error, "receiver '{}' destroyed without close(); close() would have thrown", state_->name);
  }
}

DEVTAP_FUNC std::vector<device*> receiver::devices() const {
  std::vector<device*> out;
  for (const auto& stream : state_->streams) out.push_back(stream->dev);
  return out;
}

DEVTAP_FUNC void receiver::flush() {
  refuse_inside("flush()", false);
  if (state_->closed.load(std::memory_order_acquire)) return;  // nothing more will be consumed
  flush_until(detail::deadline_after(state_->options.close_timeout), "flush()");
}

DEVTAP_FUNC void receiver::barrier() {
  refuse_inside("barrier()", !state_->closed.load(std::memory_order_acquire));  // (once closed, its devices may be gone)
  if (state_->closed.load(std::memory_order_acquire)) return;                   // its streams ended
  const auto deadline = detail::deadline_after(state_->options.close_timeout);
  const detail::barrier_waiting counted(*state_);
  const std::vector<std::string> busy = detail::wait_for_pending_work(state_->streams, deadline);
  if (!busy.empty())
    throw timeout_error("devtap: receiver '" + state_->name + "': barrier() timed out after " +
                            std::to_string(state_->options.close_timeout.count()) +
                            " ms; devices whose work did not finish: " + detail::join(busy, std::identity{}),
                        busy);
  flush_until(deadline, "barrier()");
}

DEVTAP_FUNC void receiver::close() { detail::close_receiver(state_); }

DEVTAP_FUNC void detail::close_receiver(std::shared_ptr<receiver_state> keep) {  // (owned: a consumer may destroy the receiver)
  auto& state = *keep;
  std::unique_lock closing(state.close_mutex, std::defer_lock);
  // User code that close() runs on its own thread (a log sink) holds the lock already: refused
  // first, as try_lock on a mutex this thread holds is undefined.
  if (inside(state, false) != nullptr) refuse_inside(state, "close()", true);
  if (!closing.try_lock()) {  // another close() runs: wait for it to finish, unless it waits for us
    refuse_inside(state, "close()", true);
    closing.lock();
  }
  if (state.closed.load(std::memory_order_relaxed)) return;
  refuse_inside(state, "close()", true);
  // What may fail to allocate comes before the mark and the claim: once claimed, every stream must
  // reach its end; before, a receiver close() could not claim stays open (on the open list).
  std::vector<std::function<void()>> ends_after_work;  // each run on its device once its pending work is done
  ends_after_work.reserve(state.streams.size());
  for (auto& stream : state.streams)
    ends_after_work.emplace_back([keep, s = stream.get()] {
      if (s->ended_by_close.exchange(true, std::memory_order_acq_rel)) return;  // (a device that calls it twice)
      s->work_failure = s->dev->work_failure_since(s->work_failures_seen);
      keep->mark_done(s->work_done);  // before the end the reader sees
      if (!s->ring->host_can_produce) return detail::end_without_marker(*s);
      detail::write_end_marker(s->ring->host);
      s->dev->detach(&s->out);  // on the device's own executor: later work there sees no receiver
    });
  std::vector<std::string> stuck;
  stuck.reserve(state.streams.size());
  const closing_mark still_closing(keep);  // (until close() returns: a client must not free the devices)
  // Claimed at once, not only checked: a receiver destroyed from its consumer (abandon) or closed
  // by another thread (close_open_receivers, without this receiver) must not be closed twice.
  if (!state.close_once()) return;
  struct closing_here {  // inside() tells this thread apart while close() runs
    detail::receiver_state& state;
    ~closing_here() { state.closing_thread.store(std::thread::id(), std::memory_order_relaxed); }
  } const mark_closing{state};
  state.closing_thread.store(std::this_thread::get_id(), std::memory_order_relaxed);
  for (std::size_t i = 0; i < state.streams.size(); ++i)
    // A device that cannot queue it (out of memory, a user backend's error) is ended here and now:
    // close() must still reach the joins, detaches and reports below.
    if (std::string why = detail::post_after_pending_work(*state.streams[i]->dev, std::move(ends_after_work[i]), keep); !why.empty())
      detail::end_stream_without_waiting(state, *state.streams[i], why);
  const auto deadline = detail::deadline_after(state.options.close_timeout);
  {
    std::unique_lock lock(state.done_mutex);
    state.done_cv.wait_until(lock, deadline, [&] {
      return std::all_of(state.streams.begin(), state.streams.end(), [](const auto& stream) {
        return stream->finished.load(std::memory_order_acquire) && stream->work_done.load(std::memory_order_acquire);
      });
    });
  }
  for (auto& stream : state.streams) {
    stream->work_done_in_time = stream->work_done.load(std::memory_order_acquire);
    if (stream->finished.load(std::memory_order_acquire)) {
      stream->thread.join();
      // Its stream stopped early (a malformed record), and the device's work outlived the timeout.
      if (!stream->work_done_in_time) stuck.push_back(stream->device_name);
    } else {
      stuck.push_back(stream->device_name);
      detail::abandon(*stream);
    }
    stream->dev->detach(&stream->out);
    stream->dev->retire_ring(stream->ring);
  }
  // A reader stuck inside a consumer cannot be joined without hanging: give them all one moment to
  // count what they leave, then let them go (each owns a reference to the state: nothing is freed).
  const auto grace_end = std::chrono::steady_clock::now() + detail::close_grace;
  bool left_running = false;
  for (auto& stream : state.streams) {
    if (!stream->thread.joinable()) continue;
    while (!stream->reader_exited.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < grace_end)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (stream->reader_exited.load(std::memory_order_acquire)) stream->thread.join();
    else stream->thread.detach(), left_running = true;
  }
  {  // consumers that hold records back (merged) deliver them now, not after close() returned
    std::vector<std::shared_ptr<detail::consumer_entry>> entries;
    {
      std::lock_guard lock(state.table_mutex);
      entries = state.entries;
    }
    // On their helpers, bounded as for readers (merged_entry.hpp); one may destroy the receiver
    // (from here on, close() touches the state only).
    for (auto& entry : entries) entry->close_held();
    left_running = left_running || std::ranges::any_of(entries, [](const auto& e) {
      const auto calling = e->call_running_flag().lock();  // (seq_cst: partner merged_entry's may_call)
      return calling && calling->load(std::memory_order_seq_cst);
    });
  }
  if (left_running) detail::note_left_running(keep);  // a client destroyed meanwhile keeps its devices
  // A host thread whose tap found the ring full as the stream ended may count its drop after the
  // reader told the files: they are told the rest now, so they count what stats() counts.
  for (const auto& stream : state.streams)
    if (!stream->abandoned.load(std::memory_order_relaxed)) {  // (its reader finished: joined above)
      const std::uint64_t dropped =
          std::atomic_ref<std::uint64_t>(stream->ring->host.consumer->dropped_records).load(std::memory_order_relaxed);
      if (dropped > stream->dropped_told_sinks)
        state.mark(*stream, detail::marker_kind::dropped, dropped - stream->dropped_told_sinks, "taps the device did not write");
    }
  std::vector<consumer_failure> file_failures = detail::close_sinks(state, !stuck.empty(), deadline);
  for (auto& stream : state.streams)  // nobody reads these rings any more: give their pages back
    if (!stream->abandoned.load(std::memory_order_relaxed) || stream->reader_exited.load(std::memory_order_acquire))
      stream->ring->release_memory();
  std::vector<std::string> stuck_described;
  for (const auto& stream : state.streams)
    if (!stream->abandoned.load(std::memory_order_relaxed) && !stream->work_done_in_time)
      stuck_described.push_back(stream->device_name + " (its work did not finish; its stream had already stopped at a malformed record)");
    else if (stream->abandoned.load(std::memory_order_relaxed))
      stuck_described.push_back(
          stream->device_name +
          (stream->reader_exited.load(std::memory_order_acquire)
               ? " (" + std::to_string(stream->lost_at_close.load(std::memory_order_relaxed)) + " records not delivered)"
               : " (its reader has not stopped yet: a consumer call, or a write to the trace or record file, may still be "
                 "running; what its ring holds is counted in stats().lost_at_close)"));
  std::vector<consumer_failure> failures = detail::collect_failures(state, std::move(file_failures));
  std::string errors;
  for (const auto& f : failures) errors += "\n  [" + f.device + "] " + f.consumer + ": " + f.message;
  if (!stuck.empty())
    throw timeout_error("devtap: receiver '" + state.name + "': close() timed out after " +
                            std::to_string(state.options.close_timeout.count()) +
                            " ms; devices that did not finish: " + detail::join(stuck_described, std::identity{}) +
                            (errors.empty() ? "" : "; also:" + errors),
                        stuck);
  if (!failures.empty()) {
    const std::size_t count = failures.size();  // before the move below: argument order is unspecified
    throw tap_error("devtap: receiver '" + state.name + "': " + std::to_string(count) + " consumer failure(s):" + errors,
                    std::move(failures));
  }
}

DEVTAP_FUNC receiver_stats receiver::stats() const {
  receiver_stats st;
  for (const auto& stream : state_->streams) {
    device_stats d;
    d.device = stream->device_name;
    d.records = stream->records.load(std::memory_order_relaxed);
    d.bytes = stream->bytes.load(std::memory_order_relaxed);
    d.unknown_ids = stream->unknown_ids.load(std::memory_order_relaxed);
    d.type_mismatches = stream->mismatches.load(std::memory_order_relaxed);
    d.consumer_errors = stream->consumer_errors.load(std::memory_order_relaxed);
    d.ignored = stream->ignored.load(std::memory_order_relaxed);
    d.lost_at_close = stream->lost_at_close.load(std::memory_order_relaxed);
    d.clock_error_ns = stream->ring->clock_error_ns;
    auto* words = stream->ring->host.consumer;
    d.dropped_records = std::atomic_ref<std::uint64_t>(words->dropped_records).load(std::memory_order_relaxed);
    d.dropped_bytes = std::atomic_ref<std::uint64_t>(words->dropped_bytes).load(std::memory_order_relaxed);
    d.call_slot_waits = std::atomic_ref<std::uint64_t>(words->reply_slot_waits).load(std::memory_order_relaxed);
    if (stream->finished.load(std::memory_order_acquire) && !stream->failure.empty()) {
      d.stream_failed = true;
      d.failure = stream->failure;
    }
    st.devices.push_back(std::move(d));
  }
  return st;
}

DEVTAP_FUNC const char* detail::inside(const receiver_state& state, bool devices_too) {
  if (receiver_read_here == state.id) return "a consumer of this receiver";  // a reader, or a merged consumer's helper
  if (state.closing_thread.load(std::memory_order_relaxed) == std::this_thread::get_id())
    return "a consumer of this receiver";  // user code that close() runs (a log sink)
  for (const auto& stream : state.streams) {
    if (stream->reader_id == std::this_thread::get_id()) return "a consumer of this receiver";
    if (devices_too && stream->dev->runs_on_this_thread()) return "the work of one of its devices";
  }
  return nullptr;
}

DEVTAP_FUNC void detail::refuse_inside(const receiver_state& state, const char* call, bool devices_too) {
  if (const char* where = inside(state, devices_too))
    throw std::logic_error(std::string("devtap: receiver '") + state.name + "': " + call + " called from " + where +
                           ", which it would wait for; call it from another thread");
}

DEVTAP_FUNC void detail::abandon_receiver(const std::shared_ptr<receiver_state>& state) {
  {  // no consumer is called again: a merged one's held records with them (its helper runs on)
    std::lock_guard lock(state->table_mutex);
    for (auto& entry : state->entries) entry->abandon_held();
  }
  for (auto& stream : state->streams) {
    detail::abandon(*stream);
    stream->dev->detach(&stream->out);
    stream->dev->retire_ring(stream->ring);
    // Work already running on the device may still be inside a tap or a call that reads this
    // stream: the state lives until that work is done, as close() keeps it.
    (void)detail::post_after_pending_work(*stream->dev, [keep = state] {}, state);
    // Also the calling reader's own thread (destroyed from a consumer): it then frees the state
    // when it returns, and a joinable jthread there would join itself.
    if (stream->thread.joinable()) stream->thread.detach();
  }
  note_left_running(state);  // its readers (this thread's among them) may still be inside consumers
  // The trace and the recording are completed when the state goes, after the last reader (each
  // reader ends its device's part as it exits): closing them now would drop what readers still hold.
}

DEVTAP_FUNC void receiver::name_scope(std::uint32_t id, std::string_view name) {
  for (auto& sink : state_->sinks) sink->name_scope(id, name);
}

DEVTAP_FUNC void receiver::flush_until(std::chrono::steady_clock::time_point deadline, const char* call) {
  std::vector<std::optional<std::uint64_t>> targets;  // each device's position, read within the deadline (none: behind)
  for (const auto& stream : state_->streams) targets.push_back(detail::flush_target_of(*stream, deadline));
  for (auto pause = std::chrono::microseconds(1);; pause = std::min(pause * 2, std::chrono::microseconds(500))) {
    std::vector<std::string> behind;
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const auto& stream = *state_->streams[i];
      if (stream.finished.load(std::memory_order_acquire)) continue;
      const std::uint64_t done = stream.consumed.load(std::memory_order_acquire);
      if (!targets[i]) behind.push_back(stream.device_name + " (its position could not be read in time)");
      else if (static_cast<std::int64_t>(done - *targets[i]) < 0) behind.push_back(stream.device_name);
    }
    if (behind.empty()) behind = detail::write_sinks_out(*state_, deadline);  // then the files are written
    if (behind.empty()) return;
    if (std::chrono::steady_clock::now() > deadline)
      throw timeout_error("devtap: receiver '" + state_->name + "': " + call + " timed out; devices behind: " +
                              detail::join(behind, std::identity{}),
                          behind);
    std::this_thread::sleep_for(pause);
  }
}

DEVTAP_FUNC detail::device_stream& receiver::stream_of(const device& dev) const {
  for (const auto& stream : state_->streams)
    if (stream->dev == &dev) return *stream;
  throw std::invalid_argument("devtap: device '" + dev.name() + "' is not drained by receiver '" + state_->name + "'");
}

DEVTAP_END_NAMESPACE

// The list of open receivers: what the exit handler and clients' destructors close.
#include <devtap/receiver/open_receivers_impl.hpp>
