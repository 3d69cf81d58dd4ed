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
    // Plausible headers are where the bugs hide: sprinkle stamps (the target turns a 0xA5/0xA6 top
    // byte into this lap's / the last lap's stamp, kind in the low bits) followed by small lengths.
    for (std::size_t off = 8; off + 12 <= buf.size(); off += 8 * (1 + rng() % 4)) {
      const std::uint64_t kind = rng() % 4 == 0 ? rng() % 8 : rng() % 2 == 0 ? 0 : rng() % 3;
      const std::uint64_t stamp = (std::uint64_t{rng() % 5 == 0 ? 0xA6u : 0xA5u} << 56) | kind;
      std::uint32_t len = static_cast<std::uint32_t>(rng() % 600);
      if (rng() % 8 == 0) len = 0;
      std::memcpy(&buf[off], &stamp, 8);
      std::memcpy(&buf[off + 8], &len, 4);
    }
    if (rng() % 2 == 0) {  // the reader starts where the first stamp is (ring offset 0), in any lap
      const std::uint64_t start = rng() & ~std::uint64_t{511};
      std::memcpy(buf.data(), &start, 8);
    }
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
  }
  return 0;
}
