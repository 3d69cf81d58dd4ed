// compile-cost unit (e): includes devtap.hpp and uses nothing (what a header costs by itself).
#include <devtap/devtap.hpp>
#include <fmt/core.h>

int main() { fmt::print("nothing tapped\n"); }
