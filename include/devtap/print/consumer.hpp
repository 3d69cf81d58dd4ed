#pragma once
// The printer's consumer on a receiver: one coroutine per device formats that device's records;
// attaching it gives the print_channel device code prints through. Needs {fmt}: host only.
#include <devtap/config.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/tap/tap_point.hpp>
#include <devtap/print/channel.hpp>
#include <devtap/print/device_formatter.hpp>
#include <devtap/print/options.hpp>
#include <devtap/print/printer.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// The consumer of one device's print records: a coroutine per device (the receiver's model).
inline consumer<std::span<const std::byte>> print_consumer(inbox<std::span<const std::byte>> in,
                                                           std::shared_ptr<print_host_state> state) {
  const bool traced = static_cast<bool>(state->trace_line);
  print_device_formatter formatter(std::move(state));
  while (auto record = co_await in.next()) {
    // The trace places the line at its record's time (the tap's, with timestamps): read only when traced.
    const std::uint64_t time_ns =
        traced ? static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                in.info().time.time_since_epoch()).count())
               : 0;
    formatter.on_record(in.device(), *record, time_ns);
  }
  formatter.finish(in.device());
}

// What attach_print does (print_host_attach, in <devtap/print_host.hpp>, calls it).
inline print_channel attach_print_formatter(receiver& rx, print_options options) {
  auto state = std::make_shared<print_host_state>(std::move(options));
  state->trace_line = receiver_access::line_sink(rx);
  std::string name = state->options.name;
  const tap_point<std::span<const std::byte>> point = receiver_access::attach_printer<std::span<const std::byte>>(
      rx, [state](inbox<std::span<const std::byte>> in) { return print_consumer(in, state); }, std::move(name));
  static std::atomic<std::uint32_t> tokens{0};
  std::uint32_t token = tokens.fetch_add(1, std::memory_order_relaxed) + 1;
  if (token == 0) token = tokens.fetch_add(1, std::memory_order_relaxed) + 1;  // 0 means "never defined"
  return print_channel(print_point{point, token}, state->counters);
}

}  // namespace detail
DEVTAP_END_NAMESPACE
