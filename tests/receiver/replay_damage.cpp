// Replay of a recording damaged in ways a cut cannot explain: a chunk length that runs past the end
// chunk of a whole file, a file truncated or rewritten (another type for the same name) between
// the replay's open and run(). Each is an error naming the file, and run() leaves no stream open.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/replay.hpp>

#include "../temp_file.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using devtap_test::read_all;
using devtap_test::temp_file;
using devtap_test::write_all;

std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}



// A closed recording of point "n" (T), `per_device` taps on each of 2 devices, with timestamps:
// several records chunks per device (the writer makes one every ~256 KiB).
template <class T>
void record(const std::string& path, std::uint64_t per_device, std::uint64_t first = 0) {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .record_file = path});
  auto point = rx.attach<T>([](const T&) {}, "n");
  for (auto* d : cpus.cpu_devices())
    d->run([&](devtap::cpu_context& ctx) {
      for (std::uint64_t i = first; i < first + per_device; ++i) ctx.tap(point, static_cast<T>(i));
    });
  rx.close();
}

struct chunk {
  std::size_t at;
  std::uint32_t type;
  std::uint64_t body;
};

std::vector<chunk> chunks_of(const std::string& b) {
  std::uint64_t header = 0;
  std::memcpy(&header, b.data() + 24, 8);
  std::vector<chunk> out;
  for (std::size_t at = 32 + header; at + 16 <= b.size();) {
    chunk c{at, 0, 0};
    std::memcpy(&c.type, b.data() + at, 4);
    std::memcpy(&c.body, b.data() + at + 8, 8);
    out.push_back(c);
    at += 16 + c.body;
  }
  return out;
}

// The consumers of "n" in every form, and what each saw.
struct seen {
  std::uint64_t plain = 0, merged = 0, coro = 0, ends = 0;
  void attach(devtap::replay& rp, std::function<void()> on_plain = {}) {
    rp.attach<std::uint64_t>("n", [this, on_plain](const std::uint64_t&) {
      ++plain;
      if (on_plain) on_plain();
    });
    rp.attach<std::uint64_t>("n", [this](const std::uint64_t&) { ++merged; }, devtap::merged);
    rp.attach<std::uint64_t>("n", [this](devtap::inbox<std::uint64_t> in) -> devtap::consumer<std::uint64_t> {
      while (co_await in.next()) ++coro;
      ++ends;
    });
  }
};

constexpr std::uint64_t per_device = 40000;

}  // namespace

TEST_CASE("replay: a chunk length with a flipped high byte is damage, not a cut; a small error reads as a cut there") {
  temp_file file("damage-len"), bad("damage-len-bad");
  record<std::uint64_t>(file.path, per_device);
  const std::string bytes = read_all(file.path);
  const auto chunks = chunks_of(bytes);
  REQUIRE(chunks.back().type == 4);
  std::vector<chunk> records;
  for (const chunk& c : chunks)
    if (c.type == 3) records.push_back(c);
  REQUIRE(records.size() >= 4);
  const auto flipped = [&](std::string d, int byte, int flip) {
    d[records[1].at + 8 + static_cast<std::size_t>(byte)] ^= static_cast<char>(flip);
    return d;
  };
  // 1 TiB more (bit 40), with and without the end chunk: no writer makes such a chunk.
  for (const bool whole : {true, false}) {
    std::string d = flipped(bytes, 5, 0x01);
    if (!whole) d.resize(d.size() - 16);
    write_all(bad.path, d);
    INFO((whole ? "with" : "without") << " its end chunk");
    CHECK_THROWS_WITH(devtap::replay(bad.path),
                      Catch::Matchers::StartsWith("devtap: recording '" + bad.path + "', chunk at byte " +
                                                  std::to_string(records[1].at) + ": ") &&
                          Catch::Matchers::Contains("more than any writer makes (a damaged length)"));
  }
  // 16 MiB more (bit 24) cannot be told from a writer that stopped in that chunk: what comes before replays.
  write_all(bad.path, flipped(bytes, 3, 0x01));
  devtap::replay rp(bad.path);
  seen s;
  s.attach(rp);
  const auto st = rp.run();
  CHECK(st.cut_short_at == records[1].at);
  CHECK(s.plain > 0);
  CHECK(s.plain < 2 * per_device);
  CHECK(s.merged == s.plain);
  CHECK(s.ends == 2);
}

TEST_CASE("replay: a file cut where its last 16 bytes read as an end chunk is still a cut") {
  // Values {4, 0}: a record's payload whose bytes look like an end chunk's header, at a cut.
  temp_file file("false-end"), bad("false-end-cut");
  {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<std::array<std::uint64_t, 2>>([](const auto&) {}, "pair");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 40000; ++i) ctx.tap(point, std::array<std::uint64_t, 2>{4, 0});
    });
    rx.close();
  }
  const std::string bytes = read_all(file.path);
  const auto chunks = chunks_of(bytes);
  std::size_t cut = 0;  // inside the first records chunk, right after a payload {4, 0}
  for (const chunk& c : chunks)
    if (c.type == 3 && cut == 0)
      for (std::size_t at = c.at + 16 + 256; at + 16 <= c.at + 16 + c.body; at += 8) {
        std::uint64_t w[2];
        std::memcpy(w, bytes.data() + at, 16);
        if (w[0] == 4 && w[1] == 0) {
          cut = at + 16;
          break;
        }
      }
  REQUIRE(cut != 0);
  write_all(bad.path, bytes.substr(0, cut));
  devtap::replay rp(bad.path);
  std::uint64_t n = 0;
  rp.attach<std::array<std::uint64_t, 2>>("pair", [&](const auto&) { ++n; });
  CHECK(rp.run().cut_short_at != 0);
}

TEST_CASE("replay: a recording truncated between open and run() is refused, and every stream ends") {
  temp_file file("damage-shrunk");
  record<std::uint64_t>(file.path, per_device);
  const std::string bytes = read_all(file.path);
  {  // before run(): refused before any record is delivered
    devtap::replay rp(file.path);
    seen s;
    s.attach(rp);
    write_all(file.path, bytes.substr(0, bytes.size() / 2 + 3));
    CHECK_THROWS_WITH(rp.run(), Catch::Matchers::Contains(file.path) && Catch::Matchers::Contains("changed since it was opened"));
    CHECK(s.plain == 0);
    CHECK(s.merged == 0);
    CHECK(s.coro == 0);
    CHECK(s.ends == 2);
  }
  write_all(file.path, bytes);
  {  // during run() (by the first record's consumer): what was read is delivered, then every stream ends
    devtap::replay rp(file.path);
    seen s;
    bool truncated = false;
    s.attach(rp, [&] {
      if (!std::exchange(truncated, true)) write_all(file.path, bytes.substr(0, bytes.size() / 2 + 3));
    });
    CHECK_THROWS_WITH(rp.run(), Catch::Matchers::Contains(file.path) && Catch::Matchers::Contains("changed since it was opened"));
    CHECK(s.plain > 0);
    CHECK(s.plain < 2 * per_device);
    CHECK(s.merged == s.plain);  // merged consumers get what was read
    CHECK(s.coro == s.plain);
    CHECK(s.ends == 2);
  }
}

TEST_CASE("replay: a recording rewritten with another type between open and run() delivers none of it") {
  temp_file file("damage-rewritten");
  record<std::uint64_t>(file.path, per_device);
  devtap::replay rp(file.path);
  seen s;
  s.attach(rp);
  // Another receiver on the same path (it empties the file in place); more records, so that the
  // file does not shrink: its definition of "n" (a double) is what differs.
  record<double>(file.path, per_device + 1000);
  // (refused at its header, whose origin differs: another recording at this path)
  CHECK_THROWS_WITH(rp.run(), Catch::Matchers::StartsWith("devtap: recording '" + file.path + "'") &&
                                  Catch::Matchers::Contains("changed since it was opened"));
  CHECK(s.plain == 0);
  CHECK(s.merged == 0);
  CHECK(s.coro == 0);
  CHECK(s.ends == 2);
}

TEST_CASE("replay: a recording that grows between open and run() replays what open() read") {
  temp_file file("damage-grows");
  record<std::uint64_t>(file.path, per_device);
  const std::string bytes = read_all(file.path);
  const std::size_t keep = bytes.size() / 2 + 3;  // mid-chunk, as a live writer leaves it
  write_all(file.path, bytes.substr(0, keep));
  devtap::replay rp(file.path);
  seen s;
  s.attach(rp);
  write_all(file.path, bytes);  // the writer went on (and closed it): the same bytes, and more
  const auto st = rp.run();
  CHECK(st.cut_short_at != 0);
  CHECK(st.cut_short_at < keep);
  CHECK(s.plain > 0);
  CHECK(s.plain < 2 * per_device);
  CHECK(s.merged == s.plain);
  CHECK(s.coro == s.plain);
  CHECK(s.ends == 2);
}

// The program run again while its last recording is replayed: the same path, the same definitions
// and chunk places, other records. None of them may reach a consumer as the recording's.
TEST_CASE("replay: the same path recorded again, before or during run(), delivers none of the other run's records") {
  temp_file file("damage-recorded-again");
  constexpr std::uint64_t second_run = 1u << 30;  // the other run's values start here
  record<std::uint64_t>(file.path, per_device);
  const std::string first_bytes = read_all(file.path);
  SECTION("before run(): refused before any record") {
    devtap::replay rp(file.path);
    seen s;
    s.attach(rp);
    record<std::uint64_t>(file.path, per_device, second_run);
    CHECK_THROWS_WITH(rp.run(), Catch::Matchers::Contains(file.path) && Catch::Matchers::Contains("its header differs"));
    CHECK(s.plain == 0);
    CHECK(s.merged == 0);
    CHECK(s.coro == 0);
    CHECK(s.ends == 2);
  }
  SECTION("during run(), from a consumer: what was read is the first run's; then run() throws") {
    devtap::replay rp(file.path);
    std::uint64_t delivered = 0, from_second = 0;
    bool again = false;
    rp.attach<std::uint64_t>("n", [&](const std::uint64_t& v) {
      ++delivered;
      if (v >= second_run) ++from_second;
      if (!std::exchange(again, true)) record<std::uint64_t>(file.path, per_device, second_run);
    });
    CHECK_THROWS_WITH(rp.run(), Catch::Matchers::Contains(file.path) && Catch::Matchers::Contains("changed since it was opened"));
    CHECK(from_second == 0);
    CHECK(delivered > 0);
    CHECK(delivered < 2 * per_device);
  }
  SECTION("during run(), rewritten in place with zeros of the same size: no value that was not recorded") {
    devtap::replay rp(file.path);
    std::uint64_t delivered = 0;
    std::vector<std::uint64_t> next(2, 0);  // per device, the value expected next
    std::uint64_t out_of_order = 0;
    bool zeroed = false;
    rp.attach<std::uint64_t>("n", [&](const std::uint64_t& v, const devtap::device& dev) {
      ++delivered;
      if (v != next[static_cast<std::size_t>(dev.id())]++) ++out_of_order;
      if (delivered == 1000 && !std::exchange(zeroed, true)) write_all(file.path, std::string(first_bytes.size(), '\0'));
    });
    CHECK_THROWS_WITH(rp.run(), Catch::Matchers::Contains(file.path) && Catch::Matchers::Contains("changed since it was opened"));
    CHECK(out_of_order == 0);
    CHECK(delivered < 2 * per_device);
  }
}
