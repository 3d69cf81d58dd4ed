#pragma once
// The definitions of what close() reports (declared in report.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/receiver/report.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

DEVTAP_FUNC std::string sticky_error_text(const device_stream& stream) {
  auto* words = stream.ring->host.consumer;
  const std::uint32_t code = std::atomic_ref<std::uint32_t>(words->sticky_error).load(std::memory_order_acquire);
  const std::uint32_t detail_value = std::atomic_ref<std::uint32_t>(words->sticky_detail).load(std::memory_order_relaxed);
  std::string text;
  if (code & sticky_record_too_large)
    text += "a tap on the device refused a record of " + std::to_string(detail_value) +
            " bytes: larger than the device accepts (" +
            describe_bytes(max_record_bytes(stream.ring->host.capacity) - sizeof(record_header)) +
            "); raise receiver_options::budget_bytes";
  if (code & sticky_ring_full)
    text += std::string(text.empty() ? "" : "; ") + "taps on the device found its ring full (overflow_policy::error)";
  if (code & sticky_stale_point)
    text += std::string(text.empty() ? "" : "; ") +
            "taps through a tap_point of another receiver, or of none, were dropped (counted in dropped_records)";
  return text;
}

DEVTAP_FUNC void add_stream_failures(const device_stream& stream, const std::vector<std::shared_ptr<consumer_entry>>& entries,
                                std::vector<consumer_failure>& failures) {
  const bool reader_done =
      stream.finished.load(std::memory_order_acquire) || stream.reader_exited.load(std::memory_order_acquire);
  if (reader_done && !stream.failure.empty()) failures.push_back({stream.device_name, "(stream)", stream.failure, {}});
  // Written on the device before `work_done` (close() read it with acquire); a device whose work
  // outlived close()'s wait may write it now.
  if (stream.work_done_in_time && !stream.work_failure.empty())
    failures.push_back({stream.device_name, "(device work)",
                        stream.work_failure + " (records its work tapped may be missing)", {}});
  if (std::string sticky = sticky_error_text(stream); !sticky.empty())
    failures.push_back({stream.device_name, "(device)", std::move(sticky), {}});
  if (!reader_done) return;
  for (const auto& [id, count] : stream.unknown_by_id) {
    const std::string what = (id & call_id_flag) ? " call(s) for " + unknown_id_text(id) + " refused (answered call_errc::no_handler)"
                                                 : " record(s) for " + unknown_id_text(id) + " skipped";
    failures.push_back({stream.device_name, "#" + std::to_string(id & ~(call_id_flag | stamped_id_flag)),
                        std::to_string(count) + what, {}});
  }
  for (const auto& [id, count] : stream.mismatch_by_id) {
    const std::uint32_t index = (id & ~call_id_flag) - 1;
    const std::string what = (id & call_id_flag) ? " call(s) whose types do not match the handler's refused (answered "
                                                   "call_errc::type_mismatch)"
                                                 : " record(s) that do not match the consumer's type skipped";
    failures.push_back({stream.device_name, index < entries.size() ? entries[index]->name : "#" + std::to_string(id & ~call_id_flag),
                        std::to_string(count) + what, {}});
  }
}

DEVTAP_FUNC std::vector<consumer_failure> close_sinks(receiver_state& state, bool readers_given_up,
                                                     std::chrono::steady_clock::time_point deadline) {
  const auto now = std::chrono::steady_clock::now();
  const auto give_up_at = readers_given_up ? now + close_grace / 2 : std::chrono::steady_clock::time_point::max();
  // A pipe or device: close()'s own writes wait until its deadline, and at least half a grace.
  const auto pipe_deadline =
      deadline == std::chrono::steady_clock::time_point::max() ? deadline : std::max(deadline, now + close_grace / 2);
  std::vector<consumer_failure> failures;
  for (auto& sink : state.sinks)
    if (std::string error = sink->close(give_up_at, pipe_deadline); !error.empty()) {
      log(log_level::error, "receiver '{}': {}", state.name, error);
      failures.push_back({"(all devices)", "receiver_options", std::move(error), {}});
    }
  return failures;
}

DEVTAP_FUNC std::vector<std::string> write_sinks_out(receiver_state& state, std::chrono::steady_clock::time_point deadline) {
  if (state.sinks.empty()) return {};
  std::vector<std::pair<const device_stream*, std::uint64_t>> asked;  // a running reader's stream, the number asked
  for (const auto& stream : state.streams) {
    if (stream->finished.load(std::memory_order_acquire)) continue;  // (its part is close()'s)
    asked.emplace_back(stream.get(), stream->sinks_write_asked.fetch_add(1, std::memory_order_acq_rel) + 1);
    wake_reader(stream->ring->host);  // a sleeping reader looks at the request (reader_sleep's stay_awake)
  }
  for (auto pause = std::chrono::microseconds(1);; pause = std::min(pause * 2, std::chrono::microseconds(500))) {
    std::vector<std::string> behind;
    for (const auto& [stream, number] : asked)
      if (!stream->finished.load(std::memory_order_acquire) &&
          static_cast<std::int64_t>(stream->sinks_written.load(std::memory_order_acquire) - number) < 0)
        behind.push_back(stream->device_name + " (its part of the trace or record file was not written in time)");
    if (behind.empty() || std::chrono::steady_clock::now() > deadline) return behind;
    std::this_thread::sleep_for(pause);
  }
}

DEVTAP_FUNC std::vector<consumer_failure> collect_failures(receiver_state& state, std::vector<consumer_failure> file_failures) {
  std::vector<consumer_failure> failures;
  {
    std::lock_guard lock(state.failures_mutex);
    failures = state.failures;
    failures.insert(failures.end(), file_failures.begin(), file_failures.end());
    for (const auto& [source, thrown] : state.failures_by_source)
      if (thrown > state.kept_failures_per_source)
        failures.push_back({source.first, source.second,
                            std::to_string(thrown - state.kept_failures_per_source) + " more exception(s), not kept (" +
                                std::to_string(thrown) + " in all)",
                            {}});
  }
  std::lock_guard lock(state.table_mutex);
  for (auto& stream : state.streams) add_stream_failures(*stream, state.entries, failures);
  return failures;
}

}  // namespace detail

DEVTAP_END_NAMESPACE
