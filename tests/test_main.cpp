#if defined(__has_feature)
#  if __has_feature(thread_sanitizer)
#    define DEVTAP_TEST_TSAN 1
#  endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(DEVTAP_TEST_TSAN)
// Catch's signal handlers run on an alternate stack, which TSan reports as signal-unsafe calls.
#  define CATCH_CONFIG_NO_POSIX_SIGNALS
#endif
// Catch indents a failed test's wrapped name past its last ": ", and aborts where that is past the
// width (80 by default): several names here have one near column 90.
#define CATCH_CONFIG_CONSOLE_WIDTH 160
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
