// A callable consumer takes exactly `const T&` or `T` (then optionally `const devtap::device&`):
// a consumer of int attached for double would be fed 2 for 2.75 through a silent conversion.
#include <devtap/receiver.hpp>

void attach_one(devtap::receiver& rx) {
#if defined(DEVTAP_CONTROL)
  rx.attach<double>([](const double&) {});
  rx.attach<double>([](double, const devtap::device&) {});
  rx.attach<double>([](const auto&) {});  // a generic lambda gets const double&
#else
  rx.attach<double>([](const int&) {});
#endif
}
int main() {}
