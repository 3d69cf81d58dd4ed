// The ring protocol alone (no receiver): claim/commit/abort, padding at the wrap, positions by
// difference, zeroed free space, and many producers against one reader.
#include <devtap/ring/memory.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/ring/read.hpp>

#include <catch2/catch.hpp>

#include <cstring>
#include <thread>
#include <vector>

using namespace devtap::detail;

namespace {
bool write_record(const ring_view& ring, std::uint32_t id, std::uint32_t payload, std::uint8_t fill) {
  std::uint64_t pos;
  if (!try_claim<host_atomics>(ring, record_bytes(payload), pos)) return false;
  std::memset(ring.payload_at(pos), fill, payload);
  commit<host_atomics>(ring, pos, id, 42, payload);
  return true;
}

bool all_zero(const std::byte* p, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}
}  // namespace

TEST_CASE("records come out in order, in place, and free space is zeroed") {
  host_ring_allocation mem(1024);
  ring_reader reader(mem.host);
  REQUIRE(reader.peek().kind == record_kind::empty);
  for (std::uint32_t i = 1; i <= 5; ++i) REQUIRE(write_record(mem.producer, i, i * 3, static_cast<std::uint8_t>(i)));
  for (std::uint32_t i = 1; i <= 5; ++i) {
    auto rec = reader.peek();
    REQUIRE(rec.kind == record_kind::data);
    CHECK(rec.header->consumer_id == i);
    CHECK(rec.header->fingerprint == 42);
    CHECK(rec.payload_bytes == i * 3);
    CHECK(rec.bytes == record_bytes(i * 3));
    for (std::uint32_t b = 0; b < i * 3; ++b) CHECK(rec.payload[b] == std::byte{static_cast<std::uint8_t>(i)});
    reader.release(rec);
  }
  CHECK(reader.peek().kind == record_kind::empty);
  CHECK(all_zero(mem.host.data, 1024));
}

TEST_CASE("a full ring refuses claims until the reader publishes") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  int written = 0;
  while (write_record(mem.producer, 1, 16, 0xAB)) ++written;
  CHECK(written == 256 / 32);
  auto rec = reader.peek();
  reader.release(rec);
  CHECK_FALSE(write_record(mem.producer, 1, 16, 0xAB));  // released but not yet published
  reader.publish();
  CHECK(write_record(mem.producer, 1, 16, 0xAB));
}

TEST_CASE("a record that would cross the end is preceded by padding") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  for (int i = 0; i < 2; ++i) {  // 2 x 96 bytes: offset 0..192
    REQUIRE(write_record(mem.producer, 1, 96 - 16, 1));
    reader.release(reader.peek());
  }
  reader.publish();
  REQUIRE(write_record(mem.producer, 2, 72 - 16, 2));  // does not fit in the 64 bytes left: pad then wrap
  auto pad = reader.peek();
  REQUIRE(pad.kind == record_kind::skip);
  CHECK(pad.bytes == 64);
  reader.release(pad);
  auto rec = reader.peek();
  REQUIRE(rec.kind == record_kind::data);
  CHECK(rec.header->consumer_id == 2);
  CHECK(reinterpret_cast<const std::byte*>(rec.header) == mem.host.data);  // it starts at offset 0
  reader.release(rec);
  reader.publish();
  CHECK(all_zero(mem.host.data, 256));
}

TEST_CASE("an aborted claim is skipped and its bytes zeroed") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  std::uint64_t pos;
  REQUIRE(try_claim<host_atomics>(mem.producer, record_bytes(40), pos));
  std::memset(mem.producer.payload_at(pos), 0xFF, 40);
  REQUIRE(write_record(mem.producer, 7, 8, 7));
  CHECK(reader.peek().kind == record_kind::empty);  // claimed, not committed: BUSY stops the reader
  abort<host_atomics>(mem.producer, pos, record_bytes(40));
  auto skipped = reader.peek();
  REQUIRE(skipped.kind == record_kind::skip);
  reader.release(skipped);
  auto rec = reader.peek();
  REQUIRE(rec.kind == record_kind::data);
  CHECK(rec.header->consumer_id == 7);
  reader.release(rec);
  CHECK(all_zero(mem.host.data, 256));
}

TEST_CASE("a commit rings a sleeping reader once, clearing its flag; a busy reader is never rung") {
  host_ring_allocation mem(1024);
  auto* words = mem.host.consumer;
  REQUIRE(write_record(mem.producer, 1, 8, 1));
  CHECK(words->doorbell == 0);  // the reader is not asleep: commits leave the doorbell alone
  words->reader_sleeping = 1;   // what the reader sets before it waits on the doorbell
  REQUIRE(write_record(mem.producer, 2, 8, 2));
  CHECK(words->doorbell == 1);
  CHECK(words->reader_sleeping == 0);  // the ringer cleared it: later commits make no system call
  for (std::uint32_t i = 3; i < 10; ++i) REQUIRE(write_record(mem.producer, i, 8, 3));
  CHECK(words->doorbell == 1);
}

TEST_CASE("positions compare by difference across the 64-bit wrap") {
  host_ring_allocation mem(256);
  const std::uint64_t start = (~std::uint64_t{0} - 100) & ~std::uint64_t{7};  // about to wrap, 8-aligned
  mem.host.producer->tail = start;
  mem.host.producer->head_cache = start;
  mem.host.consumer->head = start;
  ring_reader reader(mem.host);
  for (int round = 0; round < 40; ++round) {
    REQUIRE(write_record(mem.producer, 3, 24, static_cast<std::uint8_t>(round)));
    REQUIRE(write_record(mem.producer, 4, 40, static_cast<std::uint8_t>(round)));
    for (std::uint32_t id : {3u, 4u}) {
      auto rec = reader.peek();
      while (rec.kind == record_kind::skip) {
        reader.release(rec);
        rec = reader.peek();
      }
      REQUIRE(rec.kind == record_kind::data);
      CHECK(rec.header->consumer_id == id);
      reader.release(rec);
    }
    reader.publish();
  }
  CHECK(mem.host.consumer->head < start);  // it wrapped
}

TEST_CASE("malformed headers are reported, never followed out of the ring") {
  host_ring_allocation mem(256);
  auto* h = mem.host.header_at(0);
  SECTION("length beyond the ring") { h->length = 4096; }
  SECTION("padding that does not reach the end") { h->length = pad_flag | 64; }
  SECTION("discard shorter than a header") { h->length = discard_flag | 8; }
  SECTION("pad and discard at once") { h->length = pad_flag | discard_flag | 256; }
  CHECK(inspect(mem.host, 0).kind == record_kind::malformed);
}

TEST_CASE("records of every size up to the maximum survive many wraps") {
  host_ring_allocation mem(1024);
  ring_reader reader(mem.host);
  const std::uint32_t max_payload = static_cast<std::uint32_t>(max_record_bytes(1024) - sizeof(record_header));
  std::uint32_t seq = 0;
  for (int lap = 0; lap < 3; ++lap)
    for (std::uint32_t size = 0; size <= max_payload; ++size) {
      ++seq;
      if (!write_record(mem.producer, seq, size, static_cast<std::uint8_t>(seq))) {
        // Above half the ring, the padding goes first and the record waits for the reader to pass it.
        REQUIRE(record_bytes(size) > 512);
        auto pad = reader.peek();
        REQUIRE(pad.kind == record_kind::skip);
        reader.release(pad);
        reader.publish();
        REQUIRE(write_record(mem.producer, seq, size, static_cast<std::uint8_t>(seq)));
      }
      auto rec = reader.peek();
      while (rec.kind == record_kind::skip) {
        reader.release(rec);
        rec = reader.peek();
      }
      REQUIRE(rec.kind == record_kind::data);
      REQUIRE(rec.header->consumer_id == seq);
      REQUIRE(rec.payload_bytes == size);
      for (std::uint32_t b = 0; b < size; ++b) REQUIRE(rec.payload[b] == std::byte{static_cast<std::uint8_t>(seq)});
      reader.release(rec);
      reader.publish();
    }
  CHECK(all_zero(mem.host.data, 1024));
}

TEST_CASE("many producers, one reader: every record once, per-producer order kept") {
  constexpr int producers = 4;
  constexpr std::uint32_t per_producer = 20000;
  host_ring_allocation mem(4096);
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      for (std::uint32_t i = 0; i < per_producer; ++i) {
        const std::uint32_t size = 8 + (i % 5) * 8;
        std::uint64_t pos;
        while (!try_claim<host_atomics>(mem.producer, record_bytes(size), pos)) std::this_thread::yield();
        std::uint32_t words[2] = {static_cast<std::uint32_t>(p), i};
        std::memcpy(mem.producer.payload_at(pos), words, sizeof words);
        commit<host_atomics>(mem.producer, pos, 1, 0, size);
      }
    });
  ring_reader reader(mem.host);
  std::vector<std::uint32_t> next(producers, 0);
  std::uint64_t seen = 0;
  while (seen < std::uint64_t{producers} * per_producer) {
    auto rec = reader.peek();
    if (rec.kind == record_kind::empty) {
      reader.publish();
      std::this_thread::yield();
      continue;
    }
    REQUIRE(rec.kind != record_kind::malformed);
    if (rec.kind == record_kind::data) {
      std::uint32_t words[2];
      std::memcpy(words, rec.payload, sizeof words);
      REQUIRE(words[0] < producers);
      REQUIRE(words[1] == next[words[0]]);
      ++next[words[0]];
      ++seen;
    }
    reader.release(rec);
  }
  for (auto& t : threads) t.join();
  for (auto n : next) CHECK(n == per_producer);
}

namespace {
// host_atomics, except that the first load of the tail returns an older value: what a producer sees
// when other producers and the reader moved on between its load of the tail and its look at the head.
struct stale_tail_atomics : host_atomics {
  static inline const std::uint64_t* tail_address = nullptr;
  static inline std::uint64_t stale_tail = 0;
  static inline int stale_loads_left = 0;
  template <class T>
  struct producer_ref : std::atomic_ref<T> {
    explicit producer_ref(T& word) : std::atomic_ref<T>(word), address(&word) {}
    T load(std::memory_order order) const noexcept {
      if (address == tail_address && stale_loads_left > 0) {
        --stale_loads_left;
        return static_cast<T>(stale_tail);
      }
      return std::atomic_ref<T>::load(order);
    }
    const T* address;
  };
};
}  // namespace

TEST_CASE("a producer that read a stale tail reloads it instead of seeing an empty ring as full") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  for (int i = 0; i < 4; ++i) {  // producers and the reader have moved to position 128
    REQUIRE(write_record(mem.producer, 1, 16, 1));
    reader.release(reader.peek());
  }
  reader.publish();
  const std::uint64_t tail = mem.producer.producer->tail;
  REQUIRE(tail == 128);
  REQUIRE(mem.host.consumer->head == 128);
  mem.producer.producer->head_cache = 128;
  stale_tail_atomics::tail_address = &mem.producer.producer->tail;
  stale_tail_atomics::stale_tail = 64;  // an older tail: the reader is already past it
  stale_tail_atomics::stale_loads_left = 1;
  std::uint64_t pos = 0;
  CHECK(try_claim<stale_tail_atomics>(mem.producer, record_bytes(16), pos));  // the ring is empty: it fits
  CHECK(pos == 128);
  CHECK(stale_tail_atomics::stale_loads_left == 0);
}

TEST_CASE("a record's length word never reads as a flag, at any size a ring accepts") {
  CHECK(max_record_bytes(max_ring_capacity) < discard_flag);
  CHECK(max_record_bytes(1024) == 1024);
  CHECK(max_record_bytes(std::uint64_t{1} << 30) == (std::uint64_t{1} << 30) - 8);
  // The longest length word a committed record can carry is a plain length.
  const std::uint64_t longest = max_record_bytes(max_ring_capacity);
  CHECK((longest & (pad_flag | discard_flag)) == 0);
}

TEST_CASE("a record above half the ring claims its padding alone, then waits for room at the start") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  REQUIRE(write_record(mem.producer, 1, 64, 1));  // tail at 80
  // 200 bytes of record: 176 would be padding at 80 (to 256), 176 + 200 > 256: padding alone first.
  const std::uint64_t bytes = record_bytes(184);
  REQUIRE(bytes == 200);
  std::uint64_t pos;
  CHECK_FALSE(try_claim<host_atomics>(mem.producer, bytes, pos));  // the first record still holds 80 bytes
  CHECK(mem.producer.producer->tail == 256);                       // but the padding is claimed
  auto first = reader.peek();
  REQUIRE(first.kind == record_kind::data);
  reader.release(first);
  auto padding = reader.peek();
  REQUIRE(padding.kind == record_kind::skip);
  reader.release(padding);
  reader.publish();
  REQUIRE(try_claim<host_atomics>(mem.producer, bytes, pos));
  CHECK(pos == 256);
}
