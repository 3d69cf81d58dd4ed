#pragma once
/** devtap::print: fmt-style printing from device code, formatted on the host with {fmt}.
 *
 *   // host, once (a .cpp file: the formatter needs {fmt}, see <devtap/print_host.hpp>)
 *   devtap::receiver rx;
 *   devtap::print_channel prints = devtap::attach_print(rx, {.prefix = devtap::print_prefix::device});
 *
 *   // a cpu device's work
 *   dev->submit([=](devtap::cpu_context& ctx) {
 *     devtap::printer out(ctx, prints);
 *     devtap::print<"step {} loss {:.3f}">(out, step, loss);
 *   });
 *
 *   // a CUDA kernel (this header is fmt-free: a .cu file may include it)
 *   __global__ void k(devtap::printer out) { devtap::print<"thread {}">(out, threadIdx.x); }
 *   k<<<1, 32>>>(prints.on(rx.outfeed(gpu)));
 *
 * The format is a template argument, so it is known at compile time: the argument count and
 * each spec are checked against the argument types (static_assert), the format gets a 64-bit id,
 * and the device sends only that id and the argument values, never the text. The host learns each
 * format once (host threads register it before their first record; a CUDA device sends the text
 * with its first record of that format). Every print is one record: whole lines, in emission order
 * per device, never interleaved, and nothing lost under the receiver's `block` policy.
 *
 * Arguments: bool, char, integers (8 to 64 bits), float, double, enums (as their underlying
 * integer), pointers (printed as addresses; not char pointers: pass a std::string_view), fixed-size
 * arrays and std::array of those, std::span of those, std::string_view. Char arrays, char spans and
 * string views print as text; other arrays and spans as ranges ("[1, 2, 3]", "{::.2f}", "{:n}").
 * Spans in device code need nvcc's --expt-relaxed-constexpr (as every span tap does). See docs/print.md.
 *
 * The program's formatter: <devtap/print_host.hpp>, included by exactly one .cpp file of the
 * program. Without it the program does not link (undefined devtap::detail::print_host_attach). */
#include <devtap/print/attach.hpp>
#include <devtap/print/channel.hpp>
#include <devtap/print/fixed_string.hpp>
#include <devtap/print/options.hpp>
#include <devtap/print/print.hpp>
#include <devtap/print/printer.hpp>
#include <devtap/print/stats.hpp>
