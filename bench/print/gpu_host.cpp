// The {fmt} formatter for gpu.cu (a .cu file cannot include {fmt}).
#include <devtap/print_host.hpp>
