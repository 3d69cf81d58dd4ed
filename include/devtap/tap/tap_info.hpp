#pragma once
/** `tap_info`: when and where a record was made — the device, one host time base for all devices,
 *  and the device's sequence number — and the stamp a record carries when the receiver asks for
 *  timestamps (receiver_options::timestamps). */
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>

#include <chrono>
#include <cstdint>

DEVTAP_BEGIN_NAMESPACE

/** What a consumer may learn about the record it is given: a callable takes it after the value
 *  (`fn(const T&, const devtap::tap_info&)`), a coroutine reads `in.info()`. */
struct tap_info {
  using clock = std::chrono::steady_clock;
  /** The device that tapped the record. */
  const devtap::device& device;
  /** With receiver_options::timestamps: when the record was tapped, taken on the device (cpu: the
   *  steady clock). Without: when the receiver handed it over (`stamped` is false). */
  clock::time_point time;
  /** With timestamps: the device's tap count when it tapped this record, from 0, over all its taps
   *  and calls (every tap point, prints and scopes too) and counting those that were not written
   *  (dropped, refused): a consumer of one tap point sees gaps for the others' records as well.
   *  Without: the record's place among every record its device's stream delivered (calls and
   *  mismatches included). */
  std::uint64_t sequence;
  /** True when `time` and `sequence` come from the device (timestamps on). */
  bool stamped;
};

namespace detail {

/** Set in the consumer id of a record that starts with a tap_stamp (timestamps on). */
inline constexpr std::uint32_t stamped_id_flag = std::uint32_t{1} << 30;
/** Set in the consumer id of call records: the reader answers them even when no handler fits. */
inline constexpr std::uint32_t call_id_flag = std::uint32_t{1} << 31;

/** Whether a tap's point id can name an attached consumer: ids from attach() are small, 0 ends the
 *  stream (end_of_stream_id) and the top two bits mark stamps and calls. One rule for host and device taps: a tap
 *  whose id carried the call flag would be answered as a call, in a reply slot its payload names. */
DEVTAP_HOST_DEVICE constexpr bool is_tap_id(std::uint32_t id) { return id != 0 && id < stamped_id_flag; }

/** The first bytes of a stamped record's payload; the encoded value follows. */
struct tap_stamp {
  std::uint64_t time_ns;   // steady_clock, since its epoch
  std::uint64_t sequence;  // the device's tap count
};
static_assert(sizeof(tap_stamp) == 16);

/** What the reader knows of a record's time and place, handed to a consumer entry with the payload:
 *  a stamp from the device, or the reader's own count (then the time is taken when asked). */
struct record_stamp {
  std::uint64_t time_ns = 0;
  std::uint64_t sequence = 0;
  bool stamped = false;
};

/** The tap_info of a record: an unstamped one gets the time of this call (the hand-over). */
inline tap_info info_of(const device& dev, const record_stamp& stamp) {
  const tap_info::clock::time_point time =
      stamp.stamped ? tap_info::clock::time_point(std::chrono::nanoseconds(stamp.time_ns)) : tap_info::clock::now();
  return tap_info{dev, time, stamp.sequence, stamp.stamped};
}

/** Now on the host's steady clock, in ns since its epoch: a cpu tap's stamp. One clock for every
 *  thread (a per-thread TSC mapping was faster but could put an effect before its cause across
 *  threads: docs/performance.md). */
inline std::uint64_t stamp_now_ns() noexcept {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(tap_info::clock::now().time_since_epoch()).count());
}

}  // namespace detail
DEVTAP_END_NAMESPACE
