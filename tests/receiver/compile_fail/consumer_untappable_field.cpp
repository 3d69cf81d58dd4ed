// An aggregate with a field that cannot be tapped: attach<T> names the rule for fields.
#include <devtap/receiver.hpp>

#include <array>
#include <string>

struct labelled {
  int step = 0;
#if defined(DEVTAP_CONTROL)
  std::array<char, 16> label{};
#else
  std::string label;
#endif
};

void attach_one(devtap::receiver& rx) {
  rx.attach<labelled>([](const labelled&) {});
}
int main() {}
