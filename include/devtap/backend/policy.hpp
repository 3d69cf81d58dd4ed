#pragma once
/** `backend_policy<B>`: what a compile-time backend type must provide.
 *
 * ```cpp
 * struct my_backend {
 *   static constexpr std::string_view name = "mydev";
 *   static constexpr int priority = 300;        // higher wins the default
 *   static constexpr bool required = false;     // true: a failed init is fatal
 *   static std::unique_ptr<devtap::client> create();   // may throw; called lazily
 * };
 * ```
 */
#include <devtap/backend/device.hpp>
#include <devtap/config.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <memory>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

/** Whether a backend name can be written in DEVTAP_PLATFORMS, which splits at commas and trims
 *  white space: non-empty, without either, nor control characters. */
constexpr bool listable_backend_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (const char c : name)
    if (c == ',' || c == ' ' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  return true;
}

// One concept per member, so a malformed policy gets one message naming what is wrong.
// The std::bool_constant requirements insist the member is a compile-time constant.
template <class B>
concept policy_has_name = requires {
  { B::name } -> std::convertible_to<std::string_view>;
  typename std::bool_constant<listable_backend_name(std::string_view(B::name))>;
} && listable_backend_name(std::string_view(B::name));

template <class B>
concept policy_has_priority = requires {
  typename std::integral_constant<int, B::priority>;
} && std::same_as<std::remove_cvref_t<decltype(B::priority)>, int>;

template <class B>
concept policy_has_required = requires {
  typename std::bool_constant<B::required>;
} && std::same_as<std::remove_cvref_t<decltype(B::required)>, bool>;

template <class B>
concept policy_has_create = requires {
  { B::create() } -> std::convertible_to<std::unique_ptr<client>>;
};

// Safe accessors: a malformed policy yields only check_backend_policy's static_assert, not a
// cascade of errors from every place the registry reads a member.
template <class B>
consteval std::string_view policy_name() {
  if constexpr (policy_has_name<B>) return std::string_view(B::name);
  else return {};
}
template <class B>
consteval int policy_priority() {
  if constexpr (policy_has_priority<B>) return B::priority;
  else return 0;
}
template <class B>
consteval bool policy_required() {
  if constexpr (policy_has_required<B>) return B::required;
  else return false;
}
template <class B>
std::unique_ptr<client> policy_create() {
  if constexpr (policy_has_create<B>) return B::create();
  else return nullptr;
}

struct backend_entry {
  std::string_view name;
  int priority;
  bool required;
  std::unique_ptr<client> (*create)();
};

/** Declaration indices sorted by descending priority; ties keep declaration order (stable). */
template <std::size_t N>
consteval std::array<std::size_t, N> order_by_priority(const std::array<backend_entry, N>& entries) {
  std::array<std::size_t, N> order{};
  for (std::size_t i = 0; i < N; ++i) order[i] = i;
  for (std::size_t i = 1; i < N; ++i)  // insertion sort: constexpr and stable
    for (std::size_t j = i; j > 0 && entries[order[j - 1]].priority < entries[order[j]].priority; --j) {
      const std::size_t t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  return order;
}

/** ASCII case-insensitive equality. */
constexpr bool equal_ignoring_case(std::string_view a, std::string_view b) noexcept {
  constexpr auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

template <std::size_t N>
consteval bool names_unique(const std::array<backend_entry, N>& entries) {
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = i + 1; j < N; ++j)
      if (equal_ignoring_case(entries[i].name, entries[j].name)) return false;  // as DEVTAP_PLATFORMS finds them
  return true;
}

/** What to add to "unknown backend 'cuda'" (or 'gpu') where the registry has no cuda backend. */
constexpr std::string_view cuda_hint(std::string_view name, bool has_cuda) noexcept {
  return !has_cuda && (equal_ignoring_case(name, "cuda") || equal_ignoring_case(name, "gpu"))
             ? "; devtap's cuda backend is built in only with DEVTAP_WITH_CUDA, which the devtap-cuda dependency defines"
             : "";
}

}  // namespace detail

/** A backend policy type: constant `name` (non-empty; no white space, commas or control
 * characters), `priority` (int), `required` (bool), and
 * a static `create()` returning a `std::unique_ptr` to a `devtap::client` (or derived). */
template <class B>
concept backend_policy = detail::policy_has_name<B> && detail::policy_has_priority<B> &&
                         detail::policy_has_required<B> && detail::policy_has_create<B>;

/** Checks `B` against `backend_policy` with one readable `static_assert` per missing member;
 * returns true when `B` conforms. `registry<B...>` calls it for each of its backends. */
template <class B>
consteval bool check_backend_policy() {
  static_assert(detail::policy_has_name<B>,
                "devtap backend policy: missing or invalid member `static constexpr std::string_view name` "
                "(must be a non-empty compile-time constant without white space, commas or control characters: "
                "DEVTAP_PLATFORMS lists names between commas)");
  static_assert(detail::policy_has_priority<B>,
                "devtap backend policy: missing or invalid member `static constexpr int priority`");
  static_assert(detail::policy_has_required<B>,
                "devtap backend policy: missing or invalid member `static constexpr bool required`");
  static_assert(detail::policy_has_create<B>,
                "devtap backend policy: missing or invalid member "
                "`static std::unique_ptr<devtap::client> create()`");
  return backend_policy<B>;
}

DEVTAP_END_NAMESPACE
