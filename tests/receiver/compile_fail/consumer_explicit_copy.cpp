// T is tappable (trivially copyable) but its copy constructor is explicit: the receiver hands
// values over by value (std::optional<T>), so attach rejects it with one message at the call.
#include <devtap/receiver.hpp>

struct reading {
  reading() = default;
#if defined(DEVTAP_CONTROL)
  reading(const reading&) = default;
#else
  explicit reading(const reading&) = default;
#endif
  int value = 0;
};
static_assert(devtap::tappable<reading>);

void attach_one(devtap::receiver& rx) {
  rx.attach<reading>([](const reading& r) { (void)r.value; });
}
int main() {}
