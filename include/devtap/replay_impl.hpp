#pragma once
// The definitions of replay's type-independent members (declared in replay.hpp): included by that
// header when header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/receiver/reader.hpp>
#include <devtap/replay.hpp>

#include <algorithm>
#include <exception>
#include <map>
#include <string>
#include <utility>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC std::vector<std::uint32_t> replay::find(std::string_view name, std::uint64_t fingerprint) const {
  reader();  // (throws for a moved-from replay)
  // run() walks consumers_: one added meanwhile (from a consumer) would move the entry it hands a record to.
  if (ran_)
    throw std::logic_error("devtap: replay '" + file_->path() + "': attach() after run() was called (attach every consumer first)");
  std::vector<std::uint32_t> ids;
  std::string known, types;
  bool calls = false, others = false;  // the kinds of the points of this name
  for (const auto& p : file_->points()) {
    if (p.name == name) {
      (p.kind == detail::point_kind::call ? calls : others) = true;
      // A scope consumer got live what was tapped on its own point and every scope record (one id):
      // its replay gets both.
      if (p.fingerprint == fingerprint && p.kind != detail::point_kind::call)
        for (const std::uint32_t id : {p.id, p.kind == detail::point_kind::scope ? detail::scope_record_id : p.id})
          if (std::ranges::find(ids, id) == ids.end()) ids.push_back(id);
      types += (types.empty() ? "" : ", ") + std::to_string(p.fingerprint);
    }
    known += (known.empty() ? "" : ", ") + ("'" + p.name + "'");
  }
  if (!ids.empty()) return ids;
  if (calls && !others)
    throw std::invalid_argument("devtap: replay '" + file_->path() + "': point '" + std::string(name) +
                                "' is a call (receiver::serve): replay re-delivers taps, not calls");
  if (!types.empty())
    throw std::invalid_argument("devtap: replay '" + file_->path() + "': point '" + std::string(name) +
                                "' was recorded with another type than the one attached (fingerprint " + types +
                                "; this T has " + std::to_string(fingerprint) + ")");
  // A recording cut before the point's definition has none: say so, or the name looks wrong.
  const std::string cut = file_->cut_short_at() == 0 ? std::string()
                                                     : "; the recording is cut short at byte " +
                                                           std::to_string(file_->cut_short_at());
  throw std::invalid_argument("devtap: replay '" + file_->path() + "' has no point named '" + std::string(name) +
                              "' (it has " + (known.empty() ? std::string("none") : known) + cut + ")");
}

DEVTAP_FUNC replay_stats replay::run() {
  reader();  // (throws for a moved-from replay)
  if (std::exchange(ran_, true))
    throw std::logic_error("devtap: replay '" + file_->path() + "': run() was already called (a replay runs once)");
  // What run() uses, its own: a consumer may destroy the replay (as a receiver's may its receiver).
  const std::shared_ptr<detail::recording_reader> file = file_;
  const std::vector<std::shared_ptr<detail::recorded_device_view>> devices = devices_;
  std::vector<attached> consumers = consumers_;
  replay_stats stats;
  std::vector<consumer_failure> failures;
  // As a receiver keeps them: 16 per consumer and device, the others counted (a consumer that
  // throws on every record of a long recording must not fill memory with exceptions).
  std::map<std::pair<std::string, std::string>, std::uint64_t> thrown;
  auto keep_failure = [&](std::size_t device, const std::string& consumer) {  // inside a catch
    if (++thrown[{devices[device]->name(), consumer}] > detail::receiver_state::kept_failures_per_source) return;
    std::string message = "unknown exception";
    try {
      throw;
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
    }
    failures.push_back({devices[device]->name(), consumer, std::move(message), std::current_exception()});
  };
  auto hand_over = [&](attached& a, std::size_t device, const detail::record_stamp& stamp, const std::byte* payload,
                       std::size_t bytes, std::uint64_t fingerprint) {
    if (fingerprint != a.entry->fingerprint) {  // as live: a record of another type is skipped
      ++stats.type_mismatches;
      return;
    }
    try {
      const detail::delivery result = a.entry->deliver(device, *devices[device], stamp, payload, bytes);
      if (result == detail::delivery::delivered) ++stats.delivered;
      if (result == detail::delivery::mismatch) ++stats.undecodable;
      if (result == detail::delivery::returned_before) ++stats.ignored;
    } catch (...) {
      keep_failure(device, a.entry->name);
    }
  };
  // Records for merged consumers wait here (copied: the reader's chunk is reused) until all are read.
  struct held {
    std::size_t consumer, device;
    detail::record_stamp stamp;
    std::uint64_t fingerprint;
    std::vector<std::uint64_t> payload;  // 8-aligned, as a ring's
    std::size_t bytes;
  };
  std::vector<held> waiting;
  // id -> its consumers: one look-up per record (a hostile file may define a million points of one name).
  std::map<std::uint32_t, std::vector<std::size_t>> consumers_of;
  for (std::size_t i = 0; i < consumers.size(); ++i)
    for (const std::uint32_t id : consumers[i].ids) consumers_of[id].push_back(i);  // (a consumer's ids differ)
  // An error while reading (the file changed since it was opened) still ends every stream, as a
  // normal run does, after merged consumers got what was read: no consumer is left half-way.
  std::exception_ptr read_error;
  try {
    file->for_each([&](const detail::recorded_entry& e) {
      if (e.is_line) return;
      if (e.is_marker) {
        ++stats.markers;
        if (e.marker == detail::marker_kind::dropped) stats.dropped += e.count;
        return;
      }
      ++stats.records;
      if (e.unknown) {  // no consumer took it live
        ++stats.unknown_ids;
        return;
      }
      const auto found = consumers_of.find(e.id);
      if (found == consumers_of.end()) return;
      for (const std::size_t i : found->second) {
        attached& a = consumers[i];
        if (!a.merged) {
          hand_over(a, e.device, e.stamp, e.payload, e.bytes, e.fingerprint);
          continue;
        }
        held h{i, e.device, e.stamp, e.fingerprint, std::vector<std::uint64_t>((e.bytes + 7) / 8), e.bytes};
        if (e.bytes != 0) std::memcpy(h.payload.data(), e.payload, e.bytes);
        waiting.push_back(std::move(h));
      }
    });
  } catch (...) {  // (consumers' exceptions are caught where they are called)
    read_error = std::current_exception();
  }
  std::stable_sort(waiting.begin(), waiting.end(), [](const held& a, const held& b) {
    return std::tie(a.stamp.time_ns, a.device, a.stamp.sequence) < std::tie(b.stamp.time_ns, b.device, b.stamp.sequence);
  });
  stats.cut_short_at = file->cut_short_at();
  for (const held& h : waiting)
    hand_over(consumers[h.consumer], h.device, h.stamp, reinterpret_cast<const std::byte*>(h.payload.data()), h.bytes,
              h.fingerprint);
  for (attached& a : consumers)  // every stream ends: coroutines see the end, as live
    for (std::size_t d = 0; d < devices.size(); ++d) {
      try {
        a.entry->finish(d, *devices[d]);
      } catch (...) {
        keep_failure(d, a.entry->name);
      }
    }
  for (const auto& [source, n] : thrown)
    if (n > detail::receiver_state::kept_failures_per_source)
      failures.push_back({source.first, source.second,
                          std::to_string(n - detail::receiver_state::kept_failures_per_source) +
                              " more exception(s), not kept (" + std::to_string(n) + " in all)",
                          {}});
  if (read_error) {
    if (failures.empty()) std::rethrow_exception(read_error);
    std::string what;  // both: the file's error first, the consumers' after it
    try {
      std::rethrow_exception(read_error);
    } catch (const std::exception& e) {
      what = e.what();
    }
    what += "\n  (and " + std::to_string(failures.size()) + " consumer failure(s):";
    for (const auto& f : failures) what += "\n  [" + f.device + "] " + f.consumer + ": " + f.message;
    throw std::runtime_error(what + ")");
  }
  if (!failures.empty()) {
    std::string what = "devtap: replay '" + file->path() + "': " + std::to_string(failures.size()) + " consumer failure(s):";
    for (const auto& f : failures) what += "\n  [" + f.device + "] " + f.consumer + ": " + f.message;
    throw tap_error(what, std::move(failures));
  }
  return stats;
}

DEVTAP_END_NAMESPACE
