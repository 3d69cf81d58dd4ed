// devtap::field_names: "sequence" is the key the trace file adds beside a tap's fields (the
// record's sequence number); a field of that name would be hidden by it. A nested type may use it.
#include <devtap/receiver.hpp>

#include <array>

struct inner {
  long sequence;
};
template <>
struct devtap::field_names<inner> {
  static constexpr std::array names{"sequence"};
};
struct sample {
  int sequence;
  inner nested;
};
template <>
struct devtap::field_names<sample> {
#if defined(DEVTAP_CONTROL)
  static constexpr std::array names{"seq", "nested"};
#else
  static constexpr std::array names{"sequence", "nested"};
#endif
};

void attach_one(devtap::receiver& rx) { rx.attach<sample>([](const sample&) {}); }
int main() {}
