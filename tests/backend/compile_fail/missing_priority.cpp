#include "policy_cases.hpp"

struct bad {
  static constexpr std::string_view name = "bad";
#if defined(DEVTAP_CONTROL)
  static constexpr int priority = 2;
#endif
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};

devtap::registry<good_backend, bad> r{""};
int main() {}
