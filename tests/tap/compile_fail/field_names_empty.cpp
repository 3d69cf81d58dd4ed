// devtap::field_names: an empty name is no key a trace viewer can show.
#include <devtap/receiver.hpp>

#include <array>

struct point {
  float x, y;
};
template <>
struct devtap::field_names<point> {
#if defined(DEVTAP_CONTROL)
  static constexpr std::array names{"x", "y"};
#else
  static constexpr std::array names{"x", ""};
#endif
};

void attach_one(devtap::receiver& rx) { rx.attach<point>([](const point&) {}); }
int main() {}
