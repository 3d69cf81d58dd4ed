// create() must return something convertible to std::unique_ptr<devtap::client>.
#include "policy_cases.hpp"

struct bad {
  static constexpr std::string_view name = "bad";
  static constexpr int priority = 2;
  static constexpr bool required = false;
#if defined(DEVTAP_CONTROL)
  static std::unique_ptr<devtap::client> create() { return nullptr; }
#else
  static devtap::client* create() { return nullptr; }
#endif
};

devtap::registry<good_backend, bad> r{""};
int main() {}
