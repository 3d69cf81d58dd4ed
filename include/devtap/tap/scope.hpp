#pragma once
/** Scopes: device code marks a span of time — `auto s = ctx.scope("forward");` on a cpu device,
 *  `out.scope_begin(id)` / `out.scope_end(id)` in a kernel or on a host thread — and each end
 *  travels through the ring as a record, in order with the device's taps (docs/timeline.md). */
#include <devtap/config.hpp>
#include <devtap/tap/fingerprint.hpp>
#include <devtap/tap/tap_info.hpp>
#include <devtap/tap/tap_point.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

DEVTAP_BEGIN_NAMESPACE

/** Which end of a scope a scope_event marks. */
enum class scope_phase : std::uint32_t { begin = 1, end = 2 };

/** One end of a scope, as `rx.attach<devtap::scope_event>(fn)` consumers receive it (the trace
 *  file draws begin and end as one span). With timestamps, tap_info::time is when it was marked. */
struct scope_event {
  std::uint32_t id = 0;                     ///< a kernel's id; a named scope's: scope_id(name)
  scope_phase phase = scope_phase::begin;
  std::span<const char> name{};             ///< a named scope's name, valid during the call; empty from a kernel
  /** The name as text (empty for a kernel's scope: name it with receiver::name_scope). */
  std::string_view text() const noexcept { return {name.data(), name.size()}; }
};

/** The id a named scope carries: FNV-1a of its name, so one name is one id on every device (and
 *  a kernel may name its scope ids alike: `out.scope_begin(devtap::scope_id("solve"))`). */
DEVTAP_HOST_DEVICE constexpr std::uint32_t scope_id(const char* name, std::size_t size) noexcept {
  std::uint32_t h = 0x811c9dc5u;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ static_cast<unsigned char>(name[i])) * 0x01000193u;
  return h;
}
/** As above, for a string literal or a char array, up to its first NUL as a string_view would
 *  read it (host and device code). */
template <std::size_t N>
DEVTAP_HOST_DEVICE constexpr std::uint32_t scope_id(const char (&name)[N]) noexcept {
  std::size_t size = 0;
  while (size < N && name[size] != '\0') ++size;
  return scope_id(name, size);
}
/** As above (host code). */
constexpr std::uint32_t scope_id(std::string_view name) noexcept { return scope_id(name.data(), name.size()); }

namespace detail {

/** The consumer id of every scope record: below the stamp flag, far above any attach()'s id. The
 *  reader hands such records to every consumer of scope_event (receiver::attach<scope_event>). */
inline constexpr std::uint32_t scope_record_id = stamped_id_flag - 1;

/** The point scope records are tapped through, on the receiver `receiver_id`. */
DEVTAP_HOST_DEVICE constexpr tap_point<scope_event> scope_point(std::uint32_t receiver_id) noexcept {
  return tap_point<scope_event>{scope_record_id, type_fingerprint_v<scope_event>, receiver_id};
}

/** A scope_event without a name, as plain bytes: the same 16 bytes its encoding is (id, phase, a
 *  span's count of 0), so that kernels mark scopes without std::span in device code (which nvcc
 *  takes only with --expt-relaxed-constexpr). Tapped with scope_event's fingerprint. */
struct unnamed_scope_event {
  std::uint32_t id;
  scope_phase phase;
  std::uint64_t name_size;  // always 0
};
static_assert(sizeof(unnamed_scope_event) == 16);

DEVTAP_HOST_DEVICE constexpr tap_point<unnamed_scope_event> unnamed_scope_point(std::uint32_t receiver_id) noexcept {
  return tap_point<unnamed_scope_event>{scope_record_id, type_fingerprint_v<scope_event>, receiver_id};
}

}  // namespace detail
DEVTAP_END_NAMESPACE
