// A span the consumer could write through: attach<T> names the span rule.
#include <devtap/receiver.hpp>

#include <span>

#if defined(DEVTAP_CONTROL)
using values = std::span<const int>;
#else
using values = std::span<int>;
#endif

void attach_one(devtap::receiver& rx) {
  rx.attach<values>([](const values&) {});
}
int main() {}
