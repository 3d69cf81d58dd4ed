// attach_print's formatter is a link-time requirement (docs/print.md): a program without
// <devtap/print_host.hpp> does not link, nor does one that includes it in two files. Each case is
// linked by expect_link_error.sh; with -DDEVTAP_CONTROL it is the sound program, which links.
// DEVTAP_PRINT_SECOND_TU builds this file's second translation unit.
#include <devtap/print.hpp>

#if defined(DEVTAP_PRINT_SECOND_TU)
#  if defined(DEVTAP_PRINT_CASE_twice) && !defined(DEVTAP_CONTROL)
#    include <devtap/print_host.hpp>
#  endif
devtap::print_channel attach_in_second_file(devtap::receiver& rx) { return devtap::attach_print(rx); }
#else
#  if !defined(DEVTAP_PRINT_CASE_missing) || defined(DEVTAP_CONTROL)
#    include <devtap/print_host.hpp>
#  endif
devtap::print_channel attach_here(devtap::receiver& rx) { return devtap::attach_print(rx); }
int main() {}
#endif
