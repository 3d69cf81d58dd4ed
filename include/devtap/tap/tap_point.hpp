#pragma once
/** `tap_point<T>`: the trivially copyable handle device code taps through. */
#include <devtap/config.hpp>

#include <cstdint>

DEVTAP_BEGIN_NAMESPACE

/** Names one attached consumer and the type it expects. Pass it by value, also as a kernel argument. */
template <class T>
struct tap_point {
  std::uint32_t id = 0;           ///< consumer id within its receiver (0 = none)
  std::uint64_t fingerprint = 0;  ///< structural fingerprint of T, checked by the receiver
  std::uint32_t receiver = 0;     ///< the receiver that attached it (0 = none): a tap checks it against the outfeed's
};

DEVTAP_END_NAMESPACE
