// Runs the fuzz target on random and mutated inputs without libFuzzer (every compiler, every CI build).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 20000;
  std::mt19937_64 rng(12345);
  std::vector<std::uint8_t> buf;
  for (int r = 0; r < runs; ++r) {
    buf.assign(8 + rng() % 600, 0);
    for (auto& b : buf) b = static_cast<std::uint8_t>(rng());
    // Plausible headers are where the bugs hide: sprinkle small lengths and the flag bits.
    for (std::size_t off = 8; off + 4 <= buf.size(); off += 8 * (1 + rng() % 4)) {
      std::uint32_t len = static_cast<std::uint32_t>(rng() % 600);
      if (rng() % 4 == 0) len |= 1u << 31;
      if (rng() % 4 == 0) len |= 1u << 30;
      if (rng() % 8 == 0) len = 0;
      std::memcpy(&buf[off], &len, 4);
    }
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
  }
  return 0;
}
