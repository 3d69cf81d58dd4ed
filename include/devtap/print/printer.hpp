#pragma once
// The handles device code prints through: print_point (which consumer, which printer instance) and
// printer (that, plus a device's outfeed). fmt-free, device-safe.
#include <devtap/backend/cpu.hpp>
#include <devtap/config.hpp>
#include <devtap/tap/outfeed.hpp>
#include <devtap/tap/tap_point.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

DEVTAP_BEGIN_NAMESPACE

/** What device code needs, besides the outfeed, to print: trivially copyable (a kernel argument). */
struct print_point {
  tap_point<std::span<const std::byte>> point{};  ///< the printer's consumer on the receiver
  std::uint32_t token = 0;  ///< this printer instance: a CUDA device defines each format once per token
};

/** The `out` of devtap::print: a device's outfeed and a printer. Trivially copyable; valid while the
 *  receiver that made the outfeed is open. */
class printer {
public:
  printer() = default;
  DEVTAP_HOST_DEVICE printer(const outfeed& out, const print_point& point) : out_(out), point_(point) {}
  /** For work on a cpu device: that device's attached receiver. Throws outfeed_error without one. */
  printer(const cpu_context& ctx, const print_point& point)
      : out_(ctx.device().attached_outfeed("print")), point_(point) {}

  DEVTAP_HOST_DEVICE const outfeed& out() const { return out_; }
  DEVTAP_HOST_DEVICE const print_point& point() const { return point_; }

private:
  outfeed out_{};
  print_point point_{};
};

DEVTAP_END_NAMESPACE
