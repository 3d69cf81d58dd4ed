// A consumer coroutine may co_await only in.next(): anything else would resume it away from the
// receiver's thread, after its record was freed.
#include <devtap/receiver/consumer.hpp>

devtap::consumer<int> sum(devtap::inbox<int> in) {
#if defined(DEVTAP_CONTROL)
  while (auto v = co_await in.next()) (void)*v;
#else
  co_await std::suspend_always{};
#endif
}
int main() {}
