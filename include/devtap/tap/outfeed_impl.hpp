#pragma once
// The definitions of the host tap's refusals (declared in outfeed.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/log.hpp>
#include <devtap/tap/outfeed.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {

[[noreturn]] DEVTAP_FUNC void throw_closed(const char* device_name) {
  throw outfeed_error(std::string("devtap: tap on device '") + device_name +
                      "' after its receiver closed (the record was not written)");
}

[[noreturn]] DEVTAP_FUNC void throw_too_large(const outfeed& out, std::uint64_t payload, std::uint64_t bytes) {
  const std::uint64_t capacity = out.ring().capacity;
  const std::uint64_t stamp = out.timestamps() ? sizeof(tap_stamp) : 0;  // in neither number: the value is what its user sized
  const std::uint64_t fitting = std::bit_ceil(out.policy() == overflow_policy::block ? bytes : 2 * bytes);
  throw outfeed_error("devtap: a record of " + std::to_string(payload - stamp) + " bytes is larger than device '" +
                      out.device_name() + "' accepts (" +
                      describe_bytes(max_record_bytes(capacity) - sizeof(record_header) - stamp) + " in a ring of " +
                      describe_bytes(capacity) + (stamp != 0 ? ", beside its 16-byte timestamp" : "") + "); " +
                      (bytes <= max_record_limit
                           // Under drop and error, a record above half the ring may find no room (throw_full).
                           ? "a ring of " + describe_bytes(fitting) + " holds it: give receiver_options::budget_bytes " +
                                 describe_bytes(fitting) + " per device, or tap smaller pieces"
                           : "no ring holds more than " + describe_bytes(max_record_limit - sizeof(record_header)) +
                                 ": tap smaller pieces"));
}

[[noreturn]] DEVTAP_FUNC void throw_refused(const outfeed& out, tap_refusal why) {
  const std::string device = std::string("device '") + out.device_name() + "'";
  if (!out)  // its receiver id is none: any point reads as another receiver's
    throw outfeed_error("devtap: tap through an empty outfeed (default-constructed: it feeds no device; nothing was written)");
  switch (why) {
    case tap_refusal::kernels_only:
      throw outfeed_error("devtap: " + device + " takes taps from its own kernels only (pass this outfeed to a kernel)");
    case tap_refusal::unattached_point:
      throw outfeed_error("devtap: tap on " + device + " through a tap_point that no receiver attached (nothing was written)");
    default:
      throw outfeed_error("devtap: tap on " + device +
                          " through a tap_point of another receiver, or of a closed one (nothing was written)");
  }
}

[[noreturn]] DEVTAP_FUNC void throw_full(const outfeed& out, std::uint64_t payload, std::uint64_t bytes) {
  // Such a record fits only in one piece before the ring's end, or at its start once the reader has
  // passed the padding to the end: where the tail is decides, even in an empty ring.
  const bool above_half = bytes > out.ring().capacity / 2;
  throw outfeed_error(std::string("devtap: the ring of device '") + out.device_name() + "' is full (" +
                      describe_bytes(out.ring().capacity) + "; overflow_policy::error)" +
                      (above_half ? " for a record of " + std::to_string(payload - (out.timestamps() ? sizeof(tap_stamp) : 0)) + " bytes" +
                                        ", above half the ring: it needs room in one piece, which depends on where the "
                                        "ring's end falls; give each device at least twice the largest record"
                                  : ""));
}

[[noreturn]] DEVTAP_FUNC void throw_waits_for_itself(const outfeed& out) {
  throw outfeed_error(std::string("devtap: a consumer or handler tapped into the full ring of device '") +
                      out.device_name() +
                      "' of its own receiver: it would wait for space that only the receiver's readers free, and they "
                      "may be waiting for it (nothing was written; tap from another thread, or use overflow_policy::drop)");
}

DEVTAP_FUNC std::string describe_call_failure(const outfeed& out, call_errc error, std::string_view slot_text) {
  const std::string device = std::string("device '") + out.device_name() + "'";
  switch (error) {
    case call_errc::none:
      return {};
    case call_errc::handler_failed:
      return "devtap: call on " + device + ": the handler threw: " + std::string(slot_text);
    case call_errc::closed:
      return "devtap: call on " + device + ": its receiver closed (or gave up on the device) before answering";
    case call_errc::no_handler:
      if (!out) return "devtap: call through an empty outfeed (default-constructed: it feeds no device; nothing was sent)";
      return "devtap: call on " + device + " through a call_point that no open receiver of this device serves" +
             (slot_text.empty() ? std::string() : ": " + std::string(slot_text));
    case call_errc::type_mismatch:
      return "devtap: call on " + device + ": " +
             (slot_text.empty() ? std::string("the handler takes or returns other types") : std::string(slot_text));
    case call_errc::too_large:
      return "devtap: call on " + device + ": the request is larger than the device's ring takes (" +
             describe_bytes(max_record_bytes(out.ring().capacity) - sizeof(record_header) - sizeof(call_request) -
                            (out.timestamps() ? sizeof(tap_stamp) : 0)) +
             ")";
    case call_errc::ring_full:
      return "devtap: call on " + device + ": its ring is full (overflow_policy::" +
             (out.policy() == overflow_policy::drop ? "drop" : "error") + "); the request was not sent";
    case call_errc::reentrant:
      return "devtap: call on " + device + " from a consumer or handler of its own receiver: it could wait for "
             "itself (call from another thread)";
    case call_errc::kernels_only:
      return "devtap: call on " + device + " from the host: only its own kernels call through it";
  }
  return "devtap: call on " + device + " failed (code " + std::to_string(static_cast<unsigned>(error)) + ")";
}

}  // namespace detail

DEVTAP_FUNC scope_guard::scope_guard(const outfeed& out, std::string_view name)
    : out_(out), pin_(out && out.host_can_produce() ? detail::ring_pin(out.ring()) : detail::ring_pin()), name_(name),
      id_(scope_id(name)) {
  tap_phase(scope_phase::begin);
  open_ = true;
}

DEVTAP_FUNC void scope_guard::end() {
  if (!std::exchange(open_, false)) return;
  tap_phase(scope_phase::end);
}

DEVTAP_FUNC scope_guard::~scope_guard() {
  try {
    end();
  } catch (const std::exception& e) {  // a destructor must not throw: the span stays open in the trace
    log(log_level::warn, "scope '{}' on device '{}' could not be ended: {}", name_, out_.device_name(), e.what());
  }
}

DEVTAP_END_NAMESPACE
