#pragma once
/** {fmt} formatters for devtap's public types, for `.cpp` files (nvcc cannot compile {fmt} 9 at C++20).
 *
 *   fmt::print("{}\n", dev);          // cpu:0
 *   fmt::print("{}\n", rx.stats());   // one line per device
 *   catch (const devtap::tap_error& e) { fmt::print("{}\n", e); } */
#include <devtap/backend/device.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/receiver/receiver.hpp>

#include <fmt/format.h>

#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {
/** Formats as a string: the format spec applies to the whole text (width, fill, alignment). */
struct text_formatter : fmt::formatter<std::string_view> {
  template <class Context>
  auto write(std::string_view text, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(text, ctx);
  }
};

}  // namespace detail
DEVTAP_END_NAMESPACE

/** `cpu:0`, `cuda:0 (NVIDIA H200)`: the device's name. */
template <class D>
  requires std::is_base_of_v<devtap::device, D>
struct fmt::formatter<D> : devtap::detail::text_formatter {
  template <class Context>
  auto format(const devtap::device& d, Context& ctx) const {
    return write(d.name(), ctx);
  }
};

/** An error's message; a tap_error already lists every failure in it. */
template <class E>
  requires(std::is_base_of_v<devtap::backend_error, E> || std::is_base_of_v<devtap::outfeed_error, E> ||
           std::is_base_of_v<devtap::tap_error, E> || std::is_base_of_v<devtap::timeout_error, E> ||
           std::is_base_of_v<devtap::call_error, E>)
struct fmt::formatter<E> : devtap::detail::text_formatter {
  template <class Context>
  auto format(const E& e, Context& ctx) const {
    return write(e.what(), ctx);
  }
};

template <>
struct fmt::formatter<devtap::overflow_policy> : devtap::detail::text_formatter {
  template <class Context>
  auto format(devtap::overflow_policy p, Context& ctx) const {
    return write(devtap::detail::policy_name(p), ctx);
  }
};

/** `ring_full`: the code's name, as call.md lists them (`call_result::error()`, `call_error::code()`). */
template <>
struct fmt::formatter<devtap::call_errc> : devtap::detail::text_formatter {
  template <class Context>
  auto format(devtap::call_errc e, Context& ctx) const {
    return write(devtap::detail::call_errc_name(e), ctx);
  }
};

template <>
struct fmt::formatter<devtap::log_level> : devtap::detail::text_formatter {
  template <class Context>
  auto format(devtap::log_level l, Context& ctx) const {
    return write(devtap::detail::level_name(l), ctx);
  }
};

/** `[cpu:0] bad-callable: what it threw`: one failure as close() lists it. */
template <>
struct fmt::formatter<devtap::consumer_failure> : devtap::detail::text_formatter {
  template <class Context>
  auto format(const devtap::consumer_failure& f, Context& ctx) const {
    return write(fmt::format("[{}] {}: {}", f.device, f.consumer, f.message), ctx);
  }
};

/** `cpu:0: 1200 records (19200 bytes), 0 dropped, ...`, one device's counters. */
template <>
struct fmt::formatter<devtap::device_stats> : devtap::detail::text_formatter {
  template <class Context>
  auto format(const devtap::device_stats& s, Context& ctx) const {
    std::string text = fmt::format(
        "{}: {} records ({} bytes), {} dropped ({} bytes), {} unknown ids, {} type mismatches, {} consumer errors, "
        "{} ignored, {} lost at close",
        s.device, s.records, s.bytes, s.dropped_records, s.dropped_bytes, s.unknown_ids, s.type_mismatches,
        s.consumer_errors, s.ignored, s.lost_at_close);
    if (s.call_slot_waits != 0) text += fmt::format(", {} call(s) waited for a reply slot", s.call_slot_waits);
    if (s.clock_error_ns == ~std::uint64_t{0}) text += ", clock not calibrated";
    else if (s.clock_error_ns != 0) text += fmt::format(", clock within +-{} ns", s.clock_error_ns);
    if (s.stream_failed) text += fmt::format(", stream failed: {}", s.failure);
    return write(text, ctx);
  }
};

/** One line per device, then the total. */
template <>
struct fmt::formatter<devtap::receiver_stats> : devtap::detail::text_formatter {
  template <class Context>
  auto format(const devtap::receiver_stats& s, Context& ctx) const {
    std::string text;
    for (const auto& d : s.devices) text += fmt::format("{}\n", d);
    text += fmt::format("{}", s.total());
    return write(text, ctx);
  }
};
