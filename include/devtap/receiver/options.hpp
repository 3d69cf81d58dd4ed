#pragma once
/** `receiver_options`: how a receiver is set up. */
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>
#include <devtap/ring/layout.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** How a receiver is set up. Give `devices` or `backends`, not both; neither means every device. */
struct receiver_options {
  std::vector<device*> devices{};         ///< these devices
  std::vector<std::string> backends{};    ///< or every device of these backends
  std::size_t budget_bytes = std::size_t{256} << 20;  ///< ring memory in all, split evenly over the devices
  overflow_policy overflow = overflow_policy::block;
  std::chrono::milliseconds close_timeout = std::chrono::seconds(10);  ///< also bounds flush()
  std::string name{};                     ///< for logs and errors
};

namespace detail {
/** "block", "drop" or "error": the policy as logs and messages name it. */
constexpr std::string_view policy_name(overflow_policy p) noexcept {
  switch (p) {
    case overflow_policy::block: return "block";
    case overflow_policy::drop: return "drop";
    case overflow_policy::error: return "error";
  }
  return "unknown";
}
}  // namespace detail

DEVTAP_END_NAMESPACE
