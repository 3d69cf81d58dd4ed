// The ring protocol alone (no receiver): claim/commit/abort, padding at the wrap, positions by
// difference, stamps that tell this lap's records from stale bytes, and many producers against one reader.
#include <devtap/ring/call.hpp>
#include <devtap/ring/memory.hpp>
#include <devtap/ring/produce.hpp>
#include <devtap/ring/read.hpp>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
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

// A wait policy that never sleeps: yields, then tries again.
struct spin_wait {
  static bool closed_due(unsigned) noexcept { return true; }
  DEVTAP_HOST_DEVICE static bool takes_turn(unsigned) noexcept { return false; }
  template <class TryClaim>
  static bool wait_then_claim(const ring_view&, unsigned, std::uint32_t, TryClaim try_claim_now) {
    std::this_thread::yield();
    return try_claim_now(false);
  }
};

// Writes `stamp` (and a length) at `pos` by hand, as a producer's commit would.
void stamp_by_hand(const ring_view& ring, std::uint64_t pos, std::uint64_t stamp, std::uint32_t length) {
  if ((ring.capacity - (pos & (ring.capacity - 1))) >= sizeof(record_header)) ring.header_at(pos)->length = length;
  std::atomic_ref<std::uint64_t>(ring.header_at(pos)->stamp).store(stamp, std::memory_order_release);
}
}  // namespace

TEST_CASE("records come out in order, in place, and released bytes are left as they are") {
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
  CHECK(mem.host.header_at(0)->stamp == mem.host.stamp(0, stamp_record));  // not cleaned: nothing to clean
}

TEST_CASE("a full ring refuses claims until the reader publishes") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  int written = 0;
  while (write_record(mem.producer, 1, 8, 0xAB)) ++written;  // 32-byte records
  CHECK(written == 256 / 32);
  auto rec = reader.peek();
  reader.release(rec);
  CHECK_FALSE(write_record(mem.producer, 1, 8, 0xAB));  // released but not yet published
  reader.publish();
  CHECK(write_record(mem.producer, 1, 8, 0xAB));
}

TEST_CASE("a record that would cross the end is preceded by padding") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  for (int i = 0; i < 2; ++i) {  // 2 x 96 bytes: offset 0..192
    REQUIRE(write_record(mem.producer, 1, 96 - sizeof(record_header), 1));
    reader.release(reader.peek());
  }
  reader.publish();
  REQUIRE(write_record(mem.producer, 2, 72 - sizeof(record_header), 2));  // does not fit in the 64 bytes left: pad then wrap
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
  CHECK(reader.peek().kind == record_kind::empty);
}

TEST_CASE("an aborted claim is skipped") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  std::uint64_t pos;
  REQUIRE(try_claim<host_atomics>(mem.producer, record_bytes(40), pos));
  std::memset(mem.producer.payload_at(pos), 0xFF, 40);
  REQUIRE(write_record(mem.producer, 7, 8, 7));
  CHECK(reader.peek().kind == record_kind::empty);  // claimed, not committed: no stamp yet stops the reader
  abort<host_atomics>(mem.producer, pos, record_bytes(40));
  auto skipped = reader.peek();
  REQUIRE(skipped.kind == record_kind::skip);
  reader.release(skipped);
  auto rec = reader.peek();
  REQUIRE(rec.kind == record_kind::data);
  CHECK(rec.header->consumer_id == 7);
  reader.release(rec);
  CHECK(reader.peek().kind == record_kind::empty);
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
  const ring_view& ring = mem.host;
  SECTION("length beyond the ring") { stamp_by_hand(ring, 0, ring.stamp(0, stamp_record), 4096); }
  SECTION("length shorter than a header") { stamp_by_hand(ring, 0, ring.stamp(0, stamp_record), 23); }
  SECTION("record past the ring's end") { stamp_by_hand(ring, 0, ring.stamp(0, stamp_record), 257); }
  SECTION("discard shorter than a header") { stamp_by_hand(ring, 0, ring.stamp(0, stamp_discard), 8); }
  SECTION("discard of a length not a multiple of 8") { stamp_by_hand(ring, 0, ring.stamp(0, stamp_discard), 36); }
  SECTION("discard past the ring's end") { stamp_by_hand(ring, 0, ring.stamp(0, stamp_discard), 264); }
  SECTION("a stamp of an unknown kind") {
    const std::uint64_t kind = GENERATE(3, 4, 5, 6, 7);
    stamp_by_hand(ring, 0, ring.stamp(0, kind), 32);
    CHECK(inspect(ring, 0).stamp_kind == kind);
  }
  CHECK(inspect(ring, 0).kind == record_kind::malformed);
}

TEST_CASE("a record stamp whose header would cross the ring's end is malformed; padding there is not") {
  host_ring_allocation mem(256);
  const ring_view& ring = mem.host;
  for (std::uint64_t room : {8u, 16u}) {  // the header's 24 bytes do not fit; its length is not read
    const std::uint64_t pos = 256 - room;
    stamp_by_hand(ring, pos, ring.stamp(pos, stamp_record), 0);
    const record_ref rec = inspect(ring, pos);
    CHECK(rec.kind == record_kind::malformed);
    CHECK(rec.bytes == room);
    stamp_by_hand(ring, pos, ring.stamp(pos, stamp_padding), 0);  // padding: only its stamp, to the end
    CHECK(inspect(ring, pos).kind == record_kind::skip);
    CHECK(inspect(ring, pos).bytes == room);
  }
}

TEST_CASE("stale bytes never read as committed: zero memory, an earlier lap, another ring's key") {
  host_ring_allocation mem(256);
  const ring_view& ring = mem.host;
  CHECK(inspect(ring, 0).kind == record_kind::empty);  // fresh (zero) memory
  CHECK((ring.stamp_key >> 63) == 1);
  CHECK((ring.stamp_key & stamp_kind_mask) == 0);
  CHECK(stamp_key_from(0) != 0);
  host_ring_allocation other(256);
  CHECK(other.host.stamp_key != ring.stamp_key);

  ring_reader reader(ring);
  // Lap 0: one record with a payload full of plausible headers: stamps of lap 1 under another key,
  // and lengths that would fit.
  std::uint64_t pos;
  REQUIRE(try_claim<host_atomics>(ring, record_bytes(232), pos));
  for (std::uint64_t off = 0; off + 16 <= 232; off += 8) {
    const std::uint64_t later = 256 + 24 + off;  // the lap-1 position these bytes will sit at
    const std::uint64_t fake[2] = {stamp_at(other.host.stamp_key, later, stamp_record), 32};
    std::memcpy(ring.payload_at(pos) + off, fake, sizeof fake);
  }
  commit<host_atomics>(ring, pos, 1, 0, 232);
  auto rec = reader.peek();
  REQUIRE(rec.kind == record_kind::data);
  reader.release(rec);
  reader.publish();
  // Lap 1: records of 32 bytes land on the old payload's words; each is empty until committed.
  for (int i = 0; i < 8; ++i) {
    const std::uint64_t at = reader.position();
    CHECK(inspect(ring, at).kind == record_kind::empty);
    REQUIRE(try_claim<host_atomics>(ring, record_bytes(8), pos));
    REQUIRE(pos == at);
    CHECK(reader.peek().kind == record_kind::empty);  // claimed, not committed
    commit<host_atomics>(ring, pos, 2, 0, 8);
    rec = reader.peek();
    REQUIRE(rec.kind == record_kind::data);
    CHECK(rec.header->consumer_id == 2);
    reader.release(rec);
    reader.publish();
  }
  // Lap 2 at offset 0: lap 1's stamp is there, for another position.
  CHECK(reader.position() == 512);
  CHECK(ring.header_at(512)->stamp == ring.stamp(256, stamp_record));
  CHECK(reader.peek().kind == record_kind::empty);
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
  CHECK(reader.peek().kind == record_kind::empty);
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
    REQUIRE(write_record(mem.producer, 1, 8, 1));
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

TEST_CASE("a record's length fits its word at any size a ring accepts") {
  CHECK(max_record_bytes(max_ring_capacity) <= max_record_limit);
  CHECK(max_record_limit < (std::uint64_t{1} << 32));
  CHECK(max_record_bytes(1024) == 1024);
  CHECK(max_record_bytes(std::uint64_t{1} << 30) == (std::uint64_t{1} << 30) - 8);
}

TEST_CASE("a record above half the ring claims its padding alone, then waits for room at the start") {
  host_ring_allocation mem(256);
  ring_reader reader(mem.host);
  REQUIRE(write_record(mem.producer, 1, 56, 1));  // tail at 80
  // 200 bytes of record: 176 would be padding at 80 (to 256), 176 + 200 > 256: padding alone first.
  const std::uint64_t bytes = record_bytes(176);
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

// The record's claim after a padding claimed alone waits for the reader to read that padding: a
// reader asleep since before the padding was claimed must be rung by that claim (once found as a
// deadlock: a call as large as the ring, under load), and by an abort, as by a commit.
TEST_CASE("a padding claimed alone and an abort ring a sleeping reader, as a commit does") {
  host_ring_allocation mem(256);
  auto* words = mem.host.consumer;
  ring_reader reader(mem.host);
  REQUIRE(write_record(mem.producer, 1, 56, 1));  // tail at 80
  auto first = reader.peek();
  REQUIRE(first.kind == record_kind::data);
  reader.release(first);
  reader.publish();                 // the ring is empty; the reader goes to sleep
  words->reader_sleeping = 1;       // what reader_sleep sets before it waits on the doorbell
  std::uint64_t pos;
  // As large as the ring: the padding (80 to 256) alone, then the record needs the padding read.
  CHECK_FALSE(try_claim<host_atomics>(mem.producer, 256, pos));
  CHECK(mem.producer.producer->tail == 256);
  CHECK(words->doorbell == 1);  // rung: the reader wakes, reads the padding, publishes
  CHECK(words->reader_sleeping == 0);
  auto padding = reader.peek();
  REQUIRE(padding.kind == record_kind::skip);
  reader.release(padding);
  reader.publish();
  REQUIRE(try_claim<host_atomics>(mem.producer, 256, pos));
  CHECK(pos == 256);
  words->reader_sleeping = 1;
  abort<host_atomics>(mem.producer, pos, 256);
  CHECK(words->doorbell == 2);
  CHECK(words->reader_sleeping == 0);
}

// A blocked claim above half the ring fits only in a (nearly) drained ring; small claims would refill
// it as fast as the reader frees it (on one CPU the call of a hostile test waited as long as a flood
// of taps went on). While it waits it holds `big_claim`, and every other claim finds the ring full.
TEST_CASE("a waiting claim above half the ring holds off other claims until it is made, or gives up") {
  host_ring_allocation mem(1024);
  ring_reader reader(mem.host);
  auto* words = mem.host.consumer;
  const auto drain = [&] {
    for (auto rec = reader.peek(); rec.kind != record_kind::empty; rec = reader.peek()) reader.release(rec);
    reader.publish();
  };
  const auto big_claim_word = [&] { return std::atomic_ref<std::uint64_t>(mem.producer.producer->big_claim).load(); };
  REQUIRE(write_record(mem.producer, 1, 768 - 24, 1));
  drain();                                                 // head 768
  REQUIRE(write_record(mem.producer, 2, 256 - 24, 2));     // [768, 1024)
  REQUIRE(write_record(mem.producer, 3, 200 - 24, 3));     // [1024, 1224): 456 bytes taken, 568 free
  // 600 bytes do not fit (no padding needed: offset 200 + 600 < 1024); 32 bytes would.
  std::uint64_t big_pos = 0;
  auto big = std::async(std::launch::async, [&] {
    return claim<host_atomics, host_wait>(mem.producer, 600, devtap::overflow_policy::block, big_pos);
  });
  while (big_claim_word() == 0) std::this_thread::yield();
  CHECK(big_claim_word() == 600);
  CHECK_FALSE(write_record(mem.producer, 4, 8, 4));  // room, but the big claim goes first
  std::uint64_t pos;
  REQUIRE(try_claim<host_atomics>(mem.producer, record_bytes(8), pos, true));  // a claim past it (a reader's own tap)
  abort<host_atomics>(mem.producer, pos, record_bytes(8));
  // The reader drains the ring: the big claim is made, and the others may claim again.
  drain();
  REQUIRE(big.get() == claim_status::claimed);
  CHECK(big_pos == 1256);
  CHECK(big_claim_word() == 0);
  CHECK(words->doorbell_space >= 1);  // any that waited behind it were woken
  commit<host_atomics>(mem.producer, big_pos, 5, 42, 600 - sizeof(record_header));
  auto rec = reader.peek();
  REQUIRE(rec.kind == record_kind::data);
  CHECK(rec.header->consumer_id == 5);
  reader.release(rec);
  reader.publish();                                    // head 1856 (offset 832)

  // A big claim that gives up (the ring closes) lets the others go, and wakes those that sleep: a
  // small producer asleep behind it (the end marker's claim, say) has nothing else to wake it, since
  // the reader has nothing left to read and publish.
  REQUIRE(write_record(mem.producer, 6, 512 - 24, 6));  // padding to the end, then [2048, 2560): 704 taken
  const std::uint64_t tail_before = mem.producer.producer->tail;
  std::atomic<int> small_status{-1};
  auto small = std::async(std::launch::async, [&] {
    while (std::atomic_ref<std::uint64_t>(mem.producer.producer->big_claim).load() == 0) std::this_thread::yield();
    std::uint64_t p;
    small_status = static_cast<int>(claim<host_atomics, host_wait>(mem.producer, record_bytes(8),
                                                                  devtap::overflow_policy::block, p, ring_reader_gone));
    if (small_status == static_cast<int>(claim_status::claimed)) abort<host_atomics>(mem.producer, p, record_bytes(8));
  });
  // The big claim spins (spin_wait), so that only its give-up can wake the small one.
  auto giving_up = std::async(std::launch::async, [&] {
    return claim<host_atomics, spin_wait>(mem.producer, 600, devtap::overflow_policy::block, big_pos);
  });
  while (std::atomic_ref<std::uint32_t>(words->producers_waiting).load() == 0) std::this_thread::yield();  // small sleeps
  std::atomic_ref<std::uint32_t>(words->closed).store(ring_ending);  // no wake: the big claim sees it as it spins
  CHECK(giving_up.get() == claim_status::closed);
  const bool woken = small.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  CHECK(woken);
  if (!woken) {  // let the test end
    std::atomic_ref<std::uint32_t> epoch(words->doorbell_space);
    epoch.fetch_add(1);
    epoch.notify_all();
  }
  small.get();
  CHECK(small_status == static_cast<int>(claim_status::claimed));
  CHECK(big_claim_word() == 0);
  CHECK(mem.producer.producer->tail == tail_before + record_bytes(8));  // the small claim only (then aborted)
}

TEST_CASE("calls_in_flight sees a reply slot taken in either word, and none once all are given back") {
  host_ring_allocation mem(1024);
  const ring_view& ring = mem.producer;
  CHECK_FALSE(calls_in_flight(ring));
  std::vector<std::uint32_t> slots;
  for (std::uint32_t k = 0; k < reply_slot_count; ++k) {  // every slot, so both words are used
    std::uint32_t slot = ~0u;
    REQUIRE(try_take_reply_slot<host_atomics>(ring, slot));
    slots.push_back(slot);
    CHECK(calls_in_flight(ring));
  }
  std::uint32_t none;
  CHECK_FALSE(try_take_reply_slot<host_atomics>(ring, none));
  for (std::uint32_t slot : slots) {
    CHECK(calls_in_flight(ring));
    give_back_reply_slot<host_atomics>(ring, slot);
  }
  CHECK_FALSE(calls_in_flight(ring));
  std::uint32_t last = ~0u;  // the last slot alone (the second word)
  for (std::uint32_t k = 0; k < reply_slot_count; ++k) REQUIRE(try_take_reply_slot<host_atomics>(ring, last));
  for (std::uint32_t k = 0; k + 1 < reply_slot_count; ++k) give_back_reply_slot<host_atomics>(ring, k);
  CHECK(last == reply_slot_count - 1);
  CHECK(calls_in_flight(ring));
  give_back_reply_slot<host_atomics>(ring, last);
  CHECK_FALSE(calls_in_flight(ring));
}
