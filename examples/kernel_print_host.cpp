// The {fmt} formatter for kernel_print.cu (a .cu file cannot include {fmt}): including this header
// in one .cpp file of a program is all devtap::attach_print needs.
#include <devtap/print_host.hpp>
