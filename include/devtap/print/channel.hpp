#pragma once
// What attach_print returns (fmt-free): the point for device code, printers for devices, the stats.
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>
#include <devtap/print/printer.hpp>
#include <devtap/print/stats.hpp>

#include <memory>
#include <utility>

DEVTAP_BEGIN_NAMESPACE

/** What attach_print returns: the print_point for device code, the printers for devices, the stats. */
class print_channel {
public:
  print_channel() = default;
  print_channel(print_point point, std::shared_ptr<detail::print_counters> counters)
      : point_(point), counters_(std::move(counters)) {}

  print_point point() const noexcept { return point_; }
  operator print_point() const noexcept { return point_; }  // NOLINT: pass a channel where a point goes

  /** A printer writing into `out` (a host thread's `rx.outfeed(dev)`, or a kernel argument). */
  printer on(const outfeed& out) const noexcept { return printer(out, point_); }
  /** A printer for work on a cpu device. */
  printer on(const cpu_context& ctx) const { return printer(ctx, point_); }

  /** Counters so far (safe at any time). */
  print_stats stats() const { return counters_ ? counters_->sum() : print_stats{}; }

private:
  print_point point_{};
  std::shared_ptr<detail::print_counters> counters_;
};

DEVTAP_END_NAMESPACE
