// A program that calls std::exit with a receiver open: the receiver is closed at exit, its
// consumers see every record and their end of stream. With the argument `logs`, the close at exit
// has something to log (a consumer threw) and the logger was first used after the exit handler was
// registered: the line must still reach the sink (the logger must not be destroyed before the
// handler runs; ASan saw a heap-use-after-free). Other arguments: see each function below. (A
// separate program: it exits.)
#include <devtap/backend/cpu.hpp>
#include <devtap/print.hpp>
#include <devtap/print_host.hpp>
#include <devtap/receiver/receiver.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {
constexpr long taps = 100000;
std::atomic<long> delivered{0};
std::atomic<bool> ended{false};

devtap::consumer<long> count(devtap::inbox<long> in) {
  while (auto value = co_await in.next()) delivered.fetch_add(1, std::memory_order_relaxed);
  ended = true;
}

std::string* sink_lines = nullptr;  // never destroyed, as the sink that appends to it

int logs_at_exit() {
  std::atexit([] {  // runs after the receiver's exit handler
    const bool ok = sink_lines->find("closed at exit") != std::string::npos;
    std::printf("the sink %s the close's line\n", ok ? "got" : "did not get");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  auto* cpus = new devtap::cpu_client(1);
  auto* rx = new devtap::receiver({.devices = {cpus->local_devices()[0]}, .name = "logs-at-exit"});
  sink_lines = new std::string;
  // Captures a string: the callable lives on the heap, where ASan sees a use after the logger's destruction.
  devtap::set_log_sink([end = std::string("\n")](devtap::log_level, std::string_view line) { sink_lines->append(line).append(end); });
  auto point = rx->attach<int>([](const int& v) { throw std::runtime_error("consumer failed on " + std::to_string(v)); });
  cpus->cpu_devices()[0]->run([point](devtap::cpu_context& ctx) { ctx.tap(point, 7); });
  std::exit(0);
}
// With the argument `deletes`: the close at exit gives up on cpu:0 (its consumer never returns) and
// hands a merged consumer what it holds on the exit handler's thread; that consumer deletes the
// receiver (timeline.md: it may). The handler read the receiver's name after close() threw: a
// heap-use-after-free under ASan. Now its line names the receiver all the same.
devtap::receiver* deleted_at_exit = nullptr;

int deletes_at_exit() {
  std::atexit([] {  // runs after the receiver's exit handler
    const bool ok = sink_lines->find("receiver 'deleted-at-exit' closed at exit") != std::string::npos &&
                    deleted_at_exit == nullptr;
    std::printf("the receiver %s deleted by its merged consumer; the sink %s the close's line\n",
                deleted_at_exit == nullptr ? "was" : "was not", ok ? "got" : "did not get");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  sink_lines = new std::string;
  devtap::set_log_sink([](devtap::log_level, std::string_view line) { sink_lines->append(line).append("\n"); });
  auto* cpus = new devtap::cpu_client(2);
  const auto devices = cpus->local_devices();
  deleted_at_exit = new devtap::receiver({.devices = {devices.begin(), devices.end()},
                                          .close_timeout = std::chrono::milliseconds(200),
                                          .name = "deleted-at-exit",
                                          .timestamps = true,
                                          .merge_lag = std::chrono::seconds(60)});
  static std::atomic<bool> stuck{false};
  auto never_returns = deleted_at_exit->attach<int>([](const int&) {
    stuck = true;
    for (;;) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  auto merged = deleted_at_exit->attach<int>([](const int&) { delete std::exchange(deleted_at_exit, nullptr); },
                                             devtap::merged);
  cpus->cpu_devices()[0]->run([&](devtap::cpu_context& ctx) { ctx.tap(never_returns, 0); });
  cpus->cpu_devices()[1]->run([&](devtap::cpu_context& ctx) { ctx.tap(merged, 1); });
  while (!stuck) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::exit(0);
}

// With the argument `client_first`: the receiver's device belongs to a function-local static
// client, made after the exit handler was registered, so destroyed before it runs. The client's
// destructor closes the receiver first (with a warning), instead of the handler draining freed
// devices later (ASan saw a heap-use-after-free).
devtap::cpu_client& static_client() {
  static devtap::cpu_client client(2);
  return client;
}

int client_destroyed_first() {
  std::atexit([] {  // registered first: runs last
    const bool warned = sink_lines->find("receiver 'client-first' still drains device 'cpu:1', whose client is being "
                                         "destroyed: closed first") != std::string::npos;
    const bool ok = delivered.load() == taps && ended.load() && warned;
    std::printf("delivered %ld of %ld, end of stream %s, the warning %s\n", delivered.load(), taps,
                ended.load() ? "seen" : "not seen", warned ? "logged" : "not logged");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  sink_lines = new std::string;
  devtap::set_log_sink([](devtap::log_level, std::string_view line) { sink_lines->append(line).append("\n"); });
  {  // the first receiver registers the exit handler
    auto* other = new devtap::cpu_client(1);
    devtap::receiver first({.devices = {other->local_devices()[0]}, .name = "first"});
  }
  devtap::cpu_device& dev = *static_client().cpu_devices()[1];
  auto* rx = new devtap::receiver({.devices = {&dev}, .name = "client-first"});
  auto point = rx->attach<long>(count);
  // Work queued on cpu:0 taps through cpu:1 once cpu:1's own work ran: the client's destructor
  // must keep every device until no queue holds work (it destroyed cpu:1 first, then ran this).
  (void)static_client().cpu_devices()[0]->submit([point, &dev] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    dev.run([point](devtap::cpu_context& ctx) { for (long i = 0; i < taps; ++i) ctx.tap(point, i); });
  });
  return 0;  // no close(): the static client goes first
}

// With the argument `prints`: the close at exit drains a device's prints, and the print registry was
// first used after the exit handler was registered. The registry must still be there when the
// handler formats the lines (ASan saw a heap-use-after-free of a destroyed function-local static).
constexpr int print_lines = 20000;
std::atomic<int> lines{0};

int prints_at_exit() {
  std::atexit([] {  // registered first: runs last
    const bool ok = lines.load() == print_lines;
    std::printf("%d of %d lines printed\n", lines.load(), print_lines);
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  auto* cpus = new devtap::cpu_client(1);
  auto* rx = new devtap::receiver({.devices = {cpus->local_devices()[0]}, .budget_bytes = 1 << 16, .name = "prints-at-exit"});
  auto channel = devtap::attach_print(*rx, {.sink = [](std::string_view, const devtap::device&) {
                                               lines.fetch_add(1);
                                               std::this_thread::sleep_for(std::chrono::microseconds(20));  // still printing at exit
                                             }});
  (void)cpus->cpu_devices()[0]->submit([channel](devtap::cpu_context& ctx) {
    for (int i = 0; i < print_lines; ++i) devtap::print<"line {} of {}">(devtap::printer(ctx, channel), i, print_lines);
  });
  while (lines.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // formats registered
  std::exit(0);
}

// Registered before anything else, so it runs last: the exit code says whether the log sink got
// every expected line.
std::vector<std::string>* expected_lines = nullptr;  // never destroyed, as sink_lines
void expect_lines_at_exit(std::vector<std::string> parts) {
  expected_lines = new std::vector<std::string>(std::move(parts));
  std::atexit([] {
    const bool ok = std::all_of(expected_lines->begin(), expected_lines->end(),
                                [](const std::string& part) { return sink_lines->find(part) != std::string::npos; });
    std::printf("the sink %s the expected line(s)\n", ok ? "got" : "did not get");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  sink_lines = new std::string;
  devtap::set_log_sink([](devtap::log_level, std::string_view line) { sink_lines->append(line).append("\n"); });
}

// With the argument `exits_from_consumer`: std::exit from a consumer of an open receiver. The exit
// handler cannot close it (close() would wait for this very thread): it says so, and goes on.
int exits_from_consumer() {
  expect_lines_at_exit({"receiver 'exits' not closed at exit: std::exit was called from a consumer of this receiver"});
  auto* cpus = new devtap::cpu_client(1);
  auto* rx = new devtap::receiver({.devices = {cpus->local_devices()[0]}, .name = "exits"});
  auto point = rx->attach<int>([](const int& v) {
    if (v == 100) std::exit(0);
  });
  (void)cpus->cpu_devices()[0]->submit([point](devtap::cpu_context& ctx) { for (int i = 0; i < 1000; ++i) ctx.tap(point, i); });
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// With the argument `exits_from_consumer_full`: the same while the device's work waits for space in
// that consumer's ring, with a function-local static client, destroyed after the exit handler. Its
// destructor waited for that work, which waited for this thread: the exit hung (a review found it).
int exits_from_consumer_full() {
  expect_lines_at_exit({"receiver 'exits' not closed at exit",
                        "cpu_client destroyed from a consumer of a receiver on its devices: its 1 device(s) are kept"});
  static devtap::cpu_client cpus(1);  // destroyed at exit, after the receivers' exit handler
  auto* rx = new devtap::receiver({.devices = {cpus.local_devices()[0]}, .budget_bytes = 64 << 10, .name = "exits"});
  auto point = rx->attach<int>([](const int& v) {
    if (v != 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the work fills the ring and waits
    std::exit(0);
  });
  (void)cpus.cpu_devices()[0]->submit([point](devtap::cpu_context& ctx) { for (int i = 0; i < 200000; ++i) ctx.tap(point, i); });
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "exits_from_consumer_full") == 0) return exits_from_consumer_full();
  if (argc > 1 && std::strcmp(argv[1], "prints") == 0) return prints_at_exit();
  if (argc > 1 && std::strcmp(argv[1], "exits_from_consumer") == 0) return exits_from_consumer();
  if (argc > 1 && std::strcmp(argv[1], "client_first") == 0) return client_destroyed_first();
  if (argc > 1 && std::strcmp(argv[1], "logs") == 0) return logs_at_exit();
  if (argc > 1 && std::strcmp(argv[1], "deletes") == 0) return deletes_at_exit();
  // Registered before the receiver's exit handler, so it runs after it (handlers run in reverse).
  std::atexit([] {
    const bool ok = delivered.load() == taps && ended.load();
    std::printf("delivered %ld of %ld, end of stream %s\n", delivered.load(), taps, ended.load() ? "seen" : "not seen");
    std::fflush(stdout);
    std::_Exit(ok ? 0 : 1);
  });
  auto* cpus = new devtap::cpu_client(1);  // never destroyed: std::exit destroys no local either
  auto* rx = new devtap::receiver({.devices = {cpus->local_devices()[0]}, .name = "at-exit"});
  auto point = rx->attach<long>(count);
  (void)cpus->cpu_devices()[0]->submit([point](devtap::cpu_context& ctx) {
    for (long i = 0; i < taps; ++i) ctx.tap(point, i);
  });
  std::exit(0);  // no close(), no flush(): the exit handler must drain
}
