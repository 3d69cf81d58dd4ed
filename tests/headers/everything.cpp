// Every public header in one translation unit, with the templates a user instantiates, compiled
// with -Wall -Wextra -Wpedantic -Werror (tests/headers/meson.build) by the build's compiler and
// by the other one (check_headers.py). Headers of parts still being written are included when
// they exist.
#include <devtap/backend.hpp>
#include <devtap/config.hpp>
#include <devtap/devtap.hpp>
#include <devtap/errors.hpp>
#include <devtap/format.hpp>
#include <devtap/fwd.hpp>
#include <devtap/log.hpp>
#include <devtap/outfeed.hpp>
#if __has_include(<devtap/print.hpp>)
#include <devtap/print.hpp>
#endif
#if __has_include(<devtap/print_host.hpp>)
#include <devtap/print_host.hpp>
#endif

#include "exercise.hpp"

#include <fmt/format.h>

#include <string>

// The {fmt} formatters, once each.
std::string headers_check_format(const devtap::device& dev, const devtap::receiver_stats& stats) {
  std::string out = fmt::format("{} {:>10} {}\n{}", dev, devtap::overflow_policy::block, devtap::log_level::warn, stats);
  out += fmt::format("{} {}", devtap::backend_error("b"), devtap::outfeed_error("o"));
  out += fmt::format("{}", devtap::tap_error("t", {}));
  out += fmt::format("{}", devtap::timeout_error("t", {"cpu:0"}));
  return out + fmt::format("{}", stats.total());
}

std::uint64_t headers_check_exercise() { return headers_check::exercise(); }
