#pragma once
/** devtap: typed, lossless streaming from running device code to host coroutines.
 *
 * The umbrella header. It does not include {fmt} (nvcc cannot compile {fmt} 9 at C++20), so a
 * `.cu` file may include it. For .cpp files, `<devtap/format.hpp>` adds the {fmt} formatters and
 * `<devtap/print_host.hpp>` the host side of devtap::print. */
#include <devtap/backend.hpp>
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/receiver.hpp>
#include <devtap/replay.hpp>
#include <devtap/print.hpp>
