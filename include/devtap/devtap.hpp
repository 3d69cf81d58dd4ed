#pragma once
/** devtap: typed, lossless streaming from running device code to host coroutines.
 *
 * The umbrella header. It does not include {fmt} (nvcc cannot compile {fmt} 9 at C++20), so a
 * `.cu` file may include it; `<devtap/format.hpp>` adds the {fmt} formatters for .cpp files. */
#include <devtap/backend.hpp>
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>
#include <devtap/outfeed.hpp>
