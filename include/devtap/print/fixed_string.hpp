#pragma once
// The format string of devtap::print as a template argument (fmt-free, device-safe).
#include <devtap/config.hpp>

#include <cstddef>

DEVTAP_BEGIN_NAMESPACE

/** A string literal as a template argument: `devtap::print<"step {} loss {:.3f}">(out, i, loss)`.
 *  Being a constant, it gives each format a compile-time id and compile-time checks. */
template <std::size_t N>
struct fixed_string {
  char chars[N]{};
  DEVTAP_HOST_DEVICE constexpr fixed_string(const char (&s)[N]) {  // NOLINT: implicit on purpose
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  /** Characters before the terminating NUL. */
  DEVTAP_HOST_DEVICE static constexpr std::size_t size() { return N - 1; }
  DEVTAP_HOST_DEVICE constexpr const char* data() const { return chars; }
};

DEVTAP_END_NAMESPACE
