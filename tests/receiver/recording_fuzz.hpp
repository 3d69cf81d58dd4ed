#pragma once
// What the recording fuzz target (recording_fuzz.cpp) and its driver (recording_fuzz_main.cpp)
// share: the seed's types and what the last input came to.
#include <devtap/replay.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <tuple>

namespace devtap_fuzz {

// The seed's types: the driver records them, the target attaches consumers of them by name.
struct fuzz_sample {
  int id = 0;
  std::span<const int> data{};
  double weight = 0;
};
struct fuzz_plain {  // its bool: replay must refuse a byte other than 0 or 1 there (UBSan reads it)
  int a = 0;
  double b = 0;
  std::array<char, 5> c{};
  std::uint8_t d = 0;
  bool e = false;
};
using fuzz_tagged = std::tuple<std::int16_t, std::span<const double>, char>;

/** What the last LLVMFuzzerTestOneInput saw: recording_fuzz_main.cpp checks its seeds with it. */
struct fuzz_result {
  enum class outcome { not_a_file, replayed, refused } what = outcome::not_a_file;
  std::string message;            // refused: what()
  devtap::replay_stats stats{};   // replayed
  std::size_t devices = 0;
  std::size_t attached = 0;       // consumers attached (of the 8 below)
  std::uint64_t counted = 0;      // deliveries the consumers counted (== stats.delivered)
  std::uint64_t n_values = 0;     // "n" records the per-device callable saw, and their sum
  std::uint64_t n_sum = 0;
  std::uint64_t n_coroutine = 0;  // ... the coroutines, the merged consumer
  std::uint64_t n_merged = 0;
  std::uint64_t samples = 0, sample_ints = 0, plains = 0, tagged = 0, scopes = 0;
  std::uint64_t ends = 0;         // coroutine streams that saw their end
};
const fuzz_result& last_result();
/** The file each input is written to (a crash leaves its input there). */
const std::string& input_file();

}  // namespace devtap_fuzz
