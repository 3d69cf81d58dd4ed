// The same rule for a consumer that also takes the device, and for a function pointer: no
// conversion of the value (here: a consumer of int attached for std::int64_t).
#include <devtap/receiver.hpp>

#include <cstdint>

void on_value(const int&, const devtap::device&) {}
void on_value64(const std::int64_t&, const devtap::device&) {}

void attach_one(devtap::receiver& rx) {
#if defined(DEVTAP_CONTROL)
  rx.attach<std::int64_t>(&on_value64);
#else
  rx.attach<std::int64_t>(&on_value);
#endif
}
int main() {}
