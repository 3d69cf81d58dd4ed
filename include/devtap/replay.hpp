#pragma once
/** `devtap::replay`: re-delivers a recording (receiver_options::record_file) to consumers attached
 *  by tap-point name, with the type checks and the tap_info of the live run — offline analysis.
 *
 *     devtap::replay rp("run.devtap");
 *     rp.attach<float>("loss", [](const float& v, const devtap::tap_info& info) { ... });
 *     rp.run();
 */
#include <devtap/backend/device.hpp>
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/receiver/recording.hpp>
#include <devtap/tap/fingerprint.hpp>

#include <algorithm>
#include <cstring>
#include <tuple>
#include <cstdint>
#include <map>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
/** A device of a recording: its id, platform and name, for tap_info; it runs nothing. */
class recorded_device_view final : public device {
public:
  recorded_device_view(const recorded_device& d) : device(d.id, d.platform, d.name, 0) {}
  std::unique_ptr<ring_allocation> allocate_ring(std::uint64_t) override {
    throw std::logic_error("devtap: a replayed device '" + name() + "' has no ring");
  }
  void after_pending_work(std::function<void()> fn) override { fn(); }
};
}  // namespace detail

/** Counts of one `replay::run()`. */
struct replay_stats {
  std::uint64_t records = 0;     ///< records in the recording (every point's)
  std::uint64_t delivered = 0;   ///< handed to an attached consumer (once per consumer)
  /** Records no consumer took live (the receiver's `unknown_ids`, or for a tap on a handler's id
   *  its `type_mismatches`): skipped, even where a point defined later has their id. Recordings of
   *  format version 1 and 2 do not mark them: 0. */
  std::uint64_t unknown_ids = 0;
  /** Records of an attached point tapped with another type than its consumer's: skipped, once per
   *  consumer (live, one of the receiver's `type_mismatches` per record). */
  std::uint64_t type_mismatches = 0;
  /** Records for a coroutine consumer that had already returned: skipped, once per consumer (the
   *  receiver's `ignored`). */
  std::uint64_t ignored = 0;
  /** Records of an attached point and type whose bytes do not decode as it (a damaged file: a
   *  size or span count that does not fit, a bool neither 0 nor 1): skipped, not delivered. */
  std::uint64_t undecodable = 0;
  std::uint64_t markers = 0;     ///< drops, losses and errors the recording marks
  std::uint64_t dropped = 0;     ///< taps the devices did not write, as the markers count them
  /** Where the recording stops short (mid-chunk, or without the end chunk close() writes: its
   *  writer stopped there, e.g. a crash), or 0: the records before it were delivered. */
  std::uint64_t cut_short_at = 0;
};

/** A recording, opened for re-delivery. Not thread-safe; consumers run on the thread of `run()`. */
class replay {
public:
  /** Opens and checks the recording; throws std::runtime_error naming the file and what is wrong. */
  explicit replay(std::string path) : file_(std::make_shared<detail::recording_reader>(std::move(path))) {
    for (const auto& d : file_->devices()) devices_.push_back(std::make_shared<detail::recorded_device_view>(d));
  }
  /** Not copyable (a copy would share the file's reading position and the consumers); movable. A
   *  moved-from replay throws std::logic_error from attach() and run(), and reads as empty. */
  replay(const replay&) = delete;
  replay& operator=(const replay&) = delete;
  replay(replay&&) noexcept = default;
  replay& operator=(replay&& other) noexcept {
    if (this != &other) {  // (defaulted, a self-move emptied the vectors and kept the file)
      file_ = std::move(other.file_);
      devices_ = std::move(other.devices_);
      consumers_ = std::move(other.consumers_);
      ran_ = other.ran_;
    }
    return *this;
  }

  /** Attaches a consumer of T to the recorded points named `point` (the name given to
   *  receiver::attach) whose type is T (several live points may share a name), in the forms
   *  receiver::attach takes: a coroutine (one per device) or a callable. Throws
   *  std::invalid_argument when the recording has no point of that name, or none of type T. */
  template <class T, class Fn>
  void attach(std::string_view point, Fn fn) {
    add<T>(point, std::move(fn), false, false);
  }
  /** As above, one instance fed by every device, one record at a time in the recording's order. */
  template <class T, class Fn>
  void attach(std::string_view point, Fn fn, shared_t) {
    add<T>(point, std::move(fn), true, false);
  }
  /** As above, one instance fed in the order the records were tapped (ties: device, then sequence),
   *  as receiver::attach(fn, merged) does; the recording must have timestamps. */
  template <class T, class Fn>
  void attach(std::string_view point, Fn fn, merged_t) {
    if (!reader().timestamps())
      throw std::logic_error("devtap: replay '" + file_->path() + "': attach(..., devtap::merged) needs a recording made with "
                             "receiver_options::timestamps = true");
    add<T>(point, std::move(fn), true, true);
  }

  /** Delivers every record to the consumers of its point, device by device in the order each
   *  device's were read (merged consumers: in tap order, after the others), then ends every
   *  stream. Throws tap_error listing what the consumers threw (each keeps being called, as live).
   *  A file that changed since it was opened (shrunk, or its definitions rewritten by another
   *  receiver) throws std::runtime_error, after every stream has ended (a shrunk one: before any
   *  record is delivered).
   *  Once: a second call throws std::logic_error (the consumers' streams have ended). */
  replay_stats run();

  /** The recorded devices, in the receiver's order (tap_info::device refers to these). */
  std::vector<const device*> devices() const {
    std::vector<const device*> out;
    for (const auto& d : devices_) out.push_back(d.get());
    return out;
  }
  /** The recording's receiver name, and whether its taps carry timestamps. */
  const std::string& receiver_name() const noexcept {
    static const std::string none;
    return file_ ? file_->receiver_name() : none;
  }
  bool timestamps() const noexcept { return file_ && file_->timestamps(); }
  /** The names of the recorded points (taps, calls, printers, "scope"). */
  std::vector<std::string> point_names() const {
    std::vector<std::string> out;
    if (file_)
      for (const auto& p : file_->points()) out.push_back(p.name);
    return out;
  }
  /** The names a kernel's scope ids were given (receiver::name_scope), by id: a replayed
   *  scope_event of a kernel carries only its id, as it did live. */
  const std::map<std::uint32_t, std::string>& scope_names() const noexcept {
    static const std::map<std::uint32_t, std::string> none;
    return file_ ? file_->scope_names() : none;
  }

private:
  // The file, for what acts on it: a moved-from replay has none.
  const detail::recording_reader& reader() const {
    if (!file_) throw std::logic_error("devtap: replay: used after it was moved from");
    return *file_;
  }

  struct attached {
    std::vector<std::uint32_t> ids;  // the recorded points of its name and type
    std::shared_ptr<detail::consumer_entry> entry;
    bool merged;
  };

  template <class T, class Fn>
  void add(std::string_view name, Fn fn, bool one_instance, bool merged) {
    static_assert(detail::check_consumer<T, Fn>());  // one message at the user's line, as receiver::attach
    std::vector<std::uint32_t> ids = find(name, type_fingerprint_v<T>);
    const std::size_t n = devices_.size();
    std::shared_ptr<detail::consumer_entry> entry;
    if constexpr (detail::coroutine_factory<T, Fn>)
      entry = std::make_shared<detail::coroutine_entry<T, Fn>>(std::string(name), std::move(fn), one_instance, devices());
    else
      entry = std::make_shared<detail::callable_entry<T, Fn>>(std::string(name), std::move(fn), one_instance, n);
    consumers_.push_back({std::move(ids), std::move(entry), merged});
  }

  std::vector<std::uint32_t> find(std::string_view name, std::uint64_t fingerprint) const;

  // Shared with run(), which keeps them: a consumer may destroy the replay, as a receiver's may.
  std::shared_ptr<detail::recording_reader> file_;
  std::vector<std::shared_ptr<detail::recorded_device_view>> devices_;
  std::vector<attached> consumers_;
  bool ran_ = false;
};

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/replay_impl.hpp>
#endif
