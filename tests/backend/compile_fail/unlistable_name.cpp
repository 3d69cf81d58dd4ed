// A name DEVTAP_PLATFORMS could never select: the list splits at commas and trims white space.
#include "policy_cases.hpp"

struct bad : good_backend {  // all but the name and priority from the well-formed one
#if defined(DEVTAP_CONTROL)
  static constexpr std::string_view name = "bad";
#else
  static constexpr std::string_view name = "my,dev";
#endif
  static constexpr int priority = 2;
};

devtap::registry<good_backend, bad> r{""};
int main() {}
