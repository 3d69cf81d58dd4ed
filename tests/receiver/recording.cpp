// The recording (receiver_options::record_file) and devtap::replay: what a live run's consumers saw,
// a replay of its file delivers again, in every consumer form; what the file refuses, damaged files,
// drops, failing consumers and files that cannot be written. Also the trace file's drop markers.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/replay.hpp>

#include "../allocation_guard.hpp"
#include "../hostile.hpp"
#include "../temp_file.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <ostream>
#include <set>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <thread>
#include <tuple>
#include <typeinfo>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace std::chrono_literals;

#include "../thread_failure.hpp"

// A damaged file must never make the reader allocate what the file cannot hold: any single
// allocation above 1 GiB (the guard's default) fails here with std::bad_alloc, which the
// damaged-file test reports as a failure, instead of touching gigabytes. Where a sanitizer's
// runtime owns operator new, that test leaves out the files that would claim such a size.
namespace {
const std::size_t allocation_limit = devtap_test::allocation_limit.load();
constexpr bool allocations_limited = devtap_test::allocations_guarded;
}  // namespace

namespace {
std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

using devtap_test::read_all;
using devtap_test::temp_file;
using devtap_test::write_all;



nlohmann::json parse_trace(const std::string& path) { return nlohmann::json::parse(read_all(path)); }

std::int64_t ns_of(devtap::tap_info::clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// What a consumer saw of one record.
struct seen {
  int value = 0;
  std::string device;
  std::int64_t time_ns = 0;
  std::uint64_t sequence = 0;
  bool stamped = false;
  bool operator==(const seen&) const = default;
};
std::ostream& operator<<(std::ostream& os, const seen& s) {
  return os << "{" << s.value << " " << s.device << " t=" << s.time_ns << " seq=" << s.sequence
            << (s.stamped ? " stamped}" : " unstamped}");
}
seen seen_of(int v, const devtap::tap_info& info) {
  return {v, info.device.name(), ns_of(info.time), info.sequence, info.stamped};
}

using per_device = std::map<std::string, std::vector<seen>>;

// The same consumer for the live run and the replay: a callable taking the value and its tap_info.
auto recorder(per_device& into, std::mutex& mutex) {
  return [&into, &mutex](const int& v, const devtap::tap_info& info) {
    std::lock_guard lock(mutex);
    into[info.device.name()].push_back(seen_of(v, info));
  };
}

std::size_t open_descriptors() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

struct sample {  // an aggregate with a span: encoded field by field, the span's elements after its count
  int id = 0;
  std::span<const int> data{};
  double weight = 0;
};
struct plain {  // an aggregate without spans: raw bytes
  int a = 0;
  double b = 0;
  std::array<char, 5> c{};
  std::uint8_t d = 0;
  bool operator==(const plain&) const = default;
};
using tagged = std::tuple<std::int16_t, std::span<const double>, char>;

struct owned_sample {
  int id;
  std::vector<int> data;
  double weight;
  std::string device;
  bool operator==(const owned_sample&) const = default;
};
std::ostream& operator<<(std::ostream& os, const owned_sample& s) {
  return os << "{" << s.id << " [" << s.data.size() << " ints] " << s.weight << " " << s.device << "}";
}
}  // namespace

TEST_CASE("replay: a callable's records come back per device in order, with the live times and sequences") {
  // Enough that each device's entries are written in several pieces (the writer flushes ~256 KiB).
  constexpr int devices = 4, per_device_count = 10000;
  for (const bool stamps : {true, false}) {
    INFO("timestamps " << stamps);
    temp_file file(stamps ? "roundtrip-stamped" : "roundtrip-plain");
    devtap::cpu_client cpus(devices);
    std::mutex mutex;
    per_device live, replayed;
    {
      devtap::receiver rx({.devices = all(cpus), .name = "round", .timestamps = stamps, .record_file = file.path});
      auto values = rx.attach<int>(recorder(live, mutex), "values");
      auto other = rx.attach<double>([](const double&) {}, "other");  // interleaved: the sequences have gaps
      std::vector<std::future<void>> works;
      for (int d = 0; d < devices; ++d)
        works.push_back(cpus.cpu_devices()[static_cast<std::size_t>(d)]->submit([&, d](devtap::cpu_context& ctx) {
          auto s = ctx.scope("work");  // scope records are records of the stream too
          for (int i = 0; i < per_device_count; ++i) {
            ctx.tap(values, d * 100000 + i);
            if (i % 3 == 0) ctx.tap(other, i * 0.5);
          }
        }));
      for (auto& w : works) w.get();
      rx.close();
    }
    devtap::replay rp(file.path);
    CHECK(rp.timestamps() == stamps);
    CHECK(rp.receiver_name() == "round");
    REQUIRE(rp.devices().size() == std::size_t{devices});
    for (int d = 0; d < devices; ++d) CHECK(rp.devices()[static_cast<std::size_t>(d)]->name() == "cpu:" + std::to_string(d));
    rp.attach<int>("values", recorder(replayed, mutex));
    // No scope consumer was attached live: the scope ends are in the recording all the same.
    std::map<std::string, std::vector<std::string>> scopes;
    rp.attach<devtap::scope_event>("scope", [&](const devtap::scope_event& e, const devtap::tap_info& info) {
      scopes[info.device.name()].push_back((e.phase == devtap::scope_phase::begin ? "begin " : "end ") + std::string(e.text()) +
                                           (e.id == devtap::scope_id("work") ? "" : " (wrong id)"));
    });
    const devtap::replay_stats stats = rp.run();
    REQUIRE(scopes.size() == std::size_t{devices});
    for (const auto& [device, got] : scopes) {
      INFO("device " << device);
      CHECK(got == std::vector<std::string>{"begin work", "end work"});
    }
    CHECK(stats.records == std::size_t{devices} * (per_device_count + (per_device_count + 2) / 3 + 2));
    CHECK(read_all(file.path).size() > std::size_t{devices} * (std::size_t{1} << 18));  // over 256 KiB a device
    CHECK(stats.delivered == std::size_t{devices} * (per_device_count + 2));
    CHECK(stats.dropped == 0);
    REQUIRE(live.size() == std::size_t{devices});
    REQUIRE(replayed.size() == std::size_t{devices});
    for (const auto& [device, got] : live) {
      INFO("device " << device);
      REQUIRE(got.size() == std::size_t{per_device_count});
      const std::vector<seen>& again = replayed[device];
      REQUIRE(again.size() == got.size());
      for (std::size_t i = 0; i < got.size(); ++i) {
        INFO("record " << i << ": live " << got[i] << ", replayed " << again[i]);
        CHECK(again[i].value == got[i].value);
        CHECK(again[i].device == got[i].device);
        CHECK(again[i].sequence == got[i].sequence);
        CHECK(again[i].stamped == stamps);
        CHECK(got[i].stamped == stamps);
        if (stamps) CHECK(again[i].time_ns == got[i].time_ns);
      }
    }
  }
}

TEST_CASE("replay: coroutines see every record and the end, shared consumers too, merged ones the live order") {
  constexpr int devices = 4, per_device_count = 250;
  temp_file file("forms");
  devtap::cpu_client cpus(devices);
  std::vector<seen> live_merged;  // a merged consumer is called one record at a time
  {
    // A lag far above any pause here: the live order never depends on how fast each reader runs.
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = 5s, .record_file = file.path});
    auto values = rx.attach<int>([&](const int& v, const devtap::tap_info& info) { live_merged.push_back(seen_of(v, info)); },
                                 devtap::merged, "values");
    std::vector<std::future<void>> works;
    for (int d = 0; d < devices; ++d)
      works.push_back(cpus.cpu_devices()[static_cast<std::size_t>(d)]->submit([&, d](devtap::cpu_context& ctx) {
        for (int i = 0; i < per_device_count; ++i) {
          ctx.tap(values, d * 100000 + i);
          if (i % 50 == d) std::this_thread::sleep_for(200us);  // the devices drift apart and back
        }
      }));
    for (auto& w : works) w.get();
    rx.close();
  }
  REQUIRE(live_merged.size() == std::size_t{devices} * per_device_count);
  per_device live;  // each device's records, from the merged order
  for (const seen& s : live_merged) live[s.device].push_back(s);

  std::mutex mutex;
  per_device coroutine_seen, shared_seen, shared_coroutine_seen;
  std::vector<seen> merged_seen;
  std::atomic<int> coroutine_ends{0}, shared_coroutine_ends{0};
  std::atomic<int> records_after_end{0};
  devtap::replay rp(file.path);
  rp.attach<int>("values", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (auto v = co_await in.next()) {
      if (coroutine_ends != 0) records_after_end++;
      std::lock_guard lock(mutex);
      coroutine_seen[in.info().device.name()].push_back(seen_of(*v, in.info()));
    }
    coroutine_ends++;
  });
  rp.attach<int>("values", recorder(shared_seen, mutex), devtap::shared);
  rp.attach<int>(
      "values",
      [&](devtap::inbox<int> in) -> devtap::consumer<int> {
        while (auto v = co_await in.next()) {
          if (shared_coroutine_ends != 0) records_after_end++;
          std::lock_guard lock(mutex);
          shared_coroutine_seen[in.info().device.name()].push_back(seen_of(*v, in.info()));
        }
        shared_coroutine_ends++;
      },
      devtap::shared);
  rp.attach<int>("values", [&](const int& v, const devtap::tap_info& info) { merged_seen.push_back(seen_of(v, info)); },
                 devtap::merged);
  const devtap::replay_stats stats = rp.run();
  CHECK(stats.records == std::size_t{devices} * per_device_count);
  CHECK(stats.delivered == 4 * std::size_t{devices} * per_device_count);
  CHECK(coroutine_ends == devices);  // one instance per device, each ended once
  CHECK(shared_coroutine_ends == 1);
  CHECK(records_after_end == 0);
  for (const per_device* got : {&coroutine_seen, &shared_seen, &shared_coroutine_seen}) {
    REQUIRE(got->size() == std::size_t{devices});
    for (const auto& [device, records] : live) {
      INFO("device " << device);
      CHECK(got->at(device) == records);
    }
  }
  REQUIRE(merged_seen.size() == live_merged.size());
  std::map<std::string, std::size_t> index;
  for (std::size_t d = 0; d < devices; ++d) index["cpu:" + std::to_string(d)] = d;
  for (std::size_t i = 0; i < merged_seen.size(); ++i) {
    INFO("merged record " << i << ": live " << live_merged[i] << ", replayed " << merged_seen[i]);
    CHECK(merged_seen[i] == live_merged[i]);
    if (i > 0) {
      const seen& a = merged_seen[i - 1];
      const seen& b = merged_seen[i];
      CHECK(std::tie(a.time_ns, index[a.device], a.sequence) < std::tie(b.time_ns, index[b.device], b.sequence));
    }
  }
}

TEST_CASE("replay: values with spans, tuples and plain aggregates come back intact") {
  constexpr int devices = 2;
  temp_file file("spans");
  devtap::cpu_client cpus(devices);
  std::mutex mutex;
  auto sample_recorder = [&mutex](std::vector<owned_sample>& into) {
    return [&into, &mutex](const sample& s, const devtap::tap_info& info) {
      std::lock_guard lock(mutex);
      into.push_back({s.id, std::vector<int>(s.data.begin(), s.data.end()), s.weight, info.device.name()});
    };
  };
  auto plain_recorder = [&mutex](std::vector<std::pair<plain, std::string>>& into) {
    return [&into, &mutex](const plain& p, const devtap::tap_info& info) {
      std::lock_guard lock(mutex);
      into.emplace_back(p, info.device.name());
    };
  };
  using owned_tagged = std::tuple<std::int16_t, std::vector<double>, char, std::string>;
  auto tagged_recorder = [&mutex](std::vector<owned_tagged>& into) {
    return [&into, &mutex](const tagged& t, const devtap::tap_info& info) {
      std::lock_guard lock(mutex);
      const auto& span = std::get<1>(t);
      into.emplace_back(std::get<0>(t), std::vector<double>(span.begin(), span.end()), std::get<2>(t), info.device.name());
    };
  };
  std::vector<owned_sample> live_samples, replayed_samples;
  std::vector<std::pair<plain, std::string>> live_plain, replayed_plain;
  std::vector<owned_tagged> live_tagged, replayed_tagged;
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto samples = rx.attach<sample>(sample_recorder(live_samples), "samples");
    auto plains = rx.attach<plain>(plain_recorder(live_plain), devtap::shared, "plain");
    auto tags = rx.attach<tagged>(tagged_recorder(live_tagged), "tagged");
    for (int d = 0; d < devices; ++d)
      cpus.cpu_devices()[static_cast<std::size_t>(d)]->run([&, d](devtap::cpu_context& ctx) {
        for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}, std::size_t{3}}) {
          std::vector<int> data(n);
          for (std::size_t i = 0; i < n; ++i) data[i] = static_cast<int>(i * 31 + static_cast<std::size_t>(d)) - 500;
          ctx.tap(samples, sample{d * 10 + static_cast<int>(n), data, 0.25 * static_cast<double>(n)});
          ctx.tap(plains, plain{static_cast<int>(n), -1.5 * d, {'a', '\0', '"', '\n', static_cast<char>(n)}, 255});
          std::vector<double> doubles(n % 5, 1.0 / (static_cast<double>(n) + 1));
          ctx.tap(tags, tagged{static_cast<std::int16_t>(-d - 1), doubles, static_cast<char>('x' + d)});
        }
      });
    rx.close();
  }
  REQUIRE(live_samples.size() == 10);
  REQUIRE(live_plain.size() == 10);
  REQUIRE(live_tagged.size() == 10);
  devtap::replay rp(file.path);
  rp.attach<sample>("samples", sample_recorder(replayed_samples));
  rp.attach<plain>("plain", plain_recorder(replayed_plain));
  rp.attach<tagged>("tagged", tagged_recorder(replayed_tagged), devtap::shared);
  const auto stats = rp.run();
  CHECK(stats.delivered == 30);
  // Each device's records in its order (the devices' readers ran side by side: compared per device).
  auto by_device = [](auto records, auto device_of) {
    std::stable_sort(records.begin(), records.end(),
                     [&](const auto& a, const auto& b) { return device_of(a) < device_of(b); });
    return records;
  };
  auto sample_device = [](const owned_sample& s) { return s.device; };
  auto plain_device = [](const std::pair<plain, std::string>& p) { return p.second; };
  auto tagged_device = [](const owned_tagged& t) { return std::get<3>(t); };
  CHECK(by_device(replayed_samples, sample_device) == by_device(live_samples, sample_device));
  CHECK(by_device(replayed_plain, plain_device) == by_device(live_plain, plain_device));
  CHECK(by_device(replayed_tagged, tagged_device) == by_device(live_tagged, tagged_device));
  const auto sorted = by_device(replayed_samples, sample_device);
  CHECK(sorted[3].data.size() == 1000);
  CHECK(sorted[3].data[999] == 999 * 31 - 500);
  CHECK(sorted[0].data.empty());
}

TEST_CASE("replay: unknown names, other types and merged without timestamps are refused when attached") {
  temp_file file("refusals");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto values = rx.attach<int>([](const int&) {}, "values");
    auto blobs = rx.attach<sample>([](const sample&) {}, "blob");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      ctx.tap(values, 1);
      const int data[] = {1, 2};
      ctx.tap(blobs, sample{1, data, 2});
    });
    rx.close();
  }
  devtap::replay rp(file.path);
  try {
    rp.attach<int>("nope", [](const int&) {});
    FAIL("attach by an unknown name was accepted");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("'nope'") != std::string::npos);
    CHECK(what.find("'values'") != std::string::npos);
    CHECK(what.find("'blob'") != std::string::npos);
    CHECK(what.find(file.path) != std::string::npos);
  }
  CHECK_THROWS_AS(rp.attach<double>("values", [](const double&) {}), std::invalid_argument);
  CHECK_THROWS_AS(rp.attach<std::uint32_t>("values", [](const std::uint32_t&) {}), std::invalid_argument);
  CHECK_THROWS_AS(rp.attach<int>("blob", [](const int&) {}), std::invalid_argument);
  try {
    rp.attach<int>("values", [](const int&) {}, devtap::merged);
    FAIL("merged was accepted on a recording without timestamps");
  } catch (const std::invalid_argument& e) {
    FAIL("merged without timestamps threw std::invalid_argument, not a plain std::logic_error: " << e.what());
  } catch (const std::logic_error& e) {
    CHECK(std::string(e.what()).find("timestamps") != std::string::npos);
  }
  // What was refused left nothing attached: the run delivers to the one consumer that is.
  int got = 0;
  rp.attach<int>("values", [&](const int& v) { got += v; });
  const auto stats = rp.run();
  CHECK(got == 1);
  CHECK(stats.delivered == 1);
  CHECK(stats.records == 2);
}

namespace {
enum class outcome { succeeded, runtime_error, unexpected };

// Whether a chunk header of `bytes` (recording.hpp's layout) claims a body above allocation_limit
// that the reader's own checks (a multiple of 8, at most 2^34) let through.
bool claims_huge_chunk(const std::string& bytes) {
  auto u64_at = [&](std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, bytes.data() + at, 8);
    return v;
  };
  if (bytes.size() < 32) return false;
  const std::uint64_t header = u64_at(24);
  if (header > (std::uint64_t{1} << 30)) return false;
  for (std::uint64_t at = 32 + header; at + 16 <= bytes.size();) {
    const std::uint64_t body = u64_at(static_cast<std::size_t>(at) + 8);
    if (body % 8 != 0 || body > (std::uint64_t{1} << 34)) return false;
    if (body > allocation_limit) return true;
    at += 16 + body;
  }
  return false;
}

// Opens and replays `path` with consumers of every recorded kind: success, or std::runtime_error
// (std::invalid_argument only from an attach); anything else is `unexpected`, described in `what`.
outcome try_replay(const std::string& path, std::string& what) {
  try {
    devtap::replay rp(path);
    std::uint64_t sum = 0;  // touches every decoded byte (ASan: inside the payload)
    auto attach = [&](auto&& fn) {
      try {
        fn();
      } catch (const std::invalid_argument&) {  // a damaged name or type: refused at attach, as documented
      }
    };
    attach([&] { rp.attach<int>("values", [&](const int& v) { sum += static_cast<std::uint64_t>(v); }); });
    attach([&] {
      rp.attach<int>("values", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
        while (auto v = co_await in.next()) sum += static_cast<std::uint64_t>(*v) + in.info().sequence;
      });
    });
    attach([&] {
      rp.attach<sample>("samples", [&](const sample& s) {
        for (int x : s.data) sum += static_cast<std::uint64_t>(x);
      });
    });
    attach([&] {
      rp.attach<devtap::scope_event>("scope", [&](const devtap::scope_event& e) {
        for (char c : e.text()) sum += static_cast<unsigned char>(c);
      });
    });
    if (rp.timestamps())
      attach([&] { rp.attach<int>("values", [&](const int& v) { sum += static_cast<std::uint64_t>(v); }, devtap::merged); });
    (void)rp.point_names();
    (void)rp.run();
    return outcome::succeeded;
  } catch (const devtap::tap_error& e) {  // the consumers here never throw: a tap_error is a bug
    what = std::string("devtap::tap_error: ") + e.what();
    return outcome::unexpected;
  } catch (const std::runtime_error&) {
    return outcome::runtime_error;
  } catch (const std::exception& e) {
    what = std::string(typeid(e).name()) + ": " + e.what();
    return outcome::unexpected;
  } catch (...) {
    what = "an exception of unknown type";
    return outcome::unexpected;
  }
}
}  // namespace

TEST_CASE("replay: a directory, a pipe without a writer or a device is refused at once, saying what it is") {
  temp_file fifo("fifo");
  REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {dir, "it is a directory"},
      {fifo.path, "not a regular file (a pipe or a device)"},  // fopen waited for a writer forever
      {"/dev/null", "not a regular file (a pipe or a device)"},
  };
  for (const auto& [path, why] : cases) {
    INFO(path);
    try {
      devtap::replay rp(path);
      FAIL("replayed");
    } catch (const std::runtime_error& e) {
      CHECK(std::string(e.what()) == "devtap: cannot read recording '" + path + "': " + why);
    }
  }
}

TEST_CASE("replay: missing, empty, foreign, cut and damaged files throw std::runtime_error, never crash") {
  temp_file file("damaged-source");
  temp_file damaged("damaged");
  devtap::cpu_client cpus(2);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  {
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .record_file = file.path});
    auto values = rx.attach<int>([](const int&) {}, "values");
    auto samples = rx.attach<sample>([](const sample&) {}, "samples");
    rx.attach<devtap::scope_event>([](const devtap::scope_event&) {});
    for (int d = 0; d < 2; ++d)
      cpus.cpu_devices()[static_cast<std::size_t>(d)]->run([&, d](devtap::cpu_context& ctx) {
        auto s = ctx.scope(d == 0 ? "first" : "second");
        for (int i = 0; i < 6; ++i) ctx.tap(values, i + d);
        const int data[] = {7, 8, 9, 10, 11};
        for (int i = 0; i < 3; ++i) ctx.tap(samples, sample{i, std::span<const int>(data, static_cast<std::size_t>(i + 2)), 1.0});
      });
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[1]);
    out.tap(devtap::tap_point<double>{values.id, devtap::type_fingerprint_v<double>, values.receiver}, 1.0);  // a mismatch: a marker
    out.tap(values, 42);
    try {
      rx.close();
    } catch (const devtap::tap_error&) {  // the mismatch
    }
  }
  const std::string bytes = read_all(file.path);
  REQUIRE(bytes.size() > 512);
  std::string what;
  REQUIRE(try_replay(file.path, what) == outcome::succeeded);

  const std::size_t descriptors = open_descriptors();
  CHECK(try_replay(damaged.path, what) == outcome::runtime_error);  // missing
  write_all(damaged.path, "");
  CHECK(try_replay(damaged.path, what) == outcome::runtime_error);  // empty
  write_all(damaged.path, "{\"traceEvents\":[]}\n this is not a recording, and it is longer than any header would be");
  CHECK(try_replay(damaged.path, what) == outcome::runtime_error);
  write_all(damaged.path, bytes.substr(0, 8) + std::string(24, '\xff'));
  CHECK(try_replay(damaged.path, what) == outcome::runtime_error);

  std::vector<std::string> failures;
  std::size_t runs = 0, refused = 0, left_out = 0;
  auto attempt = [&](const std::string& content, const std::string& description) {
    if (!allocations_limited && claims_huge_chunk(content)) {  // would allocate gigabytes here: checked elsewhere
      ++left_out;
      return;
    }
    write_all(damaged.path, content);
    ++runs;
    what.clear();
    const outcome o = try_replay(damaged.path, what);
    if (o == outcome::runtime_error) ++refused;
    if (o == outcome::unexpected && failures.size() < 20) failures.push_back(description + ": " + what);
  };
  // Cut short at every length (every byte for the first 512, then every 5th and the last 64).
  for (std::size_t n = 0; n < bytes.size(); n += n < 512 || n + 64 >= bytes.size() ? 1 : 5)
    attempt(bytes.substr(0, n), "cut at " + std::to_string(n) + " of " + std::to_string(bytes.size()));
  // One byte changed, at every offset, three ways.
  for (std::size_t at = 0; at < bytes.size(); ++at)
    for (const unsigned char flip : {0xffu, 0x80u, 0x01u}) {
      std::string content = bytes;
      content[at] = static_cast<char>(static_cast<unsigned char>(content[at]) ^ flip);
      std::ostringstream description;
      description << "byte " << at << " ^ 0x" << std::hex << unsigned{flip};
      attempt(content, description.str());
    }
  devtap::set_log_sink({});
  INFO(runs << " damaged files, " << refused << " refused with std::runtime_error, " << left_out
            << " left out (a chunk claiming over 1 GiB, in a build whose runtime owns operator new)");
  for (const auto& f : failures) UNSCOPED_INFO(f);
  CHECK(failures.empty());
  CHECK(refused > 0);
  // A refused file is closed: nothing leaks, however it was refused.
  CHECK(open_descriptors() == descriptors);
}

TEST_CASE("replay: a consumer that throws is reported by run() after every other record was delivered") {
  constexpr int devices = 3;
  temp_file file("throws");
  devtap::cpu_client cpus(devices);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto values = rx.attach<int>([](const int&) {}, "values");
    for (int d = 0; d < devices; ++d)
      cpus.cpu_devices()[static_cast<std::size_t>(d)]->run([&, d](devtap::cpu_context& ctx) {
        for (int i = 0; i < 20; ++i) ctx.tap(values, d * 100 + i);
      });
    rx.close();
  }
  devtap::replay rp(file.path);
  int calls = 0, counted = 0, ends = 0;
  std::vector<int> after_throw;  // what the failed coroutine's device still delivered to the others
  rp.attach<int>("values", [&](const int& v) {
    ++calls;
    if (v % 100 == 7) throw std::runtime_error("seven");
  });
  rp.attach<int>("values", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (auto v = co_await in.next()) {
      ++counted;
      if (*v == 5) throw std::runtime_error("five on cpu:0");
    }
    ++ends;
  });
  try {
    (void)rp.run();
    FAIL("run() did not report the consumers' failures");
  } catch (const devtap::tap_error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("seven") != std::string::npos);
    CHECK(what.find(file.path) != std::string::npos);
    REQUIRE(e.failures().size() == devices + 1);
    std::multiset<std::string> devices_named, messages;
    for (const auto& f : e.failures()) {
      CHECK(f.consumer == "values");
      devices_named.insert(f.device);
      messages.insert(f.message);
      CHECK(f.error != nullptr);
    }
    CHECK(devices_named == std::multiset<std::string>{"cpu:0", "cpu:0", "cpu:1", "cpu:2"});
    CHECK(messages == std::multiset<std::string>{"five on cpu:0", "seven", "seven", "seven"});
  }
  CHECK(calls == devices * 20);  // the callable kept being called after it threw
  CHECK(counted == 6 + 20 + 20);  // the coroutine on cpu:0 finished with its exception
  CHECK(ends == devices - 1);
}

TEST_CASE("replay: drops are counted as the live run counted them, and the trace file marks them") {
  constexpr int devices = 2, taps = 200;
  temp_file file("drops");
  temp_file trace("drops.json");
  devtap::cpu_client cpus(devices);
  std::uint64_t live_dropped = 0;
  std::vector<std::uint64_t> dropped_per_device(devices);
  std::atomic<int> live_delivered{0};
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2048, .overflow = devtap::overflow_policy::drop,
                         .timestamps = true, .trace_file = trace.path, .record_file = file.path});
    std::latch entered(devices);
    std::atomic<bool> release{false};
    auto point = rx.attach<std::uint64_t>(
        [&](const std::uint64_t& v) {
          if (v % 1000 == 0) {  // each device's first record holds its reader: the ring fills
            entered.count_down();
            while (!release) std::this_thread::sleep_for(1ms);
          }
          live_delivered++;
        },
        "values");
    std::vector<devtap::outfeed> outs;
    for (auto* d : cpus.cpu_devices()) outs.push_back(rx.outfeed(*d));
    for (std::size_t d = 0; d < devices; ++d) outs[d].tap(point, std::uint64_t{d * 1000});
    entered.wait();
    for (std::uint64_t i = 1; i < taps; ++i)
      for (std::size_t d = 0; d < devices; ++d) outs[d].tap(point, d * 1000 + i);
    const auto stats = rx.stats();
    live_dropped = stats.total().dropped_records;
    for (std::size_t d = 0; d < devices; ++d) dropped_per_device[d] = stats.devices[d].dropped_records;
    release = true;
    rx.close();
    CHECK(rx.stats().total().dropped_records == live_dropped);
  }
  REQUIRE(live_dropped > 0);
  CHECK(static_cast<std::uint64_t>(live_delivered) == devices * taps - live_dropped);

  devtap::replay rp(file.path);
  std::uint64_t replayed = 0;
  rp.attach<std::uint64_t>("values", [&](const std::uint64_t&) { ++replayed; });
  const auto stats = rp.run();
  CHECK(stats.dropped == live_dropped);
  CHECK(stats.delivered == devices * taps - live_dropped);
  CHECK(replayed == devices * taps - live_dropped);

  const nlohmann::json json = parse_trace(trace.path);
  REQUIRE(json.contains("traceEvents"));
  std::vector<std::uint64_t> marked(devices);
  for (const auto& e : json["traceEvents"])
    if (e.value("name", "") == "dropped" && e.value("cat", "") == "marker") {
      const auto tid = e.at("tid").get<std::size_t>();
      REQUIRE(tid >= 1);
      REQUIRE(tid <= devices);
      marked[tid - 1] += e.at("args").at("count").get<std::uint64_t>();
    }
  for (std::size_t d = 0; d < devices; ++d) {
    INFO("device " << d);
    CHECK(marked[d] == dropped_per_device[d]);
  }
}

TEST_CASE("replay: records for unknown ids and of other types are recorded and skipped without error") {
  temp_file file("unknown");
  devtap::cpu_client cpus(1);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  std::vector<seen> live;
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<int>([&](const int& v, const devtap::tap_info& info) { live.push_back(seen_of(v, info)); }, "values");
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
    out.tap(point, 1);
    out.tap(devtap::tap_point<int>{99, devtap::type_fingerprint_v<int>, point.receiver}, 5);  // no consumer has id 99
    out.tap(point, 2);
    out.tap(devtap::tap_point<double>{point.id, devtap::type_fingerprint_v<double>, point.receiver}, 1.5);  // another type
    out.tap(devtap::tap_point<std::int64_t>{point.id, point.fingerprint, point.receiver}, std::int64_t{7});  // int's fingerprint, 8 bytes
    out.tap(point, 3);
    try {
      rx.close();
    } catch (const devtap::tap_error&) {  // the mismatches are reported live
    }
    CHECK(rx.stats().total().unknown_ids == 1);
    CHECK(rx.stats().total().type_mismatches == 2);
  }
  devtap::set_log_sink({});
  REQUIRE(live.size() == 3);
  devtap::replay rp(file.path);
  std::vector<seen> again;
  std::vector<int> coroutine_got;
  rp.attach<int>("values", [&](const int& v, const devtap::tap_info& info) { again.push_back(seen_of(v, info)); });
  rp.attach<int>("values", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (auto v = co_await in.next()) coroutine_got.push_back(*v);
  });
  devtap::replay_stats stats;
  REQUIRE_NOTHROW(stats = rp.run());
  CHECK(stats.records == 6);
  CHECK(stats.delivered == 6);  // 3 records, 2 consumers
  CHECK(stats.markers >= 2);    // the unknown id and the mismatch, as errors
  // Each skipped record counted under why (live: 1 unknown id; the double and the 8-byte int, 2
  // type mismatches, once per record); the last two once per consumer, as `delivered`.
  CHECK(stats.unknown_ids == 1);
  CHECK(stats.type_mismatches == 2);  // the double, for each consumer
  CHECK(stats.undecodable == 2);      // int's fingerprint with 8 bytes: it does not decode as an int
  CHECK(stats.ignored == 0);
  CHECK(coroutine_got == std::vector<int>{1, 2, 3});
  REQUIRE(again.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(again[i].value == live[i].value);
    CHECK(again[i].sequence == live[i].sequence);  // every record of the stream counts, skipped ones too
  }
}

TEST_CASE("replay: records for a coroutine consumer that has returned are counted as ignored, as live") {
  temp_file file("ignored");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<int>([](const int&) {}, "values");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 5; ++i) ctx.tap(point, i);
    });
    rx.close();
  }
  devtap::replay rp(file.path);
  std::vector<int> got;
  rp.attach<int>("values", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
    for (int n = 0; n < 2; ++n)
      if (auto v = co_await in.next()) got.push_back(*v);
  });
  const devtap::replay_stats stats = rp.run();
  CHECK(got == std::vector<int>{0, 1});
  CHECK(stats.records == 5);
  CHECK(stats.delivered == 2);
  CHECK(stats.ignored == 3);  // before, in no counter
  CHECK(stats.unknown_ids + stats.type_mismatches + stats.undecodable == 0);
}

TEST_CASE("record_file: a path that cannot be opened is refused up front; a full disk is reported by close()") {
  devtap::cpu_client cpus(2);
  temp_file trace("unopenable-trace.json");
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"", "/nonexistent-dir/x", "/nonexistent-dir/x"},
      {"/nonexistent-dir/t.json", "", "/nonexistent-dir/t.json"},
      {trace.path, "/nonexistent-dir/y", "/nonexistent-dir/y"},  // the trace opens, the recording does not
  };
  for (const auto& [trace_path, record_path, bad] : cases) {
    INFO("trace '" << trace_path << "', record '" << record_path << "'");
    try {
      devtap::receiver rx({.devices = all(cpus), .trace_file = trace_path, .record_file = record_path});
      FAIL("the receiver was made");
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find(bad) != std::string::npos);
    }
    // The devices stay free: a receiver after it works.
    devtap::receiver rx({.devices = all(cpus)});
    std::atomic<int> got{0};
    auto point = rx.attach<int>([&](const int&) { got++; });
    for (auto* d : cpus.cpu_devices()) d->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
    rx.close();
    CHECK(got == 2);
  }
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  for (const bool as_trace : {false, true}) {
    INFO((as_trace ? "trace_file" : "record_file") << " /dev/full");
    devtap::receiver_options options{.devices = all(cpus)};
    (as_trace ? options.trace_file : options.record_file) = "/dev/full";
    devtap::receiver rx(std::move(options));
    std::atomic<int> got{0};
    auto point = rx.attach<int>([&](const int&) { got++; }, "values");
    for (auto* d : cpus.cpu_devices())
      d->run([&](devtap::cpu_context& ctx) {
        for (int i = 0; i < 1000; ++i) ctx.tap(point, i);
      });
    try {
      rx.close();
      FAIL("close() did not report that the file could not be written");
    } catch (const devtap::tap_error& e) {
      CHECK(std::string(e.what()).find("/dev/full") != std::string::npos);
      REQUIRE_FALSE(e.failures().empty());
      CHECK(e.failures().front().message.find("/dev/full") != std::string::npos);
    }
    CHECK(got == 2000);
  }
  devtap::set_log_sink({});
}

TEST_CASE("trace_file and record_file: a receiver that fails to open leaves them as they were; an open one's header is on disk at once") {
  devtap::cpu_client cpus(2);
  temp_file old_trace("kept.json"), old_record("kept.devtap"), new_trace("new.json"), new_record("new.devtap");
  write_all(old_trace.path, "an earlier trace");
  write_all(old_record.path, "an earlier recording");
  const auto untouched = [&] {
    CHECK(read_all(old_trace.path) == "an earlier trace");
    CHECK(read_all(old_record.path) == "an earlier recording");
    CHECK_FALSE(std::filesystem::exists(new_trace.path));
    CHECK_FALSE(std::filesystem::exists(new_record.path));
  };
  // A trace_file that is a dangling link: the file made through it goes too.
  temp_file link("dangling.json"), target("dangling-target.json");
  std::filesystem::create_symlink(target.path, link.path);
  CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .trace_file = link.path, .record_file = "/nonexistent-dir/r"}),
                  std::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(target.path));
  // The recording cannot be opened after the trace was: the trace is not emptied (nor made).
  for (const std::string& trace : {old_trace.path, new_trace.path})
    CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .trace_file = trace, .record_file = "/nonexistent-dir/r"}),
                    std::invalid_argument);
  untouched();
  // A device already has a receiver: both files open, then the receiver gives up. Before, both were
  // emptied and the trace claimed that every device's reader was stuck.
  {
    devtap::receiver holder({.devices = {cpus.cpu_devices()[1]}});
    for (const bool existing : {true, false})
      CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .trace_file = existing ? old_trace.path : new_trace.path,
                                        .record_file = existing ? old_record.path : new_record.path}),
                      devtap::outfeed_error);
    untouched();
  }
  // Open: the file names its devices and points at once (a crash now leaves a readable recording).
  devtap::receiver rx({.devices = all(cpus), .trace_file = old_trace.path, .record_file = old_record.path});
  auto point = rx.attach<int>([](const int&) {}, "values");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
  rx.flush();
  CHECK(read_all(old_trace.path).rfind("{\"displayTimeUnit\"", 0) == 0);
  {
    devtap::replay live(old_record.path);  // while the receiver is open: no end chunk yet
    CHECK(live.devices().size() == 2);
    int values = 0;
    live.attach<int>("values", [&](const int&) { ++values; });
    // The file grows after the replay opened it, with records of a point defined after that: the
    // replay reads what was there at open (it read on and refused those records as undefined).
    auto later = rx.attach<double>([](const double&) {}, "later");
    cpus.cpu_devices()[1]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 40000; ++i) ctx.tap(later, 1.0);  // more than a 256 KiB chunk
    });
    rx.flush();
    const auto st = live.run();
    CHECK(st.cut_short_at != 0);
    CHECK(values <= 1);
  }
  rx.close();
  devtap::replay closed(old_record.path);
  std::vector<int> values;
  closed.attach<int>("values", [&](const int& v) { values.push_back(v); });
  CHECK(closed.run().cut_short_at == 0);
  CHECK(values == std::vector<int>{1});
}

TEST_CASE("record_file: after close() gave up on a stuck consumer, what was written replays, the trace parses, nothing changes later") {
  temp_file file("stuck");
  temp_file trace("stuck.json");
  devtap::cpu_client cpus(2);
  devtap::set_log_sink([](devtap::log_level, std::string_view) {});
  struct flags {
    std::latch release{1};
    std::atomic<bool> blocked{false}, returned{false};
  };
  const auto f = std::make_shared<flags>();
  {
    devtap::receiver rx({.devices = all(cpus), .close_timeout = 3s, .timestamps = true, .trace_file = trace.path,
                         .record_file = file.path});
    auto stuck = rx.attach<int>(
        [f](const int&) {
          f->blocked = true;
          f->release.wait();
          f->returned = true;
        },
        "stuck");
    auto values = rx.attach<int>([](const int&) {}, "values");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      ctx.tap(stuck, 0);  // cpu:0's reader is held here
      for (int i = 0; i < 5; ++i) ctx.tap(values, 1000 + i);
    });
    cpus.cpu_devices()[1]->run([&](devtap::cpu_context& ctx) {
      auto s = ctx.scope("cpu1");
      for (int i = 0; i < 50; ++i) ctx.tap(values, i);
    });
    while (!f->blocked) std::this_thread::sleep_for(1ms);
    CHECK_THROWS_AS(rx.close(), devtap::timeout_error);
  }
  const std::string recording = read_all(file.path);
  const std::string trace_text = read_all(trace.path);
  std::map<std::string, std::vector<int>> got;
  {
    devtap::replay rp(file.path);
    rp.attach<int>("values", [&](const int& v, const devtap::tap_info& info) { got[info.device.name()].push_back(v); });
    rp.attach<int>("stuck", [&](const int& v, const devtap::tap_info& info) { got["stuck " + info.device.name()].push_back(v); });
    REQUIRE_NOTHROW(rp.run());
  }
  std::vector<int> expected(50);
  for (int i = 0; i < 50; ++i) expected[static_cast<std::size_t>(i)] = i;
  CHECK(got["cpu:1"] == expected);
  // The record cpu:0's reader is stuck on was read, but a reader close() gave up on keeps what it
  // had not yet written (record_sink.hpp, device_buffer): it is there or not, nothing else is.
  CHECK(got["stuck cpu:0"].size() <= 1);
  if (!got["stuck cpu:0"].empty()) CHECK(got["stuck cpu:0"].front() == 0);
  CHECK(got["cpu:0"].empty());  // never read: left in the ring
  nlohmann::json json;
  REQUIRE_NOTHROW(json = nlohmann::json::parse(trace_text));
  int cpu1_taps = 0;
  for (const auto& e : json.at("traceEvents"))
    if (e.value("name", "") == "values" && e.value("tid", 0) == 2) ++cpu1_taps;
  CHECK(cpu1_taps == 50);

  f->release.count_down();  // the receiver is gone: its reader goes on, and must touch nothing freed
  while (!f->returned) std::this_thread::sleep_for(1ms);
  std::this_thread::sleep_for(200ms);  // (not a check: time for the reader to finish what it does)
  CHECK(read_all(file.path) == recording);  // nothing written after close()
  CHECK(read_all(trace.path) == trace_text);
  devtap::set_log_sink({});
}

TEST_CASE("replay: a receiver destroyed from inside its consumer leaves what its readers read in the files") {
  temp_file file("self-destroyed"), trace("self-destroyed-trace");
  devtap::cpu_client cpus(2);
  std::atomic<int> seen{0};
  std::atomic<bool> destroyed{false};
  {
    auto rx = std::make_unique<devtap::receiver>(
        devtap::receiver_options{.devices = all(cpus), .trace_file = trace.path, .record_file = file.path});
    auto point = rx->attach<int>(
        [&](const int& v) {
          ++seen;
          if (v == 999) {  // the last of device 0's: the receiver goes from its own reader
            rx.reset();
            destroyed = true;
          }
        },
        devtap::shared, "v");
    cpus.cpu_devices()[1]->submit([point](devtap::cpu_context& ctx) { for (int i = 0; i < 500; ++i) ctx.tap(point, -1); }).get();
    while (seen.load() < 500) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // device 1's all read
    cpus.cpu_devices()[0]->submit([point](devtap::cpu_context& ctx) { for (int i = 0; i < 1000; ++i) ctx.tap(point, i); }).get();
    for (int i = 0; i < 5000 && !destroyed.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    REQUIRE(destroyed.load());
  }
  // The files are complete once the readers are gone (the state's last owner closes them): until
  // then a replay may see less; it must come to see everything.
  std::uint64_t replayed = 0;
  devtap::replay_stats st;
  for (int attempt = 0; attempt < 1000 && replayed != 1500; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream in(trace.path, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    if (text.size() < 3 || text.substr(text.size() - 3) != "]}\n") continue;  // the trace closes first
    devtap::replay rp(file.path);
    replayed = 0;
    rp.attach<int>("v", [&](const int&) { ++replayed; });
    st = rp.run();
  }
  CHECK(replayed == static_cast<std::uint64_t>(seen.load()));
  CHECK(replayed == 1500);
  CHECK(st.markers == 0);  // no reader was stuck: nothing is marked lost
  std::ifstream in(trace.path);
  CHECK_NOTHROW(nlohmann::json::parse(in));
}

TEST_CASE("replay: a recording cut short mid-chunk replays what came before, and says where it ends") {
  temp_file file("cut"), cut("cut-copy");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<std::uint64_t>([](const std::uint64_t&) {}, "n");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { for (std::uint64_t i = 0; i < 100000; ++i) ctx.tap(point, i); });
    rx.close();
  }
  const std::string bytes = read_all(file.path);
  for (const std::size_t keep : {bytes.size() - 100, bytes.size() / 2, bytes.size() / 3}) {
    write_all(cut.path, bytes.substr(0, keep));
    devtap::replay rp(cut.path);
    std::uint64_t next = 0;
    bool in_order = true;
    rp.attach<std::uint64_t>("n", [&](const std::uint64_t& v) { in_order = in_order && v == next++; });
    const auto st = rp.run();
    CHECK(in_order);
    CHECK(next > 0);
    CHECK(next < 100000);
    CHECK(st.cut_short_at != 0);
    CHECK(st.cut_short_at < keep);
  }
  // The last 16 bytes are the end chunk (a header with no body): without it, or with part of it,
  // every record is there and the recording still says it was not closed (a crash between chunks).
  const std::size_t end_chunk = bytes.size() - 16;
  for (const std::size_t keep : {end_chunk, end_chunk + 4, bytes.size() - 1}) {
    INFO("kept " << keep << " of " << bytes.size());
    write_all(cut.path, bytes.substr(0, keep));
    devtap::replay rp(cut.path);
    std::uint64_t n = 0;
    rp.attach<std::uint64_t>("n", [&](const std::uint64_t&) { ++n; });
    const auto st = rp.run();
    CHECK(n == 100000);
    CHECK(st.cut_short_at == end_chunk);
  }
  devtap::replay whole(file.path);
  whole.attach<std::uint64_t>("n", [](const std::uint64_t&) {});
  CHECK(whole.run().cut_short_at == 0);
}

TEST_CASE("replay: points are found by name and type; a point never tapped replays empty; run() runs once") {
  temp_file file("names");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto xi = rx.attach<int>([](const int&) {}, "x");
    auto xf = rx.attach<float>([](const float&) {}, "x");
    auto xi2 = rx.attach<int>([](const int&) {}, "x");
    auto scope_named = rx.attach<double>([](const double&) {}, "scope");  // the built-in point's name, another type
    rx.attach<short>([](const short&) {}, "silent");                         // attached, never tapped
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      ctx.tap(xi, 1);
      ctx.tap(xf, 2.5f);
      ctx.tap(xi2, 3);
      ctx.tap(scope_named, 4.5);
    });
    rx.close();
  }
  devtap::replay rp(file.path);
  std::vector<int> ints;
  std::vector<float> floats;
  std::vector<double> doubles;
  int silent = 0;
  rp.attach<int>("x", [&](const int& v) { ints.push_back(v); });
  rp.attach<float>("x", [&](const float& v) { floats.push_back(v); });
  rp.attach<double>("scope", [&](const double& v) { doubles.push_back(v); });
  rp.attach<short>("silent", [&](const short&) { ++silent; });
  CHECK_THROWS_AS(rp.attach<char>("x", [](const char&) {}), std::invalid_argument);
  rp.run();
  CHECK(ints == std::vector<int>{1, 3});  // both int points named "x"
  CHECK(floats == std::vector<float>{2.5f});
  CHECK(doubles == std::vector<double>{4.5});
  CHECK(silent == 0);
  CHECK_THROWS_AS(rp.run(), std::logic_error);
}

// A copy would share the file's reading position (a copy run from a consumer ended the original's
// run early, silently) and the consumers: a replay is moved, never copied.
static_assert(!std::is_copy_constructible_v<devtap::replay> && !std::is_copy_assignable_v<devtap::replay>);
static_assert(std::is_nothrow_move_constructible_v<devtap::replay> && std::is_nothrow_move_assignable_v<devtap::replay>);

TEST_CASE("replay: a moved replay runs where it went; the moved-from one refuses attach() and run(), and reads as empty") {
  temp_file file("moved");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .name = "mv", .timestamps = true, .record_file = file.path});
    auto x = rx.attach<int>([](const int&) {}, "x");
    rx.name_scope(7, "seven");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 100; ++i) ctx.tap(x, i);
    });
    rx.close();
  }
  devtap::replay rp(file.path);
  int got = 0;
  rp.attach<int>("x", [&](const int&) { ++got; });
  devtap::replay moved = std::move(rp);
  CHECK_THROWS_WITH(rp.run(), Catch::Contains("moved from"));
  CHECK_THROWS_WITH(rp.attach<int>("x", [](const int&) {}), Catch::Contains("moved from"));
  CHECK_THROWS_WITH(rp.attach<int>("x", [](const int&) {}, devtap::merged), Catch::Contains("moved from"));
  CHECK(rp.receiver_name().empty());
  CHECK_FALSE(rp.timestamps());
  CHECK(rp.point_names().empty());
  CHECK(rp.scope_names().empty());
  CHECK(rp.devices().empty());
  CHECK(moved.receiver_name() == "mv");
  CHECK(moved.timestamps());
  CHECK(moved.scope_names().at(7) == "seven");
  const devtap::replay_stats stats = moved.run();
  CHECK(got == 100);
  CHECK(stats.delivered == 100);
  // Assigned over: the target's own consumers go, it runs the source's once.
  devtap::replay again(file.path), target(file.path);
  int counted = 0, dropped_consumer = 0;
  again.attach<int>("x", [&](const int&) { ++counted; });
  target.attach<int>("x", [&](const int&) { ++dropped_consumer; });
  devtap::replay& same = again;
  again = std::move(same);  // a self-move keeps it whole
  target = std::move(again);
  target.run();
  CHECK(counted == 100);
  CHECK(dropped_consumer == 0);
  CHECK_THROWS_AS(target.run(), std::logic_error);
  CHECK_THROWS_WITH(again.run(), Catch::Contains("moved from"));
}

TEST_CASE("replay: attach() from a consumer during run(), or after it, is refused; a call point says it is one") {
  temp_file file("attach_late");
  devtap::cpu_client cpus(2);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto x = rx.attach<int>([](const int&) {}, "x");
    auto ask = rx.serve<int, int>([](const int& q) { return q + 1; }, "ask");
    for (auto* dev : cpus.cpu_devices())
      dev->run([&](devtap::cpu_context& ctx) {
        for (int i = 0; i < 3; ++i) ctx.tap(x, i);
        CHECK(ctx.call(ask, 1) == 2);
      });
    rx.close();
  }
  devtap::replay rp(file.path);
  std::string refused_inside, refused_at_end;
  int seen = 0;
  // Each attach during run() pushed onto the consumer list run() walks: ASan saw a use after free.
  rp.attach<int>("x", [&](const int&) {
    ++seen;
    try {
      rp.attach<int>("x", [](const int&) {});
    } catch (const std::logic_error& e) {
      refused_inside = e.what();
    }
    throw std::runtime_error("after the refused attach");
  });
  rp.attach<int>("x", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (co_await in.next()) {
    }
    try {  // at a stream's end, while run() walks the consumers to finish them
      rp.attach<int>("x", [](const int&) {});
    } catch (const std::logic_error& e) {
      refused_at_end = e.what();
    }
  });
  CHECK_THROWS_AS(rp.run(), devtap::tap_error);
  CHECK(seen == 6);
  const std::string expected = "devtap: replay '" + file.path + "': attach() after run() was called (attach every consumer first)";
  CHECK(refused_inside == expected);
  CHECK(refused_at_end == expected);
  try {
    rp.attach<int>("x", [](const int&) {});
    FAIL("attach after run() was accepted");
  } catch (const std::logic_error& e) {
    CHECK(e.what() == expected);
  }
  devtap::replay again(file.path);
  try {
    again.attach<int>("ask", [](const int&) {});
    FAIL("a call point was attached");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()) ==
          "devtap: replay '" + file.path + "': point 'ask' is a call (receiver::serve): replay re-delivers taps, not calls");
  }
}

TEST_CASE("replay: a consumer that throws on every record keeps 16 failures and counts the rest") {
  temp_file file("throws-always");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<int>([](const int&) {}, "n");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { for (int i = 0; i < 1000; ++i) ctx.tap(point, i); });
    rx.close();
  }
  devtap::replay rp(file.path);
  int calls = 0;
  rp.attach<int>("n", [&](const int&) {
    ++calls;
    throw std::runtime_error("always");
  });
  try {
    rp.run();
    FAIL("run() did not report the failures");
  } catch (const devtap::tap_error& e) {
    REQUIRE(e.failures().size() == 17);
    CHECK(e.failures()[0].message == "always");
    CHECK(e.failures()[16].message == "984 more exception(s), not kept (1000 in all)");
  }
  CHECK(calls == 1000);  // each record still reached it
}

namespace {
// A recording built by hand (docs/timeline.md, "The file format"): 8-byte words, little-endian.
struct handmade_recording {
  std::string bytes;
  void u32_pair(std::uint32_t a, std::uint32_t b) {
    bytes.append(reinterpret_cast<const char*>(&a), 4);
    bytes.append(reinterpret_cast<const char*>(&b), 4);
  }
  void u64(std::uint64_t v) { bytes.append(reinterpret_cast<const char*>(&v), 8); }
  void str(std::string_view s) {
    const auto n = static_cast<std::uint32_t>(s.size());
    bytes.append(reinterpret_cast<const char*>(&n), 4);
    bytes += s;
    bytes.append((8 - (4 + s.size()) % 8) % 8, '\0');
  }
  // The file head and a header naming `devices` cpu devices.
  static handmade_recording with_devices(std::uint32_t devices) {
    handmade_recording h;
    for (std::uint32_t d = 0; d < devices; ++d) {
      h.u32_pair(d, 0);
      h.str("cpu");
      h.str("cpu:" + std::to_string(d));
    }
    handmade_recording file;
    file.bytes = "devtapRC";
    file.u32_pair(1, 0);  // version 1, no timestamps
    file.u64(0);          // origin
    handmade_recording header;
    header.str("handmade");
    header.u32_pair(devices, 0);
    header.bytes += h.bytes;
    file.u64(header.bytes.size());
    file.bytes += header.bytes;
    return file;
  }
};
}  // namespace

TEST_CASE("replay: a header naming more than 65536 devices is refused; 65536 are read") {
  temp_file file("devices");
  // none: no receiver writes one (it opens on at least one device), and a shared or merged
  // consumer of it would never see its end
  write_all(file.path, handmade_recording::with_devices(0).bytes);
  CHECK_THROWS_WITH(devtap::replay(file.path), Catch::Matchers::Contains("damaged header (it names no device)"));
  write_all(file.path, handmade_recording::with_devices(devtap::detail::max_recorded_devices + 1).bytes);
  try {
    devtap::replay refused(file.path);
    FAIL("a header naming 65537 devices was read");
  } catch (const std::runtime_error& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("65537 devices") && Catch::Matchers::Contains("at most 65536"));
  }
  write_all(file.path, handmade_recording::with_devices(devtap::detail::max_recorded_devices).bytes);
  devtap::replay rp(file.path);
  CHECK(rp.devices().size() == devtap::detail::max_recorded_devices);
}

TEST_CASE("replay: a sparse file claiming a huge chunk or header, or a chunk of zeros, is damage with its size named") {
  // A size is checked against the file's, and `truncate` makes a file of any size in a few blocks:
  // what it claims beyond memory is refused as damage, not std::bad_alloc (or a crash)
  temp_file file("sparse");
  const handmade_recording rec = handmade_recording::with_devices(1);  // v1: no end chunk needed
  const auto sparse = [&](const std::string& head, std::uint64_t claimed) {
    write_all(file.path, head);
    REQUIRE(::truncate(file.path.c_str(), static_cast<off_t>(head.size() + claimed)) == 0);
  };
  const auto refusal = [&]() -> std::string {
    try {
      devtap::replay rp(file.path);
      (void)rp.run();
      return "opened and ran";
    } catch (const std::runtime_error& e) {
      return e.what();
    }
  };
  if (allocations_limited) {  // the guard fails an allocation above 1 GiB as a full memory would
    const std::uint64_t huge = std::uint64_t{2} << 30;
    handmade_recording chunk;  // a records chunk of device 0 claiming 2 GiB
    chunk.u32_pair(3, 0);
    chunk.u64(huge);
    sparse(rec.bytes + chunk.bytes, huge);
    std::string what = refusal();
    CHECK_THAT(what, Catch::Matchers::Contains("a chunk of 2147483648 bytes, more than this process can hold in memory") &&
                         Catch::Matchers::Contains("chunk at byte " + std::to_string(rec.bytes.size())));
    std::string header = rec.bytes.substr(0, 32);  // the header's own size claims 2 GiB
    std::memcpy(header.data() + 24, &huge, 8);
    sparse(header, huge);
    what = refusal();
    CHECK_THAT(what, Catch::Matchers::Contains("a header of 2147483648 bytes, more than this process can hold in memory"));
  }
  // Below the limit the claim is read: zeros where entries were are damage, not markers of kind 0
  for (const std::uint64_t zeros : {std::uint64_t{32}, std::uint64_t{1} << 20}) {
    handmade_recording chunk;
    chunk.u32_pair(3, 0);
    chunk.u64(zeros);
    sparse(rec.bytes + chunk.bytes, zeros);
    CHECK_THAT(refusal(), Catch::Matchers::Contains("a marker of kind 0, which no writer makes"));
  }
}

TEST_CASE("replay: a file of many point definitions opens with the first definition of each id") {
  temp_file file("points");
  handmade_recording rec = handmade_recording::with_devices(1);
  constexpr std::uint32_t points = 50000;  // a linear search per definition took seconds here
  for (std::uint32_t i = 1; i <= points + 1; ++i) {
    const std::uint32_t id = i <= points ? i : 7;  // the last one redefines id 7: ignored
    const std::string name = i <= points ? "p" + std::to_string(i) : "again";
    handmade_recording body;
    body.u32_pair(id, 1);  // a tap point
    body.u64(devtap::type_fingerprint_v<std::uint64_t>);
    body.str(name);
    rec.u32_pair(1, 0);  // chunk: point, device 0
    rec.u64(body.bytes.size());
    rec.bytes += body.bytes;
  }
  handmade_recording records;  // three records of point 7, unstamped: word, bytes, read_ns, payload
  for (std::uint64_t v = 1; v <= 3; ++v) {
    records.u32_pair(7, 8);
    records.u64(v * 1000);
    records.u64(v * 10);
  }
  rec.u32_pair(3, 0);  // chunk: records, device 0
  rec.u64(records.bytes.size());
  rec.bytes += records.bytes;
  write_all(file.path, rec.bytes);

  devtap::replay rp(file.path);
  std::vector<std::uint64_t> seen;
  rp.attach<std::uint64_t>("p7", [&](const std::uint64_t& v) { seen.push_back(v); });
  CHECK_THROWS_AS(rp.attach<std::uint64_t>("again", [](const std::uint64_t&) {}), std::invalid_argument);
  const devtap::replay_stats stats = rp.run();
  CHECK(seen == std::vector<std::uint64_t>{10, 20, 30});
  CHECK(stats.records == 3);
  CHECK(stats.cut_short_at == 0);
}

TEST_CASE("replay: an unknown chunk type, a definition longer than its fields, a chunk after the end are damage") {
  temp_file file("damage");
  handmade_recording rec = handmade_recording::with_devices(1);
  rec.bytes.replace(8, 4, std::string("\x02\0\0\0", 4));  // version 2: it ends with an end chunk
  handmade_recording point;  // a tap point "p" of std::uint64_t, id 7
  point.u32_pair(7, 1);
  point.u64(devtap::type_fingerprint_v<std::uint64_t>);
  point.str("p");
  const auto chunk = [](std::uint32_t type, const std::string& body) {
    handmade_recording c;
    c.u32_pair(type, 0);
    c.u64(body.size());
    c.bytes += body;
    return c.bytes;
  };
  handmade_recording records;  // one unstamped record of point 7: word, bytes, read_ns, payload
  records.u32_pair(7, 8);
  records.u64(1000);
  records.u64(42);
  const std::string whole = rec.bytes + chunk(1, point.bytes) + chunk(3, records.bytes) + chunk(4, "");
  const auto replay_of = [&](const std::string& bytes) {
    write_all(file.path, bytes);
    devtap::replay rp(file.path);
    std::uint64_t seen = 0;
    rp.attach<std::uint64_t>("p", [&](const std::uint64_t& v) { seen = v; });
    const auto st = rp.run();
    CHECK(seen == 42);
    return st;
  };
  CHECK(replay_of(whole).cut_short_at == 0);
  CHECK(replay_of(rec.bytes + chunk(1, point.bytes) + chunk(3, records.bytes)).cut_short_at == whole.size() - 16);
  write_all(file.path, rec.bytes);  // cut before the point's definition: attach says the file is cut
  devtap::replay before_points(file.path);
  CHECK_THROWS_WITH(before_points.attach<std::uint64_t>("p", [](const std::uint64_t&) {}),
                    "devtap: replay '" + file.path + "' has no point named 'p' (it has none; the recording is cut short at byte " +
                        std::to_string(rec.bytes.size()) + ")");
  const auto refused = [&](const std::string& bytes, const std::string& why) {
    write_all(file.path, bytes);
    try {
      devtap::replay rp(file.path);
      FAIL("replayed: " << why);
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Catch::Matchers::Contains(file.path) && Catch::Matchers::Contains(why));
    }
  };
  // A damaged type: before, the chunk was skipped and its records were lost without a word.
  refused(rec.bytes + chunk(1, point.bytes) + chunk(7, records.bytes) + chunk(4, ""), "unknown chunk type 7");
  // A definition that claims the next chunk as its own: before, that chunk's records were lost.
  const std::string swallowing = chunk(1, point.bytes + chunk(3, records.bytes));
  refused(rec.bytes + swallowing + chunk(4, ""), "damaged point definition");
  refused(whole + chunk(3, records.bytes), "a chunk after the recording's end chunk");
  refused(rec.bytes + chunk(1, point.bytes) + chunk(4, std::string(8, '\0')), "damaged end chunk");
}

namespace {
struct switched {  // a bool among raw bytes: a damaged file may hold any byte there
  std::uint64_t marker = 0;
  bool on = false;
};
struct switched_list {  // ... or inside a span's elements (the structured encoding)
  std::uint64_t marker = 0;
  std::span<const switched> items{};
};
// Where `marker` is stored in `bytes`, the first time after `from` (npos: nowhere).
std::size_t find_marker(const std::string& bytes, std::uint64_t marker, std::size_t from = 0) {
  return bytes.find(std::string(reinterpret_cast<const char*>(&marker), sizeof marker), from);
}
}  // namespace

TEST_CASE("replay: a damaged bool (neither 0 nor 1) is counted undecodable, never handed to a consumer") {
  temp_file file("bools");
  temp_file damaged("bools-damaged");
  constexpr std::uint64_t base = 0x5eed'0000'0000'0000ull;
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto one = rx.attach<switched>([](const switched&) {}, "one");
    auto list = rx.attach<switched_list>([](const switched_list&) {}, "list");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (std::uint64_t i = 0; i < 4; ++i) ctx.tap(one, switched{base + i, i % 2 == 0});
      const switched items[2] = {{base + 100, true}, {base + 101, false}};
      ctx.tap(list, switched_list{base + 10, std::span<const switched>(items)});
    });
    rx.close();
  }
  std::string bytes = read_all(file.path);
  // Record 1's bool becomes 2, record 2's 0xff, and the list's second element's 0x80.
  for (const auto& [marker, value] : {std::pair{base + 1, '\x02'}, std::pair{base + 2, '\xff'}, std::pair{base + 101, '\x80'}}) {
    const std::size_t at = find_marker(bytes, marker);
    REQUIRE(at != std::string::npos);
    REQUIRE(find_marker(bytes, marker, at + 1) == std::string::npos);  // recorded once
    bytes[at + offsetof(switched, on)] = value;
  }
  write_all(damaged.path, bytes);

  for (const bool coroutine : {false, true}) {
    INFO((coroutine ? "coroutine consumers" : "callable consumers"));
    std::vector<std::uint64_t> seen;
    std::vector<std::vector<bool>> lists;
    devtap::replay rp(damaged.path);
    if (coroutine) {
      rp.attach<switched>("one", [&seen](devtap::inbox<switched> in) -> devtap::consumer<switched> {
        while (auto s = co_await in.next()) seen.push_back(s->marker + (s->on ? 1000 : 0));
      });
      rp.attach<switched_list>("list", [&lists](devtap::inbox<switched_list> in) -> devtap::consumer<switched_list> {
        while (auto l = co_await in.next()) {
          lists.emplace_back();
          for (const switched& s : l->items) lists.back().push_back(s.on);
        }
      });
    } else {
      rp.attach<switched>("one", [&seen](const switched& s) { seen.push_back(s.marker + (s.on ? 1000 : 0)); });
      rp.attach<switched_list>("list", [&lists](const switched_list& l) {
        lists.emplace_back();
        for (const switched& s : l.items) lists.back().push_back(s.on);
      });
    }
    const auto stats = rp.run();
    CHECK(stats.records == 5);
    CHECK(stats.delivered == 2);
    CHECK(stats.undecodable == 3);
    CHECK(seen == std::vector<std::uint64_t>{base + 1000, base + 3});
    CHECK(lists.empty());
  }
  // The undamaged file delivers all five.
  devtap::replay rp(file.path);
  std::uint64_t ons = 0;
  rp.attach<switched>("one", [&ons](const switched& s) { ons += s.on ? 1 : 0; });
  rp.attach<switched_list>("list", [&ons](const switched_list& l) { ons += l.items.size(); });
  const auto stats = rp.run();
  CHECK(stats.delivered == 5);
  CHECK(stats.undecodable == 0);
  CHECK(ons == 2 + 2);
}

TEST_CASE("flush(): the trace file and the recording hold every record consumed before it, while the receiver runs") {
  temp_file trace("flush-trace"), record("flush-record");
  devtap::cpu_client cpus(3);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .trace_file = trace.path, .record_file = record.path});
  std::atomic<int> consumed{0};
  auto point = rx.attach<int>([&](const int&) { consumed.fetch_add(1); }, "n");
  // Events of point "n" in the trace written so far (a running trace lacks only its closing "]}").
  const auto trace_events = [&] {
    const auto json = nlohmann::json::parse(read_all(trace.path) + "\n]}\n");
    std::size_t n = 0;
    for (const auto& e : json.at("traceEvents")) n += e.value("name", "") == "n" ? 1 : 0;
    return n;
  };
  const auto replayed = [&] {
    devtap::replay rp(record.path);
    std::map<std::string, int> per_device;
    rp.attach<int>("n", [&](const int&, const devtap::tap_info& info) { ++per_device[info.device.name()]; });
    const auto st = rp.run();
    CHECK(st.cut_short_at != 0);  // the writer has not closed it
    return per_device;
  };
  // Far below what fills a device's buffer (64 KiB of trace, 256 KiB of recording): without flush()
  // writing it, nothing of these would be in the files until close().
  for (const int each : {1, 5, 40}) {
    for (auto* dev : cpus.cpu_devices())
      dev->run([&](devtap::cpu_context& ctx) { for (int i = 0; i < each; ++i) ctx.tap(point, i); });
    rx.flush();
    const int total = consumed.load();
    CHECK(trace_events() == static_cast<std::size_t>(total));
    const auto per_device = replayed();
    REQUIRE(per_device.size() == 3);
    for (const auto& [name, n] : per_device) CHECK(n * 3 == total);
  }
  // Flushes racing taps and each other: every one returns, and the files end whole at close().
  std::atomic<bool> stop{false};
  std::thread flusher([&] { while (!stop.load()) rx.flush(); });
  for (int round = 0; round < 50; ++round) {
    for (auto* dev : cpus.cpu_devices()) dev->run([&](devtap::cpu_context& ctx) { ctx.tap(point, round); });
    rx.flush();
  }
  stop = true;
  flusher.join();
  rx.close();
  std::size_t closed_events = 0;
  const nlohmann::json closed = parse_trace(trace.path);
  for (const auto& e : closed.at("traceEvents")) closed_events += e.value("name", "") == "n" ? 1 : 0;
  CHECK(closed_events == static_cast<std::size_t>(consumed.load()));
  CHECK(consumed.load() == 3 * (1 + 5 + 40 + 50));
}

namespace {
// The offsets of a recording's chunks (type, offset of its header), from its layout (timeline.md).
std::vector<std::pair<std::uint32_t, std::size_t>> chunks_of(const std::string& bytes) {
  std::uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data() + 24, 8);
  std::vector<std::pair<std::uint32_t, std::size_t>> out;
  for (std::size_t at = 32 + header_bytes; at + 16 <= bytes.size();) {
    std::uint32_t type = 0;
    std::uint64_t body = 0;
    std::memcpy(&type, bytes.data() + at, 4);
    std::memcpy(&body, bytes.data() + at + 8, 8);
    out.emplace_back(type, at);
    at += 16 + body;
  }
  return out;
}
}  // namespace

TEST_CASE("replay: damage inside a records chunk, or bytes after the end, is refused at open, before any record") {
  temp_file file("entry-damage"), damaged("entry-damage-copy");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<int>([](const int&) {}, "n");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { for (int i = 0; i < 100000; ++i) ctx.tap(point, i); });
    rx.close();
  }
  const std::string bytes = read_all(file.path);
  const auto chunks = chunks_of(bytes);
  std::size_t last_records = 0, records_chunks = 0;
  for (const auto& [type, at] : chunks)
    if (type == 3) last_records = at, ++records_chunks;
  REQUIRE(records_chunks >= 2);  // records before the damaged chunk: they were delivered before run() threw
  REQUIRE(chunks.back().first == 4);
  const auto refused = [&](const std::string& what, const std::string& why) {
    INFO("a file of " << what.size() << " bytes, the recording's " << bytes.size());
    write_all(damaged.path, what);
    int delivered = 0;
    try {
      devtap::replay rp(damaged.path);
      rp.attach<int>("n", [&](const int&) { ++delivered; });
      (void)rp.run();
      FAIL("not refused");
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Catch::Contains(why));
    }
    CHECK(delivered == 0);
  };
  SECTION("an entry's size running past its chunk") {
    std::string bad = bytes;
    const std::uint32_t huge = 0x7ffffff0;
    std::memcpy(bad.data() + last_records + 16 + 4, &huge, 4);  // the first entry's size field
    refused(bad, "truncated entry");
  }
  SECTION("a record of a point no definition names") {
    std::string bad = bytes;
    const std::uint32_t id = 4242;  // (the word's low half: the id, without the fingerprint flag in the size)
    std::memcpy(bad.data() + last_records + 16, &id, 4);
    refused(bad, "which no definition names");
  }
  SECTION("bytes after the end chunk: part of a chunk, or a whole one") {
    refused(bytes + std::string(8, '\0'), "bytes after the recording's end chunk");
    refused(bytes + std::string(24, '\0'), "after the recording's end chunk");  // (a whole empty chunk, then 8 bytes)
    refused(bytes + bytes.substr(bytes.size() - 16), "a chunk after the recording's end chunk");
  }
}

TEST_CASE("replay: a consumer may destroy the replay during run(); run() finishes with what it holds") {
  temp_file file("destroyed");
  devtap::cpu_client cpus(2);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<int>([](const int&) {}, "n");
    for (auto* dev : cpus.cpu_devices()) dev->run([&](devtap::cpu_context& ctx) { for (int i = 0; i < 1000; ++i) ctx.tap(point, i); });
    rx.close();
  }
  auto rp = std::make_unique<devtap::replay>(file.path);
  int delivered = 0, ends = 0;
  rp->attach<int>("n", [&](const int& v) {
    ++delivered;
    if (v == 10) rp.reset();  // (ASan: a heap-use-after-free in run() before)
  });
  rp->attach<int>("n", [&](devtap::inbox<int> in) -> devtap::consumer<int> {
    while (co_await in.next()) {
    }
    ++ends;
  });
  const auto st = rp->run();
  CHECK(rp == nullptr);
  CHECK(delivered == 2000);
  CHECK(ends == 2);
  CHECK(st.delivered == 4000);
}

namespace {
// A receiver whose record file is a pipe that is open but read by nobody yet, and one cpu device
// tapping far more than the pipe holds (64 KiB): the reader blocks in a write, holding the file,
// and the producers then block for space.
struct unread_pipe_recording {
  explicit unread_pipe_recording(const char* name) : fifo(name) {
    REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
    reader = ::open(fifo.path.c_str(), O_RDONLY | O_NONBLOCK);  // there, but it reads nothing yet
    REQUIRE(reader >= 0);
    rx = std::make_unique<devtap::receiver>(
        devtap::receiver_options{.devices = all(cpus), .close_timeout = 200ms, .record_file = fifo.path});
    const auto point = rx->attach<int>([](const int&) {}, "n");
    work = cpus.cpu_devices()[0]->submit([point](devtap::cpu_context& ctx) {
      try {
        for (int i = 0; i < 1000000; ++i) ctx.tap(point, i);
      } catch (const devtap::outfeed_error&) {  // close() gave up on the device
      }
    });
  }
  temp_file fifo;
  int reader = -1;
  devtap::cpu_client cpus{1};
  std::unique_ptr<devtap::receiver> rx;
  std::future<void> work;
};
}  // namespace

TEST_CASE("record_file: a pipe nobody reads does not hold close() past its deadline") {
  unread_pipe_recording pipe("fifo");
  auto& rx = pipe.rx;
  const int reader = pipe.reader;
  auto& work = pipe.work;
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  try {
    rx->close();
    FAIL("close() did not report the stuck file");
  } catch (const devtap::timeout_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("did not finish by close()'s deadline (a pipe nobody reads?)"));
    CHECK_THAT(e.what(), Catch::Contains("a write to the trace or record file"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // (close_timeout + the grace: not for ever)
  rx.reset();
  // Reading the pipe frees the stuck reader; the file is closed when the receiver's last part goes:
  // the pipe then reads its end.
  char buffer[1 << 16];
  const auto until = std::chrono::steady_clock::now() + 20s;
  ssize_t got = 1;
  while (got != 0 && std::chrono::steady_clock::now() < until)
    if ((got = ::read(reader, buffer, sizeof buffer)) < 0) std::this_thread::sleep_for(1ms);  // (empty, not ended)
  CHECK(got == 0);
  ::close(reader);
  work.get();
}

TEST_CASE("record_file: an attach() waiting to write its point into a pipe nobody reads does not hold close()") {
  unread_pipe_recording pipe("fifo-attach");
  auto& rx = pipe.rx;
  const int reader = pipe.reader;
  auto& work = pipe.work;
  std::this_thread::sleep_for(100ms);  // the reader is stuck in a write into the full pipe
  std::atomic<bool> attach_done{false};
  std::thread attacher([&rx, &attach_done] {  // waits for the file to write its point (it held the table's lock)
    try {
      (void)rx->attach<long>([](const long&) {}, "late");
    } catch (const std::logic_error&) {  // (when close() came first)
    }
    attach_done = true;
  });
  std::this_thread::sleep_for(100ms);
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(rx->close(), devtap::timeout_error);
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // it waited for the pipe's reader before
  char buffer[1 << 16];
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!attach_done && std::chrono::steady_clock::now() < until)  // reading frees the stuck writes
    if (::read(reader, buffer, sizeof buffer) <= 0) std::this_thread::sleep_for(1ms);
  attacher.join();  // before the receiver goes: it is its attach()
  rx.reset();
  ssize_t got = 1;
  while (got != 0 && std::chrono::steady_clock::now() < until)
    if ((got = ::read(reader, buffer, sizeof buffer)) < 0) std::this_thread::sleep_for(1ms);
  CHECK(got == 0);  // the file closed with the receiver's last part
  ::close(reader);
  work.get();
}

TEST_CASE("trace_file and record_file: close()'s own last writes into a full pipe nobody reads end at its deadline") {
  const bool trace = GENERATE(true, false);
  CAPTURE(trace);
  temp_file fifo("full-fifo");
  REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
  const int reader = ::open(fifo.path.c_str(), O_RDONLY | O_NONBLOCK);  // there, but it never reads
  REQUIRE(reader >= 0);
  devtap::cpu_client cpus(2);
  devtap::receiver_options options{.devices = all(cpus), .close_timeout = 200ms};
  (trace ? options.trace_file : options.record_file) = fifo.path;
  auto rx = std::make_unique<devtap::receiver>(options);
  auto point = rx->attach<int>([](const int&) {}, "n");
  for (auto* dev : cpus.cpu_devices()) dev->run([&](devtap::cpu_context& ctx) { for (int i = 0; i < 10; ++i) ctx.tap(point, i); });
  rx->flush();  // the readers have written all they hold: nothing of theirs waits at close
  // Then the pipe fills up (another writer): only close()'s own last writes find it full.
  const int filler = ::open(fifo.path.c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(filler >= 0);
  std::vector<char> junk(4096, 'x');
  while (::write(filler, junk.data(), junk.size()) > 0) {
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    rx->close();
    FAIL("close() did not report the file it could not finish");
  } catch (const devtap::tap_error& e) {  // not a timeout: every reader finished
    CHECK_THAT(e.what(), Catch::Contains("did not finish by close()'s deadline (a pipe nobody reads?)"));
  }
  const auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 150ms);  // it waited for the pipe until close()'s deadline...
  CHECK(took < 5s);      // ...not for ever
  rx.reset();
  ::close(filler);
  char buffer[1 << 16];  // the file was closed: the pipe reads its end once drained
  const auto until = std::chrono::steady_clock::now() + 20s;
  ssize_t got = 1;
  while (got != 0 && std::chrono::steady_clock::now() < until)
    if ((got = ::read(reader, buffer, sizeof buffer)) < 0) std::this_thread::sleep_for(1ms);
  CHECK(got == 0);
  ::close(reader);
}

TEST_CASE("record_file: close() after a timeout waits for a short write of another thread, and completes a regular file") {
  temp_file file("short-holder");
  devtap::cpu_client cpus(1);
  std::latch release(1);
  auto rx = std::make_unique<devtap::receiver>(
      devtap::receiver_options{.devices = all(cpus), .close_timeout = 100ms, .record_file = file.path});
  auto point = rx->attach<int>([&](const int&) { release.wait(); }, "n");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
  // Another thread writes to the recording all along (a scope name is a chunk of its own): close()
  // used to find the file held at the one instant it looked, and left it without its end.
  std::atomic<bool> stop{false};
  std::thread namer([&] {
    for (std::uint32_t id = 1; !stop.load(); ++id) rx->name_scope(id, "scope");
  });
  try {
    rx->close();
    FAIL("close() did not time out");
  } catch (const devtap::timeout_error& e) {
    CHECK_THAT(e.what(), !Catch::Contains("did not finish by close()'s deadline"));
  }
  stop = true;
  namer.join();
  release.count_down();
  rx.reset();
  devtap::replay rp(file.path);
  rp.attach<int>("n", [](const int&) {});
  CHECK(rp.run().cut_short_at == 0);  // whole: its end chunk is there
}

TEST_CASE("flush(): a device whose stream stopped before close() (a malformed record) is in the trace file") {
  temp_file trace("stopped-trace");
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 2 * 4096, .trace_file = trace.path});
  auto point = rx.attach<int>([](const int&) {}, "vals");
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { for (int i = 0; i < 50; ++i) ctx.tap(point, i); });
  auto broken = rx.outfeed(*cpus.cpu_devices()[0]).ring();
  REQUIRE(devtap_test::write_malformed_record(broken));
  for (int i = 0; i < 5000 && !rx.stats().devices[0].stream_failed; ++i) std::this_thread::sleep_for(1ms);
  REQUIRE(rx.stats().devices[0].stream_failed);
  rx.flush();  // the stream ended: its part was left for close() to write
  const std::string text = read_all(trace.path);
  std::size_t events = 0;
  for (auto at = text.find("\"vals\""); at != std::string::npos; at = text.find("\"vals\"", at + 1)) ++events;
  CHECK(events == 50);
  CHECK(text.find("malformed record") != std::string::npos);
  CHECK_THROWS_AS(rx.close(), devtap::tap_error);
}

// A record of an id no point had when the reader read it (counted in unknown_ids live) is kept as
// unknown: a point attached later that takes its id must not get it in the replay.
TEST_CASE("replay: a record unknown live is unknown in the replay, though a later point took its id") {
  temp_file file("unknown-then-defined");
  devtap_test::quiet_log quiet;
  int live_b = 0;
  std::uint64_t live_unknown = 0;
  {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto a = rx.attach<int>([](const int&) {}, "a");
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
    out.tap(devtap::tap_point<int>{a.id + 1, a.fingerprint, a.receiver}, 77);  // the id "b" will take
    rx.barrier();
    auto b = rx.attach<int>([&](const int&) { ++live_b; }, "b");
    REQUIRE(b.id == a.id + 1);
    out.tap(b, 78);
    CHECK_THROWS_WITH(rx.close(), Catch::Matchers::Contains("1 record(s) for unknown consumer id 2 skipped"));
    live_unknown = rx.stats().total().unknown_ids;
  }
  CHECK(live_unknown == 1);
  CHECK(live_b == 1);
  devtap::replay rp(file.path);
  std::vector<int> replayed_b;
  rp.attach<int>("b", [&](const int& v) { replayed_b.push_back(v); });
  const auto st = rp.run();
  CHECK(replayed_b == std::vector<int>{78});
  CHECK(st.delivered == 1);
  CHECK(st.records == 2);
  // The entry keeps its own id (the converted trace names it "unknown consumer id 2", as the live one did),
  // marked as no point's.
  devtap::detail::recording_reader file_reader(file.path);
  std::vector<std::pair<std::uint32_t, bool>> entries;  // (id, unknown)
  file_reader.for_each([&](const devtap::detail::recorded_entry& e) {
    if (!e.is_line && !e.is_marker) entries.emplace_back(e.id, e.unknown);
  });
  CHECK(entries == std::vector<std::pair<std::uint32_t, bool>>{{2, true}, {2, false}});
}

TEST_CASE("replay: scope_names() gives the names a kernel's scope ids were given, as the recording kept them") {
  temp_file file("scope-names");
  {
    devtap::cpu_client cpus(1);
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    rx.name_scope(7, "solve");
    rx.name_scope(9, "io");
    rx.name_scope(7, "solve again");  // the latest name counts, as in the trace file
    rx.close();
  }
  devtap::replay rp(file.path);
  CHECK(rp.scope_names() == std::map<std::uint32_t, std::string>{{7, "solve again"}, {9, "io"}});
}

// The files were started (emptied, a header written) before the reader threads: when the second
// reader could not start, the constructor threw with an earlier trace replaced by an empty one that
// said every device's reader was stuck, and a recording it had made left behind.
TEST_CASE("trace_file and record_file: a receiver whose reader thread cannot start leaves them as they were",
          "[files]") {
#if defined(DEVTAP_TEST_RUNTIME_STARTS_THREADS)
  SUCCEED("not under a sanitizer: its runtime starts the threads, pthread_create is not replaced");
#else
  devtap::cpu_client cpus(2);
  temp_file old_trace("thread-kept.json"), new_record("thread-new.devtap");
  write_all(old_trace.path, "an earlier trace");
  for (const int failing : {0, 1}) {  // the first reader, or the second once the first runs
    threads_until_failure = failing;
    try {
      devtap::receiver rx({.devices = all(cpus), .trace_file = old_trace.path, .record_file = new_record.path});
      FAIL("the receiver opened although a reader thread could not start");
    } catch (const devtap::outfeed_error& e) {
      CHECK(std::string(e.what()).find("could not start its readers") != std::string::npos);
    }
    threads_until_failure = -1;
    CHECK(read_all(old_trace.path) == "an earlier trace");
    CHECK_FALSE(std::filesystem::exists(new_record.path));
  }
  // Nothing stayed attached: the same devices and files open, and the files get this run.
  {
    devtap::receiver rx({.devices = all(cpus), .trace_file = old_trace.path, .record_file = new_record.path});
    std::atomic<int> got{0};
    auto point = rx.attach<int>([&](const int&) { ++got; }, "values");
    for (auto* dev : cpus.cpu_devices()) dev->run([&](devtap::cpu_context& ctx) { ctx.tap(point, 1); });
    rx.close();
    CHECK(got == 2);
  }
  CHECK(nlohmann::json::parse(read_all(old_trace.path)).contains("traceEvents"));
  devtap::replay rp(new_record.path);
  CHECK(rp.devices().size() == 2);
#endif
}

// A scope consumer attached under a name got every scope record live; replayed under that name it
// got none (the records are kept under the built-in scope point, which the name did not lead to).
TEST_CASE("replay: a scope consumer attached live under a name gets its scope records under that name") {
  temp_file file("named-scopes.devtap");
  devtap::cpu_client cpus(1);
  int live = 0;
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto phases = rx.attach<devtap::scope_event>([&](const devtap::scope_event&) { ++live; }, "phases");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 3; ++i) auto s = ctx.scope("step");
      ctx.tap(phases, devtap::scope_event{42, devtap::scope_phase::begin, {}});  // on its own point: it alone gets it
    });
    rx.close();
  }
  REQUIRE(live == 7);
  for (const auto& [name, each] : {std::pair{"phases", 7}, std::pair{"scope", 6}}) {
    devtap::replay rp(file.path);
    int again = 0;
    rp.attach<devtap::scope_event>(name, [&](const devtap::scope_event&) { ++again; });
    rp.attach<devtap::scope_event>(name, [&](const devtap::scope_event&) { ++again; });  // (a second one: each gets them)
    CHECK(rp.run().delivered == 2 * static_cast<std::uint64_t>(each));
    CHECK(again == 2 * each);
  }
}

// A tap forged onto a handler's id (its call flag cleared): the writer kept it under the handler's
// point, which the reader looks up by the tap's id and does not find: the whole file was refused.
TEST_CASE("replay: a tap on a handler's id is unknown in the recording, which still reads back whole") {
  devtap_test::quiet_log quiet;
  for (const bool stamps : {false, true}) {
    INFO("timestamps " << stamps);
    temp_file file("tap-on-handler.devtap");
    devtap::cpu_client cpus(1);
    int live = 0;
    {
      devtap::receiver rx({.devices = all(cpus), .timestamps = stamps, .record_file = file.path});
      auto values = rx.attach<int>([&](const int&) { ++live; }, "values");
      auto ask = rx.serve<int, int>([](const int& q) { return q; }, "ask");
      const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
      out.tap(values, 1);
      out.tap(devtap::tap_point<int>{ask.id & ~devtap::detail::call_id_flag, ask.fingerprint, ask.receiver}, 5);
      out.tap(values, 2);
      CHECK_THROWS_WITH(rx.close(), Catch::Contains("[cpu:0] ask: 1 record(s) that do not match the consumer's type skipped"));
      CHECK(rx.stats().total().type_mismatches == 1);
    }
    CHECK(live == 2);
    devtap::replay rp(file.path);
    int again = 0;
    rp.attach<int>("values", [&](const int&) { ++again; });
    CHECK(rp.run().records == 3);
    CHECK(again == 2);
  }
}

TEST_CASE("replay: a path with a NUL byte is refused (the system would open the shorter path); the file takes no standard stream's place") {
  temp_file file("nul.devtap");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .record_file = file.path});
    auto point = rx.attach<int>([](const int&) {}, "values");
    rx.outfeed(*cpus.cpu_devices()[0]).tap(point, 1);
    rx.close();
  }
  CHECK_THROWS_WITH(devtap::replay(file.path + std::string("\0.other", 7)), Catch::Contains("holds a NUL byte (at "));
  // stdin closed: the recording must not become fd 0 (stdout's place, closed, is the same case:
  // /dev/stdout would then be the recording, opened for reading).
  const int saved = ::dup(STDIN_FILENO);
  REQUIRE(saved >= 0);
  ::close(STDIN_FILENO);
  {
    devtap::replay rp(file.path);
    CHECK(::fcntl(STDIN_FILENO, F_GETFD) == -1);
    int got = 0;
    rp.attach<int>("values", [&](const int&) { ++got; });
    rp.run();
    CHECK(got == 1);
  }
  ::dup2(saved, STDIN_FILENO);
  ::close(saved);
}
