// A call handler's second parameter is `const devtap::tap_info&` or `const devtap::device&`, nothing
// else: one sentence at the user's line names both.
#include <devtap/receiver.hpp>

void serve_one(devtap::receiver& rx) {
#if defined(DEVTAP_CONTROL)
  rx.serve<int, int>([](const int& q, const devtap::tap_info&) { return q; });
#else
  rx.serve<int, int>([](const int& q, const int&) { return q; });
#endif
}
int main() {}
