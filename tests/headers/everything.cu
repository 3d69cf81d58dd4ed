// The {fmt}-free headers through nvcc -std=c++20 (a .cu file includes them for its kernels), with
// the host compiler's -Wall -Wextra as errors (tests/headers/meson.build). Not -Wpedantic: the host
// compiler then flags nvcc's own line markers.
#include <devtap/devtap.hpp>
#include <devtap/outfeed.hpp>  // the receiver umbrella's old name: the one {fmt}-free header devtap.hpp does not reach

#include "exercise.hpp"

__global__ void headers_check_kernel(devtap::outfeed out, devtap::tap_point<headers_check::sample> point) {
  (void)out;
  (void)point;
}

std::uint64_t headers_check_exercise_cu() { return headers_check::exercise(); }
