// devtap::field_names gives one name per field: a name missing (or one too many) would shift every
// key after it onto the wrong value in the trace.
#include <devtap/receiver.hpp>

#include <array>

struct step_stats {
  int step;
  float loss;
  float grad_norm;
};
template <>
struct devtap::field_names<step_stats> {
#if defined(DEVTAP_CONTROL)
  static constexpr std::array names{"step", "loss", "grad_norm"};
#else
  static constexpr std::array names{"step", "loss"};
#endif
};

void attach_one(devtap::receiver& rx) { rx.attach<step_stats>([](const step_stats&) {}); }
int main() {}
