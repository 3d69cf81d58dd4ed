// devtap::field_names: two fields with one name would make two members with one key in a trace
// event's arguments, and JSON readers keep only one of them.
#include <devtap/receiver.hpp>

#include <string_view>
#include <tuple>

using pair = std::tuple<int, int>;
template <>
struct devtap::field_names<pair> {
#if defined(DEVTAP_CONTROL)
  static constexpr std::string_view names[] = {"lo", "hi"};
#else
  static constexpr std::string_view names[] = {"lo", "lo"};
#endif
};

void attach_one(devtap::receiver& rx) { rx.attach<pair>([](const pair&) {}); }
int main() {}
