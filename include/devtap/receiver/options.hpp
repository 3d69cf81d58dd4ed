#pragma once
/** `receiver_options`: how a receiver is set up. */
#include <devtap/backend/default.hpp>
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>
#include <devtap/ring/layout.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
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
  /** Every tap carries the time it was made on the device and the device's tap count
   *  (`tap_info::stamped`); costs 16 bytes per record and a clock read per tap. cpu: the steady
   *  clock; CUDA: %globaltimer, mapped onto the host's clock by a calibration at open
   *  (device_stats::clock_error_ns). */
  bool timestamps = false;
  /** A merged consumer (`attach(fn, devtap::merged)`) holds a record back until every other device
   *  has shown a later one, ended, or sent nothing for this long since the record arrived: the
   *  larger, the fewer records out of order behind a slow device; the smaller, the sooner each is
   *  delivered. */
  std::chrono::milliseconds merge_lag = std::chrono::milliseconds(10);
  /** Writes every record of the receiver to this file as a Chrome Trace Event JSON file
   *  (ui.perfetto.dev, chrome://tracing): one track per device, taps as instant events with their
   *  fields, scopes as spans, prints as log events, drops and errors as markers. Complete when
   *  close() returns (but for a device whose reader close() gave up on while it was stuck in a
   *  consumer: its last unwritten events are missing, and a `lost` marker says so). Empty: none. */
  std::string trace_file{};
  /** Writes every record raw to this file, with the names of its points and devices, for
   *  devtap::replay and the devtap-recording tool. Complete when close() returns, as the trace file
   *  (a stuck reader's last records are missing, marked `lost`). Empty: none. */
  std::string record_file{};
};

namespace detail {
/** now() + `timeout`, capped at a century: milliseconds::max() means "wait as long as it takes",
 *  not an overflow that times out at once. */
inline std::chrono::steady_clock::time_point deadline_after(std::chrono::milliseconds timeout) {
  constexpr auto century = std::chrono::hours(24 * 365 * 100);
  return std::chrono::steady_clock::now() + std::min<std::chrono::milliseconds>(std::max(timeout, std::chrono::milliseconds::zero()), century);
}

/** The devices a receiver named `name` drains: those given, those of the backends given, or every
 *  initialised one. Throws std::invalid_argument for options that cannot work (both `devices` and
 *  `backends`, no device, a null or repeated one, a negative close_timeout, an overflow policy
 *  out of range). */
std::vector<device*> checked_receiver_devices(const receiver_options& options, const std::string& name);
/** The devices' names, told apart: a name already given to an earlier one (devices of two clients,
 *  two `cpu:0`) gets `#2`, `#3`... so that stats, reports and files name each device once. */
std::vector<std::string> names_within(const std::vector<device*>& devices);
/** Each device's ring: its share of `budget_bytes`, rounded down to a power of two (at least 256). */
std::uint64_t ring_capacity_of(std::size_t budget_bytes, std::size_t devices, const std::string& name);

/** "block", "drop" or "error": the policy as logs and messages name it. */
constexpr std::string_view policy_name(overflow_policy p) noexcept {
  switch (p) {
    case overflow_policy::block: return "block";
    case overflow_policy::drop: return "drop";
    case overflow_policy::error: return "error";
  }
  return "unknown";
}
}  // namespace detail

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/receiver/options_impl.hpp>
#endif
