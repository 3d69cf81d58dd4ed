// The trace file (receiver_options::trace_file): well-formed Chrome Trace Event JSON whatever the
// records hold, one named track per device, every record and marker in it, and its failures reported.
#include <devtap/backend/cpu.hpp>
#include <devtap/receiver/receiver.hpp>

#include "../temp_file.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {
std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

using devtap_test::temp_file;

nlohmann::json read_trace(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  nlohmann::json doc = nlohmann::json::parse(in);  // throws (fails the test) on anything but JSON
  REQUIRE(doc.contains("traceEvents"));
  return doc["traceEvents"];
}

std::vector<nlohmann::json> events_of(const nlohmann::json& events, const std::string& category) {
  std::vector<nlohmann::json> out;
  for (const auto& e : events)
    if (e.value("cat", "") == category) out.push_back(e);
  return out;
}

struct sample {
  int step;
  double value;
  std::span<const char> label;
};
struct named_sample {
  int step;
  float loss;
};
}  // namespace

template <>
struct devtap::field_names<named_sample> {
  static constexpr std::array names{"step", "loss"};
};

TEST_CASE("the trace holds one named track per device and every tap with its fields, in time order") {
  const temp_file file("trace-basic");
  const std::string& path = file.path;
  devtap::cpu_client cpus(4);
  {
    devtap::receiver rx({.devices = all(cpus), .name = "run \"one\"", .timestamps = true, .trace_file = path});
    auto point = rx.attach<sample>([](const sample&) {}, "sample");
    std::vector<std::future<void>> work;
    for (auto* dev : cpus.cpu_devices())
      work.push_back(dev->submit([point](devtap::cpu_context& ctx) {
        for (int i = 0; i < 500; ++i) ctx.tap(point, sample{i, i * 0.5, std::span<const char>("ab\"\n\xff", 5)});
      }));
    for (auto& w : work) w.get();
    rx.close();
  }
  const nlohmann::json events = read_trace(path);
  std::map<int, std::string> tracks;
  std::map<int, double> last;
  std::map<int, int> taps;
  for (const auto& e : events) {
    REQUIRE(e.contains("ph"));
    REQUIRE(e.contains("tid"));
    if (e["ph"] == "M") {
      if (e["name"] == "thread_name") tracks[e["tid"].get<int>()] = e["args"]["name"].get<std::string>();
      if (e["name"] == "process_name") CHECK(e["args"]["name"] == "run \"one\"");
      continue;
    }
    const int tid = e["tid"].get<int>();
    CHECK(e["ts"].get<double>() >= last[tid]);  // one producer per device: never back in time
    last[tid] = e["ts"].get<double>();
    REQUIRE(e["cat"] == "tap");
    CHECK(e["name"] == "sample");
    const int step = e["args"]["0"].get<int>();
    CHECK(step == taps[tid]);
    CHECK(e["args"]["1"].get<double>() == step * 0.5);
    CHECK(e["args"]["2"].get<std::string>() == "ab\"\n\xef\xbf\xbd");  // invalid UTF-8 replaced, the rest escaped and kept
    CHECK(e["args"]["sequence"].get<int>() == step);
    ++taps[tid];
  }
  CHECK(tracks == std::map<int, std::string>{{1, "cpu:0"}, {2, "cpu:1"}, {3, "cpu:2"}, {4, "cpu:3"}});
  for (int tid = 1; tid <= 4; ++tid) CHECK(taps[tid] == 500);
}

TEST_CASE("devtap::field_names are the keys of a tap's arguments in the trace, live and beside the sequence") {
  const temp_file file("trace-named");
  devtap::cpu_client cpus(2);
  {
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .trace_file = file.path});
    auto point = rx.attach<named_sample>([](named_sample) {}, "step stats");
    for (auto* dev : cpus.cpu_devices())
      dev->run([point](devtap::cpu_context& ctx) {
        for (int i = 0; i < 100; ++i) ctx.tap(point, named_sample{i, 0.25f * static_cast<float>(i)});
      });
    rx.close();
  }
  int taps = 0;
  for (const auto& e : read_trace(file.path)) {
    if (e["ph"] != "i") continue;
    REQUIRE(e["name"] == "step stats");
    const auto& a = e["args"];
    INFO(a.dump());
    REQUIRE(a.size() == 3);
    const int step = a["step"].get<int>();
    CHECK(a["loss"].get<double>() == 0.25 * step);
    CHECK(a["sequence"].get<int>() == step);
    ++taps;
  }
  CHECK(taps == 200);
}

TEST_CASE("calls are events on their device's track at the time they were asked, numbered with its taps") {
  const temp_file file("trace-calls");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .trace_file = file.path});
    auto point = rx.attach<named_sample>([](named_sample) {}, "step stats");
    auto ask = rx.serve<named_sample, int>([](const named_sample& q) { return q.step; }, "ask");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 50; ++i) {
        ctx.tap(point, named_sample{i, 0.5f});
        CHECK(ctx.call(ask, named_sample{i, 1.5f}) == i);
      }
    });
    rx.close();
  }
  std::vector<nlohmann::json> instants;
  for (const auto& e : read_trace(file.path))
    if (e["ph"] == "i") instants.push_back(e);
  REQUIRE(instants.size() == 100);
  double last = 0;
  for (std::size_t k = 0; k < instants.size(); ++k) {
    const auto& e = instants[k];
    INFO(e.dump());
    const bool is_call = k % 2 == 1;  // tap, call, tap, call: in the order they were made
    CHECK(e["cat"] == (is_call ? "call" : "tap"));
    CHECK(e["name"] == (is_call ? "ask" : "step stats"));
    CHECK(e["args"]["sequence"].get<std::size_t>() == k);
    CHECK(e["args"]["step"].get<std::size_t>() == k / 2);
    CHECK(e["args"]["loss"].get<double>() == (is_call ? 1.5 : 0.5));
    CHECK(e["ts"].get<double>() >= last);
    last = e["ts"].get<double>();
  }
}

TEST_CASE("the trace marks drops, consumer failures and unknown ids on the device's track") {
  const temp_file file("trace-markers");
  const std::string& path = file.path;
  devtap::cpu_client cpus(1);
  std::uint64_t dropped = 0;
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 4096, .overflow = devtap::overflow_policy::drop,
                         .trace_file = path});
    std::atomic<bool> slow{true};
    auto point = rx.attach<int>([&](const int& v) {
      if (v == 3) throw std::runtime_error("bad \"three\"");
      while (slow.load() && v < 5) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    });
    const devtap::tap_point<int> stranger{point.id + 100, point.fingerprint, point.receiver};
    cpus.cpu_devices()[0]
        ->submit([&](devtap::cpu_context& ctx) {
          ctx.tap(stranger, 1);  // first: the ring has room (a later one could be dropped)
          for (int i = 0; i < 20000; ++i) ctx.tap(point, i);  // most dropped while the consumer sleeps
          slow = false;
        })
        .get();
    CHECK_THROWS_AS(rx.close(), devtap::tap_error);
    dropped = rx.stats().total().dropped_records;
  }
  REQUIRE(dropped > 0);
  const nlohmann::json events = read_trace(path);
  std::uint64_t marked = 0;
  bool threw = false, unknown = false;
  for (const auto& e : events_of(events, "marker")) {
    CHECK(e["tid"] == 1);
    if (e["name"] == "dropped") marked += e["args"]["count"].get<std::uint64_t>();
    if (e["name"] == "error" && e["args"]["text"].get<std::string>().find("bad \"three\"") != std::string::npos) threw = true;
    if (e["name"] == "error" && e["args"]["text"].get<std::string>().find("unknown consumer id") != std::string::npos)
      unknown = true;
  }
  CHECK(marked == dropped);
  CHECK(threw);
  CHECK(unknown);
  CHECK(events_of(events, "unknown").size() == 1);
}

TEST_CASE("a marker about a record is at that record's time: a track's times never go back") {
  // Before, a consumer failure, a mismatch or an unknown id was marked at the reader's clock, after
  // the device's time of the records read next (the reader runs behind the device).
  const temp_file file("trace-marker-times");
  devtap::cpu_client cpus(1);
  std::uint32_t stranger_id = 0;
  {
    devtap::receiver rx({.devices = all(cpus), .timestamps = true, .trace_file = file.path});
    auto point = rx.attach<int>([&](const int& v) {
      if (v % 1000 == 7) throw std::runtime_error("seven");
    });
    const devtap::tap_point<int> stranger{point.id + 100, point.fingerprint, point.receiver};
    stranger_id = stranger.id;
    const devtap::tap_point<float> wrong{point.id, devtap::type_fingerprint_v<float>, point.receiver};
    cpus.cpu_devices()[0]
        ->submit([&](devtap::cpu_context& ctx) {
          for (int i = 0; i < 20000; ++i) {
            ctx.tap(point, i);
            if (i == 5000) ctx.tap(stranger, i);
            if (i == 6000) ctx.tap(wrong, 1.0f);
          }
        })
        .get();
    CHECK_THROWS_AS(rx.close(), devtap::tap_error);
  }
  const nlohmann::json events = read_trace(file.path);
  double last = -1;
  std::size_t markers = 0, backwards = 0;
  for (const auto& e : events) {
    if (e.value("ph", "") == "M") continue;  // metadata: no time
    const double ts = e["ts"].get<double>();
    if (ts < last) ++backwards;
    last = ts;
    if (e.value("cat", "") == "marker" && e["name"] == "error") ++markers;
  }
  CHECK(markers == 16 + 2);  // the throws (the first 16 of each consumer are kept and marked), the stranger, the mismatch
  CHECK(backwards == 0);
  const auto unknown = events_of(events, "unknown");
  REQUIRE(unknown.size() == 1);
  CHECK(unknown[0]["name"] == "unknown consumer id " + std::to_string(stranger_id));
}

namespace {
/** This process's stderr sent to `path` (as a shell's `2>` does) while alive; devtap's log pinned to
 *  warnings (debug lines would go into the file the test reads). */
class stderr_to_file {
public:
  explicit stderr_to_file(const std::string& path) : level_(devtap::get_log_level()) {
    devtap::set_log_level(devtap::log_level::warn);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ok_ = saved_ >= 0 && fd >= 0 && ::dup2(fd, STDERR_FILENO) == STDERR_FILENO;
    if (fd >= 0) ::close(fd);
  }
  ~stderr_to_file() {
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    devtap::set_log_level(level_);
  }
  stderr_to_file(const stderr_to_file&) = delete;
  stderr_to_file& operator=(const stderr_to_file&) = delete;
  bool ok() const { return ok_; }
  static bool write(std::string_view text) { return ::write(STDERR_FILENO, text.data(), text.size()) == static_cast<ssize_t>(text.size()); }

private:
  int saved_ = ::dup(STDERR_FILENO);
  devtap::log_level level_;
  bool ok_ = false;
};

/** What opening a receiver with `options` and tapping 0..99 into "x" on its one device throws ("" if nothing). */
std::string run_receiver(devtap::cpu_client& cpus, devtap::receiver_options options) {
  try {
    options.devices = all(cpus);
    devtap::receiver rx(options);
    auto point = rx.attach<int>([](const int&) {}, "x");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 100; ++i) ctx.tap(point, i);
    });
    rx.close();
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}
}  // namespace

TEST_CASE("a trace file that is this process's standard error is written at its offset, not emptied") {
  // Before, a descriptor of its own started at 0 and emptied the file the program's stderr was writing.
  const temp_file file("trace-stderr");
  devtap::cpu_client cpus(1);
  std::string first, second_writer, recording, again;
  bool wrote = false;
  {
    const stderr_to_file redirect(file.path);
    REQUIRE(redirect.ok());
    wrote = stderr_to_file::write("before\n");
    first = run_receiver(cpus, {.trace_file = file.path});
    // One writer at a time, by either name: stdio's file, not a file of its own.
    second_writer = run_receiver(cpus, {.trace_file = file.path, .record_file = "/dev/stderr"});
    // A recording is read from its first byte: this file holds "before" and a trace already.
    recording = run_receiver(cpus, {.record_file = "/dev/stderr"});
    wrote = stderr_to_file::write("after\n") && wrote;
  }
  INFO(first << " / " << second_writer << " / " << recording);
  REQUIRE(wrote);
  CHECK(first.empty());
  CHECK_THAT(second_writer, Catch::Contains("is being written by another writer"));
  CHECK_THAT(recording, Catch::Contains("is the file this process's stderr writes to, which holds") &&
                            Catch::Contains("a recording must begin at the file's first byte"));
  const std::string text = devtap_test::read_all(file.path);
  REQUIRE(text.size() > 13);
  CHECK(text.substr(0, 7) == "before\n");
  CHECK(text.substr(text.size() - 6) == "after\n");
  const nlohmann::json doc = nlohmann::json::parse(text.substr(7, text.size() - 13));  // throws on anything but JSON
  CHECK(events_of(doc["traceEvents"], "tap").size() == 100);
  // Let go at close(): a later receiver writes it again (here as /dev/stderr, through the descriptor).
  {
    const stderr_to_file redirect(file.path);
    again = run_receiver(cpus, {.trace_file = "/dev/stderr"});
  }
  CHECK(again.empty());
  CHECK(events_of(read_trace(file.path), "tap").size() == 100);
}

TEST_CASE("a trace into stderr's pipe leaves that pipe's flags as the program had them") {
  // Before, the sink wrote through stderr's own open file and left it non-blocking after close(),
  // for the program and every other process on that pipe.
  int ends[2];
  REQUIRE(::pipe(ends) == 0);
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  const devtap::log_level level = devtap::get_log_level();
  devtap::set_log_level(devtap::log_level::warn);
  REQUIRE(::dup2(ends[1], STDERR_FILENO) == STDERR_FILENO);
  ::close(ends[1]);
  std::string drained;
  std::thread drain([&] {
    char buffer[4096];
    for (ssize_t n; (n = ::read(ends[0], buffer, sizeof buffer)) > 0;) drained.append(buffer, static_cast<std::size_t>(n));
  });
  devtap::cpu_client cpus(1);
  const std::string error = run_receiver(cpus, {.trace_file = "/dev/stderr"});
  const int flags = ::fcntl(STDERR_FILENO, F_GETFL);
  ::dup2(saved, STDERR_FILENO);  // the pipe's last writer gone: the drain ends
  ::close(saved);
  drain.join();
  ::close(ends[0]);
  devtap::set_log_level(level);
  CHECK(error.empty());
  CHECK((flags & O_NONBLOCK) == 0);
  CHECK(events_of(nlohmann::json::parse(drained)["traceEvents"], "tap").size() == 100);
}

TEST_CASE("with stderr closed, a trace file does not take its slot (the program's output would reach it)") {
  // Before, open() returned descriptor 2, which the sink then took for stderr's own file: the
  // existing file was not emptied and the trace ended in its old bytes.
  const temp_file file("trace-stderr-closed");
  devtap_test::write_all(file.path, std::string(200000, 'x'));
  const int saved = ::dup(STDERR_FILENO);
  REQUIRE(saved >= 0);
  const devtap::log_level level = devtap::get_log_level();
  devtap::set_log_level(devtap::log_level::off);
  ::close(STDERR_FILENO);
  devtap::cpu_client cpus(1);
  const std::string error = run_receiver(cpus, {.trace_file = file.path});
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  devtap::set_log_level(level);
  CHECK(error.empty());
  CHECK(events_of(read_trace(file.path), "tap").size() == 100);  // emptied first: JSON only
}

TEST_CASE("an open that fails says what the system's words mean for a FIFO, a closed or read-only stdout or stderr") {
  // Before, only the system's text: "No such device or address", "No such file or directory", "Invalid argument".
  devtap::cpu_client cpus(1);
  const temp_file fifo("trace-fifo-unread");
  REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .trace_file = fifo.path}),
                    Catch::Contains(std::strerror(ENXIO)) && Catch::Contains("no process has open for reading: start its reader first"));
  const temp_file other("trace-other");
  devtap_test::write_all(other.path, "x");
  for (const int standard : {STDOUT_FILENO, STDERR_FILENO}) {
    const std::string path = standard == STDOUT_FILENO ? "/dev/stdout" : "/dev/stderr";
    const std::string stream = standard == STDOUT_FILENO ? "stdout" : "stderr";
    std::fflush(nullptr);
    const int saved = ::dup(standard);
    REQUIRE(saved >= 0);
    const devtap::log_level level = devtap::get_log_level();
    devtap::set_log_level(devtap::log_level::off);  // (nothing may reach a closed or swapped stderr)
    std::string closed, read_only;
    ::close(standard);
    try {
      devtap::receiver rx({.devices = all(cpus), .record_file = path});
    } catch (const std::invalid_argument& e) {
      closed = e.what();
    }
    const int reading = ::open(other.path.c_str(), O_RDONLY);  // takes the closed slot
    try {
      devtap::receiver rx({.devices = all(cpus), .trace_file = path});
    } catch (const std::invalid_argument& e) {
      read_only = e.what();
    }
    ::dup2(saved, standard);
    ::close(saved);
    if (reading != standard) ::close(reading);
    devtap::set_log_level(level);
    CHECK(reading == standard);
    CHECK_THAT(closed, Catch::Contains("cannot open '" + path + "' for writing") &&
                           Catch::Contains("(this process's " + stream + " is closed)"));
    CHECK_THAT(read_only, Catch::Contains("(this process's " + stream + " is open for reading only)"));
  }
  CHECK(devtap_test::read_all(other.path) == "x");
}

TEST_CASE("a trace written into a pipe whose reader left is an error reported by close(), not a SIGPIPE") {
  // Before, the write raised SIGPIPE, which ends a program that has not set it aside.
  const temp_file fifo("trace-fifo-gone");
  REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
  const int reader = ::open(fifo.path.c_str(), O_RDONLY | O_NONBLOCK);
  REQUIRE(reader >= 0);
  devtap::cpu_client cpus(1);
  std::string error;
  try {
    devtap::receiver rx({.devices = all(cpus), .trace_file = fifo.path});
    ::close(reader);  // the viewer went away
    auto point = rx.attach<int>([](const int&) {}, "x");
    cpus.cpu_devices()[0]->run([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 20000; ++i) ctx.tap(point, i);
    });
    rx.close();
  } catch (const devtap::tap_error& e) {
    error = e.what();
  }
  CHECK_THAT(error, Catch::Contains(std::strerror(EPIPE)));
}

TEST_CASE("a FIFO or pipe takes one sink of this process at a time: a second is refused, not interleaved") {
  // Before, trace_file and record_file naming one FIFO were both accepted, and their bytes
  // interleaved in the pipe: neither could be read.
  const temp_file fifo("trace-fifo-twice");
  REQUIRE(::mkfifo(fifo.path.c_str(), 0600) == 0);
  const int reader = ::open(fifo.path.c_str(), O_RDONLY | O_NONBLOCK);  // (a writer needs a reader to open)
  REQUIRE(reader >= 0);
  // Read once each writer is done: the pipe must hold a whole trace (a user over its pipe quota
  // gets one-page pipes; 1 MiB is the unprivileged maximum).
  CHECK(::fcntl(reader, F_SETPIPE_SZ, 1 << 20) >= 0);
  devtap::cpu_client cpus(1);
  const auto refused = Catch::Contains("'" + fifo.path + "' is a pipe, FIFO or socket that another sink of this process writes");
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .trace_file = fifo.path, .record_file = fifo.path}),
                    Catch::Contains("record_file") && refused);
  devtap::cpu_client others(1);  // for a receiver beside `first`
  {
    devtap::receiver first({.devices = all(cpus), .trace_file = fifo.path});
    CHECK_THROWS_WITH(devtap::receiver({.devices = all(others), .record_file = fifo.path}), refused);
    first.close();
    // Let go at close() (and by the refused ones), not only when `first` goes: it takes a sink again.
    devtap::receiver second({.devices = all(others), .record_file = fifo.path});
    second.close();
  }
  const auto drain = [&] {
    std::string drained;
    char buffer[4096];
    for (ssize_t n; (n = ::read(reader, buffer, sizeof buffer)) > 0;) drained.append(buffer, static_cast<std::size_t>(n));
    return drained;
  };
  const std::string firsts = drain();  // the first one's trace, then the second's recording
  CHECK(firsts.find("\"traceEvents\"") != std::string::npos);
  const std::string error = run_receiver(cpus, {.trace_file = fifo.path});
  const std::string drained = drain();
  ::close(reader);
  CHECK(error.empty());
  CHECK(events_of(nlohmann::json::parse(drained)["traceEvents"], "tap").size() == 100);
}

TEST_CASE("a trace or record path with a NUL byte is refused, not cut short") {
  const temp_file file("trace-nul");
  devtap::cpu_client cpus(1);
  using namespace std::string_literals;
  CHECK_THROWS_WITH(devtap::receiver({.devices = all(cpus), .trace_file = file.path + "\0.bak"s}),
                    Catch::Contains("holds a NUL byte (at " + std::to_string(file.path.size()) + ")"));
  CHECK_THROWS_AS(devtap::receiver({.devices = all(cpus), .record_file = file.path + "\0.bak"s}), std::invalid_argument);
  CHECK_FALSE(std::filesystem::exists(file.path));
}

TEST_CASE("without timestamps the trace places records at their arrival, with the stream's count") {
  const temp_file file("trace-unstamped");
  const std::string& path = file.path;
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .trace_file = path});
    auto point = rx.attach<float>([](const float&) {}, "x");
    cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
      for (int i = 0; i < 100; ++i) ctx.tap(point, i * 1.5f);
    }).get();
    rx.close();
  }
  const auto taps = events_of(read_trace(path), "tap");
  REQUIRE(taps.size() == 100);
  for (std::size_t i = 0; i < taps.size(); ++i) {
    CHECK(taps[i]["args"]["value"].get<float>() == static_cast<float>(i) * 1.5f);
    CHECK(taps[i]["args"]["sequence"].get<std::size_t>() == i);
    if (i > 0) CHECK(taps[i]["ts"].get<double>() >= taps[i - 1]["ts"].get<double>());
  }
}

TEST_CASE("a trace file that cannot be opened is refused at construction, and leaves the devices free") {
  devtap::cpu_client cpus(1);
  try {
    devtap::receiver rx({.devices = all(cpus), .trace_file = "/nonexistent-devtap-dir/t.json"});
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("/nonexistent-devtap-dir/t.json") != std::string::npos);
    CHECK(std::string(e.what()).find("trace_file") != std::string::npos);
  }
  devtap::receiver again({.devices = all(cpus)});  // nothing stayed attached
  again.close();
}

TEST_CASE("a trace file that cannot be written makes close() report it") {
  devtap::cpu_client cpus(1);
  devtap::receiver rx({.devices = all(cpus), .trace_file = "/dev/full"});
  auto point = rx.attach<int>([](const int&) {});
  cpus.cpu_devices()[0]->submit([&](devtap::cpu_context& ctx) {
    for (int i = 0; i < 20000; ++i) ctx.tap(point, i);  // more than one buffer's worth of events
  }).get();
  try {
    rx.close();
    FAIL("close() did not report the write error");
  } catch (const devtap::tap_error& e) {
    CHECK(std::string(e.what()).find("/dev/full") != std::string::npos);
  }
}

TEST_CASE("printed lines are log events on their device's track, at their tap's time") {
  // (The printer needs {fmt}: examples/cpu_timeline and tests/print cover its lines; here the
  // trace's side: a line handed over by the printer's hook lands on the right track.)
  const temp_file file("trace-lines");
  const std::string& path = file.path;
  devtap::cpu_client cpus(2);
  {
    devtap::receiver rx({.devices = all(cpus), .trace_file = path});
    auto sink = devtap::detail::receiver_access::line_sink(rx);
    REQUIRE(sink);
    sink(*cpus.cpu_devices()[1], devtap::detail::stamp_now_ns(), "hello\tworld");
    rx.close();
  }
  const auto lines = events_of(read_trace(path), "print");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0]["tid"] == 2);
  CHECK(lines[0]["args"]["line"] == "hello\tworld");
}
