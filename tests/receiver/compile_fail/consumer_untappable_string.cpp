// A std::string owns memory elsewhere: attach<T> says so, and what to tap instead.
#include <devtap/receiver.hpp>

#include <array>
#include <string>

#if defined(DEVTAP_CONTROL)
using text = std::array<char, 32>;
#else
using text = std::string;
#endif

void attach_one(devtap::receiver& rx) {
  rx.attach<text>([](const text&) {});
}
int main() {}
