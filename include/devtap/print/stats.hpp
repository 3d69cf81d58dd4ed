#pragma once
// What a printer has done so far: the public print_stats, and the per-device counters behind it.
// fmt-free; host only in use.
#include <devtap/config.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** What a printer has done so far. */
struct print_stats {
  std::uint64_t lines = 0;            ///< prints written (one each, inner newlines or not), error lines included
  std::uint64_t format_errors = 0;    ///< prints {fmt} could not format (written as an error line)
  std::uint64_t unknown_formats = 0;  ///< prints whose format never became known (written as an error line)
  std::uint64_t malformed = 0;        ///< records that were not valid prints (written as an error line)
  std::uint64_t definitions = 0;      ///< format definitions received from CUDA devices
  std::uint64_t write_errors = 0;     ///< lines a sink lost: a FILE's failed write or flush, or a callable's that close() gave up on
};

namespace detail {

// One device's counters: written by that device's reader thread only, and on a cache line of their
// own so that readers of different devices never share one.
struct alignas(64) print_device_counters {
  std::atomic<std::uint64_t> lines{0}, format_errors{0}, unknown_formats{0}, malformed{0}, definitions{0},
      write_errors{0};
};

// A printer's counters, one set per device, summed when asked.
struct print_counters {
  print_device_counters& add_device() {
    std::lock_guard lock(mutex);
    devices.push_back(std::make_unique<print_device_counters>());
    return *devices.back();
  }
  print_stats sum() const {
    print_stats s;
    std::lock_guard lock(mutex);
    for (const auto& d : devices) {
      s.lines += d->lines.load(std::memory_order_relaxed);
      s.format_errors += d->format_errors.load(std::memory_order_relaxed);
      s.unknown_formats += d->unknown_formats.load(std::memory_order_relaxed);
      s.malformed += d->malformed.load(std::memory_order_relaxed);
      s.definitions += d->definitions.load(std::memory_order_relaxed);
      s.write_errors += d->write_errors.load(std::memory_order_relaxed);
    }
    return s;
  }
  mutable std::mutex mutex;
  std::vector<std::unique_ptr<print_device_counters>> devices;  // unique_ptr: stable addresses
};

}  // namespace detail
DEVTAP_END_NAMESPACE
