// A devtap::field_names specialization without a usable `names` (misspelt, or not strings) is an
// error: ignoring it would leave the trace keyed "0", "1", ... with no word said.
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
  static constexpr std::array name{"x", "y"};
#endif
};

void attach_one(devtap::receiver& rx) { rx.attach<point>([](const point&) {}); }
int main() {}
