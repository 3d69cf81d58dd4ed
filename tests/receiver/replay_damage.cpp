// Replay of a recording damaged in ways a cut cannot explain: a chunk length that runs past the end
// chunk of a whole file, a file truncated or rewritten (another type for the same name) between
// the replay's open and run(). Each is an error naming the file, and run() leaves no stream open.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/replay.hpp>

#include "../temp_file.hpp"

#include <catch2/catch.hpp>

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
void record(const std::string& path, std::uint64_t per_device) {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .record_file = path});
  auto point = rx.attach<T>([](const T&) {}, "n");
  for (auto* d : cpus.cpu_devices())
    d->run([&](devtap::cpu_context& ctx) {
      for (std::uint64_t i = 0; i < per_device; ++i) ctx.tap(point, static_cast<T>(i));
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

TEST_CASE("replay: a middle chunk whose length runs past the end chunk is damage, not a cut") {
  temp_file file("damage-len"), bad("damage-len-bad");
  record<std::uint64_t>(file.path, per_device);
  const std::string bytes = read_all(file.path);
  const auto chunks = chunks_of(bytes);
  REQUIRE(chunks.back().type == 4);
  REQUIRE(chunks.back().at == bytes.size() - 16);
  std::vector<chunk> records;
  for (const chunk& c : chunks)
    if (c.type == 3) records.push_back(c);
  REQUIRE(records.size() >= 4);
  // A flipped high byte (1 TiB more), and a length 8 bytes longer (it swallows the end chunk's header).
  for (const auto& [c, byte, flip] : {std::tuple(records[1], 5, 0x01), std::tuple(records.back(), 0, 0x08)}) {
    std::string d = bytes;
    d[c.at + 8 + static_cast<std::size_t>(byte)] = static_cast<char>(d[c.at + 8 + static_cast<std::size_t>(byte)] ^ flip);
    write_all(bad.path, d);
    INFO("chunk at byte " << c.at << ", length byte " << byte << " ^ " << flip);
    CHECK_THROWS_WITH(devtap::replay(bad.path),
                      Catch::Matchers::StartsWith("devtap: recording '" + bad.path + "', chunk at byte " +
                                                  std::to_string(c.at) + ": ") &&
                          Catch::Matchers::Contains("end chunk"));
  }
  // Without its end chunk the same file was cut there: what comes before replays.
  std::string cut = bytes.substr(0, bytes.size() - 16);
  cut[records[1].at + 8 + 5] = static_cast<char>(cut[records[1].at + 8 + 5] ^ 0x01);
  write_all(bad.path, cut);
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
  CHECK_THROWS_WITH(rp.run(), Catch::Matchers::StartsWith("devtap: recording '" + file.path + "', chunk at byte ") &&
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
