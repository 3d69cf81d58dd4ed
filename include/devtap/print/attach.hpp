#pragma once
// attach_print, callable from every file of a program, .cu ones too (fmt-free). Its formatter is
// defined in <devtap/print_host.hpp> only, which one .cpp file of the program includes: without
// that file the program does not link ("undefined reference to devtap::detail::print_host_attach"),
// rather than failing when it runs. A plain (not inline) function, so that a file which never sees
// its definition may still call it without breaking the one-definition rule.
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>
#include <devtap/print/channel.hpp>
#include <devtap/print/options.hpp>

#include <stdexcept>
#include <string>
#include <utility>

DEVTAP_BEGIN_NAMESPACE
namespace detail {
// Defined once per program, by <devtap/print_host.hpp>.
print_channel print_host_attach(receiver& rx, print_options options);
}  // namespace detail

/** Attaches a printer to `rx`: one consumer that formats print records with {fmt} and writes whole
 *  lines to `options.sink`. Callable from any file, .cu ones too; the formatter is compiled where
 *  <devtap/print_host.hpp> is included, which one .cpp file of the program must do (else the
 *  program does not link). Throws std::invalid_argument for a sink that cannot take lines (a null
 *  `FILE*`, an empty `std::function` or null function pointer). */
inline print_channel attach_print(receiver& rx, print_options options = {}) {
  // Refused here, at the user's call: such a sink would count lines as printed while they go nowhere.
  if (const char* why = options.sink.unusable())
    throw std::invalid_argument(std::string("devtap: attach_print: the sink is ") + why);
  return detail::print_host_attach(rx, std::move(options));
}

DEVTAP_END_NAMESPACE
