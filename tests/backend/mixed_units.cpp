// Built twice into one program by mixed_units.sh: the caller, and the callee (-DDEVTAP_MIXED_CALLEE),
// each with its own devtap setting. A devtap type crosses between them, as in any real program.
#include <devtap/backend/device.hpp>

bool is_missing(const devtap::device* dev);

#if defined(DEVTAP_MIXED_CALLEE)
bool is_missing(const devtap::device* dev) { return dev == nullptr; }
#else
int main() { return is_missing(nullptr) ? 0 : 1; }
#endif
