#pragma once
/** The host half of devtap::print: the consumer that formats print records with {fmt} and writes
 * whole lines to the printer's sink. It needs {fmt}, so it is for .cpp files only (nvcc cannot
 * compile {fmt} 9 at C++20); <devtap/print.hpp>, which device code uses, stays fmt-free.
 *
 * Include it in exactly one .cpp file of a program, and `devtap::attach_print` works from every
 * file of it, .cu ones included; the other files include <devtap/print.hpp>:
 *
 *   // print_host.cpp: the whole file
 *   #include <devtap/print_host.hpp>
 *
 * It defines the one function behind attach_print (not inline, so that files which never see it
 * can call it): a program without this header fails to link with "undefined reference to
 * devtap::detail::print_host_attach", one that includes it twice with "multiple definition of" it.
 * The parts (<devtap/print/consumer.hpp> and below) may be included anywhere.
 *
 * In compiled mode (DEVTAP_COMPILED=1) the library defines that function: this header then brings
 * only the receiver and {fmt}, as it does header-only, and including it (in any number of files,
 * or none) is harmless. */
#include <devtap/print.hpp>
#include <devtap/receiver.hpp>

#include <fmt/format.h>

#if DEVTAP_HEADER_ONLY || defined(DEVTAP_BUILDING_LIBRARY)
#include <devtap/print/consumer.hpp>

DEVTAP_BEGIN_NAMESPACE
namespace detail {
// Declared in <devtap/print/attach.hpp>; defined here only, once per program (see above).
print_channel print_host_attach(receiver& rx, print_options options) {  // NOLINT(misc-definitions-in-headers)
  return attach_print_formatter(rx, std::move(options));
}
}  // namespace detail
DEVTAP_END_NAMESPACE
#endif
