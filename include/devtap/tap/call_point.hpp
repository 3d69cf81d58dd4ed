#pragma once
/** `call_point<Req, Rep>`: the trivially copyable handle device code calls the host through, and
 *  `call_result<Rep>`, what a call returns where it cannot throw (CUDA, and `outfeed::call` on the host). */
#include <devtap/config.hpp>
#include <devtap/errors.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/tap_info.hpp>

#include <cstdint>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE

/** Names one handler served by `receiver::serve<Req, Rep>`, and the types it takes and returns.
 *  Pass it by value, also as a kernel argument. */
template <class Req, class Rep>
struct call_point {
  std::uint32_t id = 0;           ///< the handler's id within its receiver, with detail::call_id_flag (0 = none)
  std::uint64_t fingerprint = 0;  ///< call_fingerprint_v<Req, Rep> (a call sends its own types' fingerprint, not this word)
  std::uint32_t receiver = 0;     ///< the receiver that serves it (0 = none)
};

/** The answer to a call, or why there is none. */
template <class Rep>
class call_result {
public:
  DEVTAP_HOST_DEVICE call_result() : error_(call_errc::closed) {}
  DEVTAP_HOST_DEVICE explicit call_result(const Rep& value) : value_(value), error_(call_errc::none) {}
  DEVTAP_HOST_DEVICE explicit call_result(call_errc error) : error_(error) {}

  /** True when the handler answered. */
  DEVTAP_HOST_DEVICE bool ok() const noexcept { return error_ == call_errc::none; }
  DEVTAP_HOST_DEVICE explicit operator bool() const noexcept { return ok(); }
  /** The reply; a default-constructed Rep when !ok(). */
  DEVTAP_HOST_DEVICE const Rep& operator*() const noexcept { return value_; }
  DEVTAP_HOST_DEVICE const Rep* operator->() const noexcept { return &value_; }
  DEVTAP_HOST_DEVICE const Rep& value() const noexcept { return value_; }
  /** call_errc::none when answered. */
  DEVTAP_HOST_DEVICE call_errc error() const noexcept { return error_; }

private:
  Rep value_{};
  call_errc error_;
};

namespace detail {

/** Whether a point's id can be a handler's: the call flag, and not a tap's stamp flag (a call whose
 *  id carried both would have its request read as a stamp, and be answered in another's slot). */
DEVTAP_HOST_DEVICE constexpr bool is_call_id(std::uint32_t id) {
  return (id & call_id_flag) != 0 && (id & stamped_id_flag) == 0;
}

/** What `receiver::serve<Req, Rep>` asks of a reply type: a plain value the host copies into the
 *  reply slot and the caller copies out. */
template <class Rep>
concept reply_type = std::is_trivially_copyable_v<Rep> && std::is_default_constructible_v<Rep> &&
                     std::is_same_v<Rep, std::remove_cv_t<Rep>> && !std::is_array_v<Rep>;
}  // namespace detail

/** The fingerprint a call record carries: its request's and its reply's types together, so a
 *  handler of other types on either side is told apart. */
template <class Req, class Rep>
inline constexpr std::uint64_t call_fingerprint_v =
    (type_fingerprint_v<Req> * 0x9e3779b97f4a7c15u) ^ ((type_fingerprint_v<Rep> << 23) | (type_fingerprint_v<Rep> >> 41)) ^
    0x63616c6c00000000u;  // "call": a call never shares a fingerprint with a tap of Req

DEVTAP_END_NAMESPACE
