// A name that is not a compile-time constant cannot be sorted or checked at compile time.
#include "policy_cases.hpp"

struct bad {
#if defined(DEVTAP_CONTROL)
  static constexpr std::string_view name = "bad";
#else
  static inline std::string_view name = "bad";
#endif
  static constexpr int priority = 2;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};

devtap::registry<good_backend, bad> r{""};
int main() {}
