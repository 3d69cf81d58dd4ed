// devtap::field_names names the fields of an aggregate or a tuple; a scalar (or a class whose
// fields devtap cannot see) has none, and names given for it would silently go unused.
#include <devtap/receiver.hpp>

#include <array>

enum class phase : int { warmup, train };
struct run_state {
  phase p;
};
#if defined(DEVTAP_CONTROL)
template <>
struct devtap::field_names<run_state> {
  static constexpr std::array names{"phase"};
};
void attach_one(devtap::receiver& rx) { rx.attach<run_state>([](const run_state&) {}); }
#else
template <>
struct devtap::field_names<phase> {
  static constexpr std::array names{"phase"};
};
void attach_one(devtap::receiver& rx) { rx.attach<phase>([](const phase&) {}); }
#endif
int main() {}
