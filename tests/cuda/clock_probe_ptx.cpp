// Writes the clock probe's PTX (cuda/ring_allocation_impl.hpp) to the file named by argv[1], so that
// the build's ptxas checks it without a GPU: the probe is loaded at run time from this text, where a
// syntax error would only show on a GPU machine.
#include <devtap/backend/cuda.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  std::FILE* f = std::fopen(argv[1], "w");
  if (f == nullptr) return 1;
  const bool ok = std::fputs(devtap::detail::clock_probe_ptx, f) >= 0;
  return std::fclose(f) == 0 && ok ? 0 : 1;
}
