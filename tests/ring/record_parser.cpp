// libFuzzer target over the host side of the ring: whatever bytes sit in a ring, the reader
// classifies, decodes and releases records without reading outside it, and never loops forever.
// Built with clang -fsanitize=fuzzer when -Dfuzz=true; otherwise fuzz_main.cpp drives it with
// random inputs as an ordinary test.
#include <devtap/tap/codec.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/ring/read.hpp>

#include <cstring>
#include <span>
#include <tuple>

namespace {
struct sample {
  int step;
  float loss;
  std::span<const double> values;
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace devtap::detail;
  constexpr std::uint64_t capacity = 512;
  host_ring_allocation ring(capacity);
  if (size < 8) return 0;
  std::uint64_t start;  // where the reader starts: any 8-aligned position, any lap
  std::memcpy(&start, data, 8);
  start &= ~std::uint64_t{7};
  data += 8, size -= 8;
  std::memcpy(ring.host.data, data, std::min<std::size_t>(size, capacity));
  // Stamps carry a key the input cannot know: a word whose top byte is 0xA5 becomes the stamp of its
  // position in the reader's lap (kind: its low 3 bits), 0xA6 that of the lap before (stale bytes).
  for (std::uint64_t off = 0; off < capacity; off += 8) {
    std::uint64_t word;
    std::memcpy(&word, ring.host.data + off, 8);
    const std::uint64_t marker = word >> 56;
    if (marker != 0xA5 && marker != 0xA6) continue;
    const std::uint64_t pos = start + ((off - start) & (capacity - 1)) - (marker == 0xA6 ? capacity : 0);
    word = ring.host.stamp(pos, word & stamp_kind_mask);
    std::memcpy(ring.host.data + off, &word, 8);
  }
  ring.host.consumer->head = start;
  ring_reader reader(ring.host);
  volatile std::uint64_t sink = 0;
  for (int i = 0; i < 1024; ++i) {  // every record takes >= 8 bytes (padding): a lap is at most 64 of them
    const record_ref rec = reader.peek();
    if (rec.kind == record_kind::empty || rec.kind == record_kind::malformed) break;
    if (rec.kind == record_kind::data) {
      for (std::uint32_t b = 0; b < rec.payload_bytes; ++b) sink = sink + static_cast<std::uint8_t>(rec.payload[b]);
      int i32;
      sample s{};
      std::tuple<std::span<const std::uint16_t>, char> t;
      if (decode(rec.payload, rec.payload_bytes, i32)) sink = sink + static_cast<std::uint64_t>(i32);
      if (decode(rec.payload, rec.payload_bytes, s))
        for (double d : s.values) sink = sink + static_cast<std::uint64_t>(d != 0);
      if (decode(rec.payload, rec.payload_bytes, t))
        for (auto v : std::get<0>(t)) sink = sink + v;
    }
    reader.release(rec);
  }
  return 0;
}
