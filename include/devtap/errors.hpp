#pragma once
/** The exceptions devtap throws. None of them is thrown from a destructor. */
#include <devtap/config.hpp>

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** A backend is unknown, failed to initialise, or provides no devices. */
class backend_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/** A tap could not be written: no receiver attached, record too large, `error` overflow policy, or closed. */
class outfeed_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/** One exception raised by a consumer, with where it happened. */
struct consumer_failure {
  std::string device;          ///< e.g. "cpu:1"
  std::string consumer;        ///< consumer name (or "#id")
  std::string message;         ///< what() of the exception, or "unknown exception"
  std::exception_ptr error;    ///< the exception itself
};

/** Thrown by `receiver::close()` when consumers threw or a device's stream was malformed: lists every failure. */
class tap_error : public std::runtime_error {
public:
  tap_error(std::string what, std::vector<consumer_failure> failures)
      : std::runtime_error(std::move(what)), failures_(std::move(failures)) {}
  const std::vector<consumer_failure>& failures() const noexcept { return failures_; }

private:
  std::vector<consumer_failure> failures_;
};

/** Why a call (`cpu_context::call`, `outfeed::call`) got no answer from its handler. */
enum class call_errc : std::uint32_t {
  none = 0,           ///< answered
  handler_failed = 1, ///< the handler threw (its message: call_error::what(), and close() reports it)
  closed = 2,         ///< the receiver closed, or gave up on the device, before answering
  no_handler = 3,     ///< a call_point of another receiver, of a closed one, or of none
  type_mismatch = 4,  ///< the handler behind the point takes or returns other types
  too_large = 5,      ///< the request is larger than the device's ring takes
  ring_full = 6,      ///< overflow_policy drop or error met a full ring: the request was not sent
  reentrant = 7,      ///< called from a handler or consumer of the same receiver, which could wait for itself
  kernels_only = 8,   ///< the host called through a CUDA device's outfeed (only its kernels may)
};

namespace detail {
/** The enumerator's name ("ring_full"): what `{}` prints for a call_errc (devtap/format.hpp). */
constexpr const char* call_errc_name(call_errc error) noexcept {
  constexpr const char* names[] = {"none",      "handler_failed", "closed",    "no_handler",  "type_mismatch",
                                   "too_large", "ring_full",      "reentrant", "kernels_only"};
  const auto i = static_cast<std::uint32_t>(error);
  return i < sizeof names / sizeof names[0] ? names[i] : "unknown call_errc";
}
/** What a user's exception says: its what(), or a stand-in where that is null (a user type may
 *  override what() badly; its message is read on a reader thread, which must not crash). */
inline const char* message_of(const std::exception& e) noexcept {
  const char* what = e.what();
  return what != nullptr ? what : "an exception with no message";
}
}  // namespace detail

/** A call from cpu device work got no answer: the handler threw, the receiver closed, ... */
class call_error : public std::runtime_error {
public:
  call_error(call_errc code, const std::string& what) : std::runtime_error(what), code_(code) {}
  call_errc code() const noexcept { return code_; }

private:
  call_errc code_;
};

/** A close or flush did not finish within its timeout; names the devices that did not finish. */
class timeout_error : public std::runtime_error {
public:
  timeout_error(std::string what, std::vector<std::string> devices)
      : std::runtime_error(std::move(what)), devices_(std::move(devices)) {}
  const std::vector<std::string>& devices() const noexcept { return devices_; }

private:
  std::vector<std::string> devices_;
};

DEVTAP_END_NAMESPACE
