// A name DEVTAP_PLATFORMS could never select: the list splits at commas and trims white space.
#include "policy_cases.hpp"

struct bad {
#if defined(DEVTAP_CONTROL)
  static constexpr std::string_view name = "bad";
#else
  static constexpr std::string_view name = "my,dev";
#endif
  static constexpr int priority = 2;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};

devtap::registry<good_backend, bad> r{""};
int main() {}
