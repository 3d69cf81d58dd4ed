// The formatter for this folder's .cu programs: a .cu file cannot include {fmt}, so a program that
// prints from kernels includes <devtap/print_host.hpp> in exactly one .cpp file; this is that whole file.
#include <devtap/print_host.hpp>
