#pragma once
/** What close() reports about a device besides consumer exceptions: the sticky word that producers
 *  which cannot throw (CUDA kernels) leave, a stopped stream, unknown ids and type mismatches; and the
 *  file sinks' last writes, which close() and flush() ask for. */
#include <devtap/detail/text.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/receiver/consumer_entry.hpp>
#include <devtap/receiver/reader.hpp>
#include <devtap/ring/layout.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** What producers that cannot throw (CUDA kernels) left in the ring's sticky error word, as text. */
std::string sticky_error_text(const device_stream& stream);

/** What close() reports about one device beyond consumer exceptions: a stopped stream, what
 *  producers that cannot throw left in the sticky word, and records for unknown ids or of the wrong
 *  type (per id, with counts). The reader's own fields are read only once it has finished or exited. */
void add_stream_failures(const device_stream& stream, const std::vector<std::shared_ptr<consumer_entry>>& entries,
                                std::vector<consumer_failure>& failures);

/** Closes the trace file and the recording; their write errors, as failures for close() to report.
 *  `readers_given_up`: a reader still in a write to a file holds it; it is waited for half a grace.
 *  A pipe or device file: close()'s own writes into it wait until `deadline` (close()'s) at most. */
std::vector<consumer_failure> close_sinks(receiver_state& state, bool readers_given_up,
                                           std::chrono::steady_clock::time_point deadline);

/** flush()'s last step: asks each running reader to write its device's part of the trace file and
 *  the recording (at its next empty ring) and waits; returns the devices not written by `deadline`. */
std::vector<std::string> write_sinks_out(receiver_state& state, std::chrono::steady_clock::time_point deadline);

/** Everything close() reports: what consumers and handlers threw (16 kept per device and name, the
 *  rest counted), the files' errors, and each device's own (add_stream_failures). */
std::vector<consumer_failure> collect_failures(receiver_state& state, std::vector<consumer_failure> file_failures);

}  // namespace detail
DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/receiver/report_impl.hpp>
#endif
