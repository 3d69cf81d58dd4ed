// T is tappable (trivially copyable) but has no default constructor: the receiver decodes each
// record into a T, so attach rejects it with one message at the call, not from inside <optional>.
#include <devtap/receiver.hpp>

struct reading {
#if defined(DEVTAP_CONTROL)
  reading() = default;
#endif
  explicit reading(int v) : value(v) {}
  int value = 0;
};
static_assert(devtap::tappable<reading>);

void attach_one(devtap::receiver& rx) {
  rx.attach<reading>([](const reading&) {});
}
int main() {}
