// Scopes (devtap/tap/scope.hpp): cpu_context::scope's guard, outfeed::scope_begin/scope_end from a
// host thread, what consumers of devtap::scope_event receive and in which order, receiver::name_scope
// in the trace file, refusals, and names of every shape.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include "../temp_file.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

using namespace std::chrono_literals;

namespace {
std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

using devtap_test::temp_file;

nlohmann::json parse_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
}

std::string describe(const devtap::scope_event& e) {
  return std::string(e.phase == devtap::scope_phase::begin ? "begin " : e.phase == devtap::scope_phase::end ? "end " : "?? ") +
         std::string(e.text());
}

// A scope end as a consumer keeps it (the name is only valid during the call).
struct kept {
  std::uint32_t id;
  devtap::scope_phase phase;
  std::string name;
  std::string device;
  std::uint64_t sequence;
  std::int64_t time_ns;
};
kept keep(const devtap::scope_event& e, const devtap::tap_info& info) {
  return {e.id, e.phase, std::string(e.text()), info.device.name(), info.sequence,
          std::chrono::duration_cast<std::chrono::nanoseconds>(info.time.time_since_epoch()).count()};
}
}  // namespace

static_assert(devtap::scope_id("") == 0x811c9dc5u);  // FNV-1a's offset basis
static_assert(devtap::scope_id("a") == 0xe40c292cu);
static_assert(devtap::scope_id("forward") != devtap::scope_id("backward"));
static_assert(devtap::scope_id("forward") == devtap::scope_id(std::string_view("forward")));
constexpr char scope_buffer[16] = "forward";  // a char array reads up to its NUL, as a string_view
static_assert(devtap::scope_id(scope_buffer) == devtap::scope_id("forward"));

TEST_CASE("scope: ctx.scope's begin and end reach scope_event consumers in order with the work's taps") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  // One device: its reader calls both consumers, one record at a time, in the stream's order.
  std::vector<std::string> log;
  std::vector<std::uint32_t> ids;
  rx.attach<devtap::scope_event>([&](const devtap::scope_event& e) {
    log.push_back(describe(e));
    ids.push_back(e.id);
  });
  auto point = rx.attach<int>([&](const int& v) { log.push_back("tap " + std::to_string(v)); });
  std::uint32_t guard_id = 0;
  std::string guard_name;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    ctx.tap(point, 0);
    {
      auto s = ctx.scope("forward");
      guard_id = s.id();
      guard_name = s.name();
      ctx.tap(point, 1);
      ctx.tap(point, 2);
    }
    ctx.tap(point, 3);
  });
  rx.close();
  CHECK(guard_id == devtap::scope_id("forward"));
  CHECK(guard_name == "forward");
  CHECK(log == std::vector<std::string>{"tap 0", "begin forward", "tap 1", "tap 2", "end forward", "tap 3"});
  CHECK(ids == std::vector<std::uint32_t>{devtap::scope_id("forward"), devtap::scope_id("forward")});
  const auto stats = rx.stats().total();
  CHECK(stats.unknown_ids == 0);
  CHECK(stats.type_mismatches == 0);
  CHECK(stats.records == 6);
}

TEST_CASE("scope: with timestamps, each device's scope ends and taps share one gapless tap count") {
  constexpr int devices = 3, steps = 40;
  devtap::cpu_client cpus(devices);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true});
  std::mutex mutex;
  // Per device: (sequence, what), from a shared scope consumer and a shared tap consumer.
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::string>>> got;
  rx.attach<devtap::scope_event>(
      [&](const devtap::scope_event& e, const devtap::tap_info& info) {
        std::lock_guard lock(mutex);
        got[info.device.name()].emplace_back(info.sequence, describe(e));
      },
      devtap::shared);
  auto point = rx.attach<int>(
      [&](const int& v, const devtap::tap_info& info) {
        std::lock_guard lock(mutex);
        got[info.device.name()].emplace_back(info.sequence, "tap " + std::to_string(v));
      },
      devtap::shared);
  std::vector<std::future<void>> works;
  for (auto* d : cpus.cpu_devices())
    works.push_back(d->submit([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < steps; ++i) {
        auto s = ctx.scope("step");
        ctx.tap(point, i);
      }
    }));
  for (auto& w : works) w.get();
  rx.close();
  REQUIRE(got.size() == std::size_t{devices});
  for (auto& [device, records] : got) {
    INFO("device " << device);
    REQUIRE(records.size() == 3 * std::size_t{steps});
    // Each consumer saw its records in order; the two together, by sequence, are the device's stream.
    std::sort(records.begin(), records.end());
    for (std::size_t i = 0; i < records.size(); ++i) {
      INFO("record " << i);
      CHECK(records[i].first == i);  // every tap and scope end took one number: no gaps, no repeats
      const std::string expected = i % 3 == 0 ? "begin step" : i % 3 == 1 ? "tap " + std::to_string(i / 3) : "end step";
      CHECK(records[i].second == expected);
    }
  }
}

TEST_CASE("scope: a moved guard ends once, end() ends once, nested scopes nest") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus)});
  std::vector<std::string> log;
  rx.attach<devtap::scope_event>([&](const devtap::scope_event& e) { log.push_back(describe(e)); });
  auto point = rx.attach<int>([&](const int& v) { log.push_back("tap " + std::to_string(v)); });
  std::vector<std::string> names_after_move;
  cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
    {
      auto a = ctx.scope("moved");
      auto b = std::move(a);
      devtap::scope_guard c(std::move(b));
      names_after_move.push_back(c.name());
      ctx.tap(point, 0);
    }  // c ends it; a and b end nothing
    {
      auto s = ctx.scope("ended");
      s.end();
      s.end();
      ctx.tap(point, 1);
    }  // the destructor ends nothing more
    {
      auto outer = ctx.scope("outer");
      {
        auto inner = ctx.scope("inner");
        ctx.tap(point, 2);
      }
      ctx.tap(point, 3);
    }
  });
  rx.close();
  CHECK(names_after_move == std::vector<std::string>{"moved"});
  CHECK(log == std::vector<std::string>{"begin moved", "tap 0", "end moved", "begin ended", "end ended", "tap 1",
                                        "begin outer", "begin inner", "tap 2", "end inner", "tap 3", "end outer"});
}

TEST_CASE("scope: every scope consumer gets every scope record: per device, shared coroutine, merged") {
  constexpr int devices = 3, scopes = 50;
  devtap::cpu_client cpus(devices);
  devtap::receiver rx({.devices = all(cpus), .timestamps = true, .merge_lag = 5s});
  std::mutex mutex;
  std::map<std::string, std::vector<std::string>> per_device, coroutine;
  std::vector<kept> merged;  // called one record at a time
  std::atomic<int> coroutine_ends{0};
  rx.attach<devtap::scope_event>([&](const devtap::scope_event& e, const devtap::tap_info& info) {
    std::lock_guard lock(mutex);
    per_device[info.device.name()].push_back(describe(e));
  });
  rx.attach<devtap::scope_event>(
      [&](devtap::inbox<devtap::scope_event> in) -> devtap::consumer<devtap::scope_event> {
        while (auto e = co_await in.next()) {
          std::lock_guard lock(mutex);
          coroutine[in.info().device.name()].push_back(describe(*e));
        }
        coroutine_ends++;
      },
      devtap::shared);
  rx.attach<devtap::scope_event>(
      [&](const devtap::scope_event& e, const devtap::tap_info& info) { merged.push_back(keep(e, info)); }, devtap::merged);
  std::vector<std::future<void>> works;
  for (int d = 0; d < devices; ++d)
    works.push_back(cpus.cpu_devices()[static_cast<std::size_t>(d)]->submit([&, d](devtap::cpu_context& ctx) {
      for (int i = 0; i < scopes; ++i) {
        auto s = ctx.scope("d" + std::to_string(d) + "s" + std::to_string(i));
        if (i % 10 == d) std::this_thread::sleep_for(100us);
      }
    }));
  for (auto& w : works) w.get();
  rx.close();
  CHECK(coroutine_ends == 1);
  for (int d = 0; d < devices; ++d) {
    const std::string device = "cpu:" + std::to_string(d);
    INFO(device);
    std::vector<std::string> expected;
    for (int i = 0; i < scopes; ++i) {
      const std::string name = "d" + std::to_string(d) + "s" + std::to_string(i);
      expected.push_back("begin " + name);
      expected.push_back("end " + name);
    }
    CHECK(per_device[device] == expected);
    CHECK(coroutine[device] == expected);
    std::vector<std::string> from_merged;
    for (const kept& k : merged)
      if (k.device == device) from_merged.push_back((k.phase == devtap::scope_phase::begin ? "begin " : "end ") + k.name);
    CHECK(from_merged == expected);
  }
  REQUIRE(merged.size() == std::size_t{devices} * scopes * 2);
  for (std::size_t i = 1; i < merged.size(); ++i) CHECK(merged[i].time_ns >= merged[i - 1].time_ns);
  for (const kept& k : merged) CHECK(k.id == devtap::scope_id(k.name));
  const auto stats = rx.stats().total();
  CHECK(stats.unknown_ids == 0);
  CHECK(stats.type_mismatches == 0);
}

TEST_CASE("scope: scope records with no scope consumer are no error") {
  devtap::cpu_client cpus(2);
  devtap::receiver rx({.devices = all(cpus)});
  int taps = 0;
  auto point = rx.attach<int>([&](const int&) { ++taps; }, devtap::shared);
  for (auto* d : cpus.cpu_devices())
    d->run([&](devtap::cpu_context& ctx) {
      auto s = ctx.scope("unwatched");
      ctx.tap(point, 1);
    });
  CHECK_NOTHROW(rx.close());
  CHECK(taps == 2);
  CHECK(rx.stats().total().unknown_ids == 0);
  CHECK(rx.stats().total().type_mismatches == 0);
}

TEST_CASE("scope: outfeed::scope_begin/scope_end from a host thread carry the id and no name; name_scope names it in the trace") {
  temp_file trace("host.json");
  devtap::cpu_client cpus(2);
  std::mutex mutex;
  std::map<std::string, std::vector<kept>> got;          // by device
  std::map<std::string, std::vector<std::string>> order;  // by device: scope ends and taps
  const std::string quoted = "a \"quoted\"\nname\t\\ with {braces}";
  {
    devtap::receiver rx({.devices = all(cpus), .trace_file = trace.path});
    rx.name_scope(42, "x");
    rx.name_scope(44, quoted);
    rx.attach<devtap::scope_event>(
        [&](const devtap::scope_event& e, const devtap::tap_info& info) {
          std::lock_guard lock(mutex);
          got[info.device.name()].push_back(keep(e, info));
          order[info.device.name()].push_back(describe(e) + "#" + std::to_string(e.id));
        },
        devtap::shared);
    auto point = rx.attach<int>(
        [&](const int& v, const devtap::tap_info& info) {
          std::lock_guard lock(mutex);
          order[info.device.name()].push_back("tap " + std::to_string(v));
        },
        devtap::shared);
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[1]);
    out.scope_begin(42);
    out.tap(point, 1);
    out.scope_end(42);
    out.scope_begin(43);  // never named
    out.scope_end(43);
    out.scope_begin(44);
    out.scope_end(44);
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { auto s = ctx.scope("forward"); });
    rx.close();
  }
  const std::vector<kept>& host = got["cpu:1"];
  REQUIRE(host.size() == 6);
  for (const kept& k : host) CHECK(k.name.empty());
  const std::vector<std::uint32_t> host_ids = {host[0].id, host[1].id, host[2].id, host[3].id, host[4].id, host[5].id};
  CHECK(host_ids == std::vector<std::uint32_t>{42, 42, 43, 43, 44, 44});
  for (std::size_t i = 0; i < host.size(); ++i)
    CHECK(host[i].phase == (i % 2 == 0 ? devtap::scope_phase::begin : devtap::scope_phase::end));
  CHECK(order["cpu:1"] == std::vector<std::string>{"begin #42", "tap 1", "end #42", "begin #43", "end #43", "begin #44", "end #44"});
  REQUIRE(got["cpu:0"].size() == 2);
  CHECK(got["cpu:0"][0].name == "forward");
  CHECK(got["cpu:0"][1].name == "forward");

  const nlohmann::json json = parse_file(trace.path);
  std::map<std::string, std::vector<std::tuple<std::string, std::uint32_t, int>>> spans;  // by phase: name, id, tid
  for (const auto& e : json.at("traceEvents")) {
    const std::string ph = e.value("ph", "");
    if (ph == "B" || ph == "E") spans[ph].emplace_back(e.at("name").get<std::string>(), e.at("args").at("id").get<std::uint32_t>(), e.at("tid").get<int>());
  }
  for (const std::string ph : {"B", "E"}) {
    INFO("phase " << ph);
    REQUIRE(spans[ph].size() == 4);
    auto named = [&](const std::string& name) {
      return std::count_if(spans[ph].begin(), spans[ph].end(), [&](const auto& s) { return std::get<0>(s) == name; });
    };
    CHECK(named("x") == 1);
    CHECK(named(quoted) == 1);
    CHECK(named("forward") == 1);
    for (const auto& [name, id, tid] : spans[ph]) {
      if (name == "x") CHECK(id == 42);
      if (name == quoted) CHECK(id == 44);
      if (name == "forward") {
        CHECK(id == devtap::scope_id("forward"));
        CHECK(tid == 1);
      } else {
        CHECK(tid == 2);
      }
    }
  }
}

TEST_CASE("scope: refused without a receiver; a guard that outlives its receiver's close ends quietly") {
  devtap::cpu_client cpus(1);
  devtap::cpu_device& dev = *cpus.cpu_devices()[0];
  CHECK_THROWS_AS(cpus.cpu_devices()[0]->run([](devtap::cpu_context& ctx) { auto s = ctx.scope("nobody"); }),
                  devtap::outfeed_error);
  std::mutex log_mutex;
  std::vector<std::string> warnings;
  devtap::set_log_sink([&](devtap::log_level, std::string_view text) {
    std::lock_guard lock(log_mutex);
    warnings.emplace_back(text);
  });
  std::vector<std::string> seen;
  std::optional<devtap::scope_guard> outlives;
  {
    devtap::receiver rx({.devices = {&dev}});
    rx.attach<devtap::scope_event>([&](const devtap::scope_event& e) { seen.push_back(describe(e)); });
    {
      devtap::scope_guard late(rx.outfeed(dev), "late");
      devtap::scope_guard ended(rx.outfeed(dev), "ended-late");
      outlives.emplace(rx.outfeed(dev), "outlives");
      rx.close();
      CHECK_THROWS_AS(ended.end(), devtap::outfeed_error);  // as a tap after close
    }  // `late`'s destructor: the receiver is closed; it must not throw (nor terminate)
    CHECK_THROWS_AS(cpus.cpu_devices()[0]->run([](devtap::cpu_context& ctx) { auto s = ctx.scope("after"); }),
                    devtap::outfeed_error);
  }
  outlives.reset();  // the receiver itself is gone: the end goes nowhere, quietly
  devtap::set_log_sink({});
  CHECK(seen == std::vector<std::string>{"begin late", "begin ended-late", "begin outlives"});
  const auto mentions = [&](const std::string& what) {
    return std::any_of(warnings.begin(), warnings.end(), [&](const std::string& w) { return w.find(what) != std::string::npos; });
  };
  CHECK(mentions("'late'"));
  CHECK(mentions("'outlives'"));
  // A new receiver on the device works, scopes included.
  devtap::receiver rx({.devices = {&dev}});
  std::vector<std::string> again;
  rx.attach<devtap::scope_event>([&](const devtap::scope_event& e) { again.push_back(describe(e)); });
  dev.run([](devtap::cpu_context& ctx) { auto s = ctx.scope("again"); });
  rx.close();
  CHECK(again == std::vector<std::string>{"begin again", "end again"});
}

TEST_CASE("scope: a guard returned from the work outlives its receiver and the device's next ones; its end is refused, never touches freed memory") {
  // The device keeps one retired ring: a guard that ended after two more receivers closed tapped
  // into a freed ring (ASan: heap-use-after-free). The guard now pins its ring.
  devtap::cpu_client cpus(1);
  devtap::cpu_device& dev = *cpus.cpu_devices()[0];
  std::vector<std::string> warnings;
  devtap::set_log_sink([&](devtap::log_level, std::string_view text) { warnings.emplace_back(text); });
  std::vector<devtap::scope_guard> kept;
  {
    devtap::receiver rx({.devices = {&dev}});
    kept.push_back(dev.run([](devtap::cpu_context& ctx) { return ctx.scope("kept"); }));
    kept.push_back(dev.run([](devtap::cpu_context& ctx) { return ctx.scope("moved twice"); }));
    devtap::scope_guard moved = std::move(kept.back());
    kept.pop_back();  // a moved-from guard: ends nothing, pins nothing
    kept.push_back(std::move(moved));
  }
  for (int i = 0; i < 3; ++i) {  // each retires the ring before it
    devtap::receiver next({.devices = {&dev}});
    std::vector<std::string> seen;
    next.attach<devtap::scope_event>([&](const devtap::scope_event& e) { seen.push_back(describe(e)); });
    dev.run([](devtap::cpu_context& ctx) { auto s = ctx.scope("next"); });
    next.close();
    CHECK(seen == std::vector<std::string>{"begin next", "end next"});
  }
  kept.clear();  // the ends: refused (closed), logged
  devtap::set_log_sink({});
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].find("scope 'kept' on device 'cpu:0' could not be ended") != std::string::npos);
  CHECK(warnings[1].find("scope 'moved twice'") != std::string::npos);
  devtap::receiver last({.devices = {&dev}});  // the retired rings go: the pins are gone
  last.close();
}

TEST_CASE("scope: empty, odd and 64 KiB names arrive intact; larger than the ring is refused") {
  temp_file trace("names.json");
  devtap::cpu_client cpus(1);
  const std::string odd = std::string("quote\" back\\slash\nnewline\ttab\x01 ctrl ") + "\xff\xfe invalid \xc3( utf-8 \xe2\x82";
  std::string big(64 << 10, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 % 251);
  const std::vector<std::string> names = {"", odd, big, std::string(1, '\0')};
  std::vector<std::pair<std::string, std::uint32_t>> got;
  {
    devtap::receiver rx({.devices = all(cpus), .trace_file = trace.path});
    rx.attach<devtap::scope_event>([&](const devtap::scope_event& e) { got.emplace_back(std::string(e.text()), e.id); });
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (const std::string& name : names) {
        auto s = ctx.scope(name);
      }
    });
    rx.close();
  }
  REQUIRE(got.size() == names.size() * 2);
  for (std::size_t i = 0; i < got.size(); ++i) {
    INFO("record " << i << " (name of " << names[i / 2].size() << " bytes)");
    CHECK(got[i].first == names[i / 2]);
    CHECK(got[i].second == devtap::scope_id(names[i / 2]));
  }
  nlohmann::json json;
  REQUIRE_NOTHROW(json = parse_file(trace.path));  // the trace stays valid JSON, whatever the names hold
  int spans = 0;
  for (const auto& e : json.at("traceEvents"))
    if (e.value("ph", "") == "B" || e.value("ph", "") == "E") ++spans;
  CHECK(spans == 8);

  // At the ring's limit: the largest name that fits is delivered whole, one more padding step is refused.
  devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096});
  std::vector<std::size_t> sizes;
  rx.attach<devtap::scope_event>([&](const devtap::scope_event& e) { sizes.push_back(e.name.size()); });
  const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
  const auto fits = [&](std::size_t n) {
    const std::string name(n, 'n');
    const devtap::scope_event e{0, devtap::scope_phase::begin, {name.data(), name.size()}};
    return devtap::detail::record_bytes(devtap::detail::encoded_size(e)) <= devtap::detail::max_record_bytes(out.ring().capacity);
  };
  std::size_t largest = 0;
  while (fits(largest + 1)) ++largest;
  REQUIRE(largest > 0);
  REQUIRE(largest < 4096);
  std::vector<std::size_t> expected;
  for (const std::size_t n : {largest, largest + 1, std::size_t{64} << 10}) {
    INFO("name of " << n << " bytes, " << largest << " fit");
    if (n <= largest) {
      CHECK_NOTHROW(devtap::scope_guard(out, std::string(n, 'n')));
      expected.push_back(n);
      expected.push_back(n);
    } else {
      CHECK_THROWS_AS(devtap::scope_guard(out, std::string(n, 'n')), devtap::outfeed_error);
      CHECK_THROWS_AS(cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { auto s = ctx.scope(std::string(n, 'n')); }),
                      devtap::outfeed_error);
    }
  }
  rx.close();
  CHECK(sizes == expected);
}
