#pragma once
/** `outfeed`: the producer's handle on one device's ring, and the host tap path.
 *
 * The handle is trivially copyable: a cpu device's work reaches it through `cpu_context::tap`,
 * other host threads through `receiver::outfeed(dev)`, and a CUDA kernel receives it as an argument. */
#include <devtap/config.hpp>
#include <devtap/detail/text.hpp>
#include <devtap/errors.hpp>
#include <devtap/ring/layout.hpp>
#include <devtap/ring/call.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/tap/call_point.hpp>
#include <devtap/tap/codec.hpp>
#include <devtap/tap/scope.hpp>
#include <devtap/tap/tap_info.hpp>
#include <devtap/tap/tap_point.hpp>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

DEVTAP_BEGIN_NAMESPACE

/** A device's ring as its producers see it. Valid while the receiver that made it is open; a copy
 *  used after it closed is told so (`outfeed_error`, `call_errc::closed`) until the device's next
 *  receiver closes, which frees the ring: after that it refers to freed memory. */
class outfeed {
public:
  outfeed() = default;
  outfeed(const detail::ring_view& ring, overflow_policy policy, const char* device_name, bool host_can_produce,
          std::uint32_t receiver_id, bool timestamps = false) noexcept
      : ring_(ring), policy_(policy), receiver_id_(receiver_id), device_name_(device_name),
        host_can_produce_(host_can_produce), timestamps_(timestamps) {}

  /** Sends `value` to the consumer behind `point`. Host: may block (policy `block`) or throw. */
  template <class T>
  DEVTAP_HOST_DEVICE void tap(const tap_point<T>& point, const T& value) const;

  /** Asks the handler behind `point` (receiver::serve) and waits for its answer. The request travels
   *  through the ring like a tap, after this thread's earlier taps. Never throws for the call's own
   *  failures: the result says why there is no answer (docs/call.md). Host threads and CUDA threads. */
  template <class Req, class Rep>
  DEVTAP_HOST_DEVICE call_result<Rep> call(const call_point<Req, Rep>& point, const Req& request) const;

  /** Marks the beginning of scope `id` on this device: a record like a tap, in order with this
   *  thread's taps, that consumers of scope_event and the trace file see (docs/timeline.md). Refused,
   *  dropped or blocking as a tap is. Host threads and CUDA threads. */
  DEVTAP_HOST_DEVICE void scope_begin(std::uint32_t id) const {
    tap(detail::unnamed_scope_point(receiver_id_), detail::unnamed_scope_event{id, scope_phase::begin, 0});
  }
  /** Marks the end of scope `id` (see scope_begin). */
  DEVTAP_HOST_DEVICE void scope_end(std::uint32_t id) const {
    tap(detail::unnamed_scope_point(receiver_id_), detail::unnamed_scope_event{id, scope_phase::end, 0});
  }

  /** True when this handle refers to a ring. */
  DEVTAP_HOST_DEVICE explicit operator bool() const noexcept { return ring_.data != nullptr; }

  DEVTAP_HOST_DEVICE const detail::ring_view& ring() const noexcept { return ring_; }
  DEVTAP_HOST_DEVICE overflow_policy policy() const noexcept { return policy_; }
  /** The receiver this ring belongs to: only its tap points may tap here. */
  DEVTAP_HOST_DEVICE std::uint32_t receiver_id() const noexcept { return receiver_id_; }
  const char* device_name() const noexcept { return device_name_; }
  /** False for a CUDA device's ring: only its kernels can tap into it. */
  bool host_can_produce() const noexcept { return host_can_produce_; }
  /** True when every tap carries its time and sequence number (receiver_options::timestamps). */
  DEVTAP_HOST_DEVICE bool timestamps() const noexcept { return timestamps_; }

private:
  detail::ring_view ring_{};
  overflow_policy policy_ = overflow_policy::block;
  std::uint32_t receiver_id_ = 0;
  const char* device_name_ = "";  // host string, for error messages only
  bool host_can_produce_ = true;
  bool timestamps_ = false;
};

namespace detail {

#if defined(__CUDACC__)
/** The tap of a CUDA thread: defined in devtap/cuda/tap.cuh, which <devtap/devtap.hpp> and
 *  <devtap/receiver.hpp> include in a .cu file. */
template <class T>
__device__ void device_tap(const outfeed& out, const tap_point<T>& point, const T& value);
/** The call of a CUDA thread: defined in devtap/cuda/call.cuh. */
DEVTAP_NO_EXEC_CHECK
template <class Req, class Rep>
DEVTAP_HOST_DEVICE call_result<Rep> device_call(const outfeed& out, const call_point<Req, Rep>& point, const Req& request);
#endif

[[noreturn]] void throw_closed(const char* device_name);

// The refusals of a host tap, out of line: one error path for every T, none of it on the hot path.
[[noreturn]] void throw_too_large(const outfeed& out, std::uint64_t payload, std::uint64_t bytes);

enum class tap_refusal { none, kernels_only, unattached_point, foreign_point };

/** Whether `out` refuses a tap through a point with `id` of `receiver`, before claiming anything. */
inline tap_refusal refusal(const outfeed& out, std::uint32_t id, std::uint32_t receiver) noexcept {
  if (!out.host_can_produce()) return tap_refusal::kernels_only;
  if (!is_tap_id(id) || receiver == 0) return tap_refusal::unattached_point;
  if (receiver != out.receiver_id()) return tap_refusal::foreign_point;  // ids restart in every receiver
  return tap_refusal::none;
}

[[noreturn]] void throw_refused(const outfeed& out, tap_refusal why);

[[noreturn]] void throw_full(const outfeed& out, std::uint64_t payload, std::uint64_t bytes);

[[noreturn]] void throw_waits_for_itself(const outfeed& out);

/** What a host call that failed with `error` says (`slot_text`: the handler's message, if any). */
std::string describe_call_failure(const outfeed& out, call_errc error, std::string_view slot_text);

/** True once close_ring (ring/close.hpp) ran. seq_cst (a plain load on x86): after a claim it is
 *  the last of close_ring's CAS, the claim's CAS and count_lost's look at the tail, all seq_cst, so
 *  a claim the abandoned reader did not count sees the ring closed (reader_impl.hpp, abandon). */
inline bool ring_closed(const ring_view& ring) noexcept {
  return std::atomic_ref<std::uint32_t>(ring.consumer->closed).load(std::memory_order_seq_cst) != ring_open;
}

/** Pins a ring while a host thread may wait inside it (a call, a tap blocked for space), or while
 *  a scope_guard may still tap its end into it: device::retire_ring frees a retired ring only once
 *  no pin is left. Off the hot path only. */
class ring_pin {
public:
  ring_pin() noexcept = default;  // pins nothing
  explicit ring_pin(const ring_view& ring) noexcept : waiters_(&ring.consumer->host_waiters) {
    // Before this thread waits, while the receiver's close still keeps the ring (retire_ring).
    std::atomic_ref<std::uint32_t>(*waiters_).fetch_add(1, std::memory_order_seq_cst);
  }
  ring_pin(ring_pin&& other) noexcept : waiters_(std::exchange(other.waiters_, nullptr)) {}
  ~ring_pin() {
    // After this thread's last touch of the ring; partner: retire_ring's acquire load.
    if (waiters_ != nullptr) std::atomic_ref<std::uint32_t>(*waiters_).fetch_sub(1, std::memory_order_release);
  }
  ring_pin(const ring_pin&) = delete;
  ring_pin& operator=(const ring_pin&) = delete;
  ring_pin& operator=(ring_pin&&) = delete;

private:
  std::uint32_t* waiters_ = nullptr;
};

/** A record's stamp (timestamps on): `time_ns` and the device's next number among its taps, calls,
 *  prints and scopes. Every producer, host thread or CUDA thread, takes it before its claim, so a
 *  record that is not written leaves a gap in the numbers. */
DEVTAP_NO_EXEC_CHECK
template <class Atomics>
DEVTAP_HOST_DEVICE tap_stamp take_stamp(const ring_view& ring, std::uint64_t time_ns) {
  if constexpr (Atomics::wakes_reader)  // host producers: the ring's owner counts without a lock (owner.hpp)
    return {time_ns, take_host_sequence(ring)};
  else
    return {time_ns, typename Atomics::template producer_ref<std::uint64_t>(ring.producer->taps).fetch_add(1, Atomics::relaxed)};
}

/** Writes `stamp` where a stamped record's payload begins (8-byte aligned, as every payload) and
 *  returns where the value goes: one layout for every producer; the reader parses it (reader_impl.hpp). */
DEVTAP_HOST_DEVICE inline std::byte* put_stamp(std::byte* payload, const tap_stamp& stamp) {
  reinterpret_cast<std::uint64_t*>(payload)[0] = stamp.time_ns;
  reinterpret_cast<std::uint64_t*>(payload)[1] = stamp.sequence;
  return payload + sizeof(tap_stamp);
}

template <class T>
void host_tap(const outfeed& out, const tap_point<T>& point, const T& value) {
  const ring_view& ring = out.ring();
  const std::uint64_t stamp_bytes = out.timestamps() ? sizeof(tap_stamp) : 0;
  const std::uint64_t payload = stamp_bytes + encoded_size(value);
  const std::uint64_t bytes = record_bytes(payload);
  // Refusals first, as for a call: an empty outfeed has no ring to be too small for.
  if (const tap_refusal why = refusal(out, point.id, point.receiver); why != tap_refusal::none) throw_refused(out, why);
  if (bytes > max_record_bytes(ring.capacity)) throw_too_large(out, payload, bytes);  // before anything is written
  // A closed ring takes no new claim: taps that went on after close() would fill it with aborted
  // claims and starve the end marker's (a plain load of a line written only at close).
  if (ring_closed(ring)) throw_closed(out.device_name());
  // Taken before the claim: a tap that is dropped still uses its number (a gap).
  const tap_stamp stamp = stamp_bytes != 0 ? take_stamp<host_atomics>(ring, stamp_now_ns()) : tap_stamp{};
  std::uint64_t pos;
  claim_status status = try_claim<host_atomics>(ring, bytes, pos) ? claim_status::claimed : claim_status::full;
  // Only where the ring is full (off the hot path): a consumer or handler of this receiver must not
  // wait for space in its rings, since its own thread frees this one, and the reader of another may
  // be waiting for it (a shared or merged consumer's lock).
  const bool waits_for_itself = status != claim_status::claimed && out.policy() == overflow_policy::block &&
                                (ring_read_here == ring.consumer || receiver_read_here == out.receiver_id());
  // Nor behind a big claim (try_claim): such a tap takes room wherever there is room now.
  if (waits_for_itself && try_claim<host_atomics>(ring, bytes, pos, true)) status = claim_status::claimed;
  std::optional<ring_pin> pin;  // a wait for space below may outlive the receiver
  if (status != claim_status::claimed && !waits_for_itself) {
    if (out.policy() == overflow_policy::block) pin.emplace(ring);  // (drop and error do not wait)
    status = claim<host_atomics, host_wait>(ring, bytes, out.policy(), pos);
  }
  switch (status) {
    case claim_status::claimed:
      break;
    case claim_status::dropped:
      if (ring_closed(ring)) throw_closed(out.device_name());  // a full ring after close is not a drop
      count_dropped<host_atomics>(ring, 1, bytes);
      return;
    case claim_status::full:
      if (waits_for_itself) throw_waits_for_itself(out);
      // Counted and reported by close() too: the device work's future may never be looked at.
      account_unwritten<host_atomics>(ring, claim_status::full, 1, bytes);
      throw_full(out, payload, bytes);
    case claim_status::closed:
      throw_closed(out.device_name());
  }
  if (ring_closed(ring)) {  // a claim after the end marker's must not commit
    abort<host_atomics>(ring, pos, bytes);
    throw_closed(out.device_name());
  }
  std::byte* const dst = ring.payload_at(pos);
  encode(value, stamp_bytes != 0 ? put_stamp(dst, stamp) : dst);
  commit<host_atomics>(ring, pos, stamp_bytes != 0 ? point.id | stamped_id_flag : point.id, point.fingerprint,
                       static_cast<std::uint32_t>(payload));
}

/** The call of a host thread: refusals first, then a reply slot, the request, the wait, the answer.
 *  `message` (if given) receives what a failure says. */
template <class Req, class Rep>
call_result<Rep> host_call(const outfeed& out, const call_point<Req, Rep>& point, const Req& request,
                           std::string* message) {
  auto fail = [&](call_errc error, std::string_view slot_text = {}) {
    if (message != nullptr) *message = describe_call_failure(out, error, slot_text);
    return call_result<Rep>(error);
  };
  const ring_view& ring = out.ring();
  if (!out.host_can_produce()) return fail(call_errc::kernels_only);
  if (!is_call_id(point.id) || point.receiver == 0 || point.receiver != out.receiver_id())
    return fail(call_errc::no_handler);
  const ring_pin pin(ring);  // the wait for the answer may outlive the receiver
  if (ring_closed(ring)) return fail(call_errc::closed);
  if (ring_read_here == ring.consumer || receiver_read_here == out.receiver_id()) return fail(call_errc::reentrant);
  const std::uint64_t stamp_bytes = out.timestamps() ? sizeof(tap_stamp) : 0;
  const std::uint64_t payload = stamp_bytes + sizeof(call_request) + encoded_size(request);
  const std::uint64_t bytes = record_bytes(payload);
  if (bytes > max_record_bytes(ring.capacity)) return fail(call_errc::too_large);

  std::uint32_t slot = 0;
  const auto closed = [&ring] { return ring_closed(ring); };
  const auto waited = [&ring] {  // every slot is held by a call in flight, or callers wait: this call waits, counted
    std::atomic_ref<std::uint64_t>(ring.consumer->reply_slot_waits).fetch_add(1, std::memory_order_relaxed);
  };
  if (!host_take_reply_slot(ring, slot, closed, waited)) return fail(call_errc::closed);
  const std::uint32_t sequence = next_call_sequence<host_atomics>(ring, slot);
  // As host_tap's: before the claim.
  const tap_stamp stamp = stamp_bytes != 0 ? take_stamp<host_atomics>(ring, stamp_now_ns()) : tap_stamp{};
  std::uint64_t pos;
  const claim_status status = claim<host_atomics, host_wait>(ring, bytes, out.policy(), pos);
  if (status != claim_status::claimed || ring_closed(ring)) {
    if (status == claim_status::claimed) abort<host_atomics>(ring, pos, bytes);  // after the end marker's claim
    else if (status != claim_status::closed) account_unwritten<host_atomics>(ring, status, 1, bytes);
    give_back_reply_slot<host_atomics>(ring, slot);
    return fail(status == claim_status::dropped || status == claim_status::full ? call_errc::ring_full : call_errc::closed);
  }
  const call_request header{slot, sequence};
  note_caller_cpu(ring, slot);
  // Whether this commit wakes the reader (a guess: it may fall asleep meanwhile), for the wait below.
  const bool woke_reader =
      std::atomic_ref<std::uint32_t>(ring.consumer->reader_sleeping).load(std::memory_order_relaxed) != 0;
  std::byte* const dst = stamp_bytes != 0 ? put_stamp(ring.payload_at(pos), stamp) : ring.payload_at(pos);
  std::memcpy(dst, &header, sizeof header);
  encode(request, dst + sizeof header);
  // The types this call was compiled with, not the point's word: a point copied by hand into other
  // types must be refused (type_mismatch), not answered with a reply of another size.
  commit<host_atomics>(ring, pos, stamp_bytes != 0 ? point.id | stamped_id_flag : point.id, call_fingerprint_v<Req, Rep>,
                       static_cast<std::uint32_t>(payload));
  // The reader gone before answering: the slot stays taken (the ring is finished; a late answer from a
  // handler still running may land in it).
  if (!host_await_answer(ring, slot, sequence, woke_reader)) return fail(call_errc::closed);
  const call_answer answer = read_answer(ring, slot);
  if (answer.status == call_errc::none) {
    Rep value;
    std::memcpy(static_cast<void*>(&value), answer.bytes, sizeof(Rep));  // serve() checked the sizes agree
    give_back_reply_slot<host_atomics>(ring, slot);
    return call_result<Rep>(value);
  }
  char slot_text[max_reply_bytes];  // copied out before the slot is given back; no allocation before that
  const std::size_t length = answer.length < max_reply_bytes ? answer.length : max_reply_bytes;
  std::memcpy(slot_text, answer.bytes, length);
  give_back_reply_slot<host_atomics>(ring, slot);
  return fail(answer.status, std::string_view(slot_text, length));
}

}  // namespace detail

/** A named scope on a host thread: begins when made, ends when destroyed or at `end()`. Both ends
 *  carry the name (copied) and its id, `scope_id(name)`. `cpu_context::scope` makes one. */
class scope_guard {
public:
  /** Taps the begin; throws as a tap does (outfeed_error). */
  scope_guard(const outfeed& out, std::string_view name);
  scope_guard(scope_guard&& other) noexcept
      : out_(other.out_), pin_(std::move(other.pin_)), name_(std::move(other.name_)), id_(other.id_),
        open_(std::exchange(other.open_, false)) {}
  scope_guard(const scope_guard&) = delete;
  scope_guard& operator=(const scope_guard&) = delete;
  scope_guard& operator=(scope_guard&&) = delete;
  /** Ends the scope if `end()` did not; never throws: an end that cannot be tapped is logged. */
  ~scope_guard();
  /** Taps the end now; throws as a tap does. Later calls, and the destructor, do nothing. */
  void end();
  std::uint32_t id() const noexcept { return id_; }
  const std::string& name() const noexcept { return name_; }

private:
  // Host code only: hidden from nvcc's device pass, where encoding a span would need
  // --expt-relaxed-constexpr in every .cu file that includes this header.
  void tap_phase(scope_phase phase) const {
#if !defined(__CUDA_ARCH__)
    detail::host_tap(out_, detail::scope_point(out_.receiver_id()), scope_event{id_, phase, {name_.data(), name_.size()}});
#else
    (void)phase;
#endif
  }
  outfeed out_;
  // The guard may outlive its receiver (returned from the device's work) and the next receivers of
  // the device: its end must still find the ring there (then it is refused: closed, and logged).
  detail::ring_pin pin_;
  std::string name_;
  std::uint32_t id_;
  bool open_ = false;
};

template <class Req, class Rep>
DEVTAP_HOST_DEVICE call_result<Rep> outfeed::call(const call_point<Req, Rep>& point, const Req& request) const {
#if defined(__CUDA_ARCH__)
  return detail::device_call(*this, point, request);  // devtap/cuda/call.cuh
#else
  return detail::host_call(*this, point, request, nullptr);
#endif
}

template <class T>
DEVTAP_HOST_DEVICE void outfeed::tap(const tap_point<T>& point, const T& value) const {
#if defined(__CUDA_ARCH__)
  detail::device_tap(*this, point, value);  // devtap/cuda/tap.cuh
#else
  detail::host_tap(*this, point, value);
#endif
}

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/tap/outfeed_impl.hpp>
#endif
