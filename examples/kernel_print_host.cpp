// The {fmt} formatter for kernel_print.cu (a .cu file cannot include {fmt}): including this header
// in exactly one .cpp file of a program is all devtap::attach_print needs (without it, or with it in
// two files, the program does not link).
#include <devtap/print_host.hpp>
