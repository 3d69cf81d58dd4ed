// Two backends named "good" and "GOOD": the registry must refuse to compile (DEVTAP_PLATFORMS
// finds names ignoring case, so it could not tell them apart).
#include "policy_cases.hpp"

struct same_name {
#if defined(DEVTAP_CONTROL)
  static constexpr std::string_view name = "other";
#else
  static constexpr std::string_view name = "GOOD";
#endif
  static constexpr int priority = 2;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};

devtap::registry<good_backend, same_name> r{""};
int main() {}
