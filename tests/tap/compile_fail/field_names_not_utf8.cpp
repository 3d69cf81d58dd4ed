// devtap::field_names: a name that is not valid UTF-8 is written with U+FFFD in its place, so
// "\xff" and "\xfe" would both become the same key in a trace event's arguments.
#include <devtap/receiver.hpp>

#include <string_view>
#include <tuple>

using pair = std::tuple<int, int>;
template <>
struct devtap::field_names<pair> {
#if defined(DEVTAP_CONTROL)
  static constexpr std::string_view names[] = {"\xc3\xa9t\xc3\xa9", "\xf0\x9f\x99\x82"};  // été, an emoji
#else
  static constexpr std::string_view names[] = {"\xff", "\xfe"};
#endif
};

void attach_one(devtap::receiver& rx) { rx.attach<pair>([](const pair&) {}); }
int main() {}
