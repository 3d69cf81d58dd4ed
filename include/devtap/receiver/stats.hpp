#pragma once
/** `device_stats` and `receiver_stats`: what a receiver counted, per device and in all. */
#include <devtap/config.hpp>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

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
  std::uint64_t ignored = 0;          ///< records for a consumer coroutine that had already returned, and scopes no consumer takes
  std::uint64_t lost_at_close = 0;    ///< records in the ring when close() gave up on the device (timeout)
  std::uint64_t call_slot_waits = 0;  ///< calls that found every reply slot of the device in use (or callers waiting for one) and waited
  /** With timestamps: how far a stamp's time may be from the host's steady clock (a GPU's clock is
   *  calibrated at open; 0 for cpu devices; UINT64_MAX when the calibration failed). */
  std::uint64_t clock_error_ns = 0;
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
      t.consumer_errors += d.consumer_errors, t.ignored += d.ignored, t.lost_at_close += d.lost_at_close;
      t.call_slot_waits += d.call_slot_waits;
      t.clock_error_ns = std::max(t.clock_error_ns, d.clock_error_ns);
      t.stream_failed = t.stream_failed || d.stream_failed;
    }
    return t;
  }
};

DEVTAP_END_NAMESPACE
