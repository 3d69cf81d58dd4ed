// The fmt-free logger: placeholders, levels, sinks.
#include <devtap/log.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

TEST_CASE("format_message fills {} in order and keeps escaped braces") {
  using devtap::detail::format_message;
  CHECK(format_message("a {} b {} c", 1, "x") == "a 1 b x c");
  CHECK(format_message("{{}} {}", 2.5) == "{} 2.5");
  CHECK(format_message("missing {} {}", 1) == "missing 1 ");
  CHECK(format_message("bool {} char {}", true, 'c') == "bool true char c");
}

TEST_CASE("levels filter and sinks receive whole lines") {
  std::vector<std::string> lines;
  devtap::set_log_sink([&](devtap::log_level, std::string_view m) { lines.emplace_back(m); });
  const auto before = devtap::get_log_level();
  devtap::set_log_level(devtap::log_level::info);
  devtap::log(devtap::log_level::debug, "hidden {}", 1);
  devtap::log(devtap::log_level::error, "shown {}", 2);
  devtap::set_log_level(devtap::log_level::off);
  devtap::log(devtap::log_level::error, "hidden too");
  devtap::set_log_level(before);
  devtap::set_log_sink({});
  CHECK(lines == std::vector<std::string>{"shown 2"});
  CHECK(devtap::detail::parse_log_level("debug") == devtap::log_level::debug);
  CHECK(devtap::detail::parse_log_level("bogus") == devtap::log_level::warn);
}

namespace {

/** Collects what is written to file descriptor 2 while alive. */
class stderr_capture {
public:
  stderr_capture() : file_(std::tmpfile()), saved_(dup(2)) {
    std::fflush(stderr);
    dup2(fileno(file_), 2);
  }
  ~stderr_capture() { restore(); }
  /** Stops capturing; returns everything written. */
  std::string text() {
    restore();
    std::string out;
    std::rewind(file_);
    for (int c; (c = std::fgetc(file_)) != EOF;) out.push_back(static_cast<char>(c));
    return out;
  }

private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    saved_ = -1;
  }
  std::FILE* file_;
  int saved_;
};

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("a sink that throws never ends the process; its lines go to stderr, with one note") {
  const auto before = devtap::get_log_level();
  devtap::set_log_level(devtap::log_level::info);
  std::atomic<int> calls{0};
  stderr_capture err;
  devtap::set_log_sink([&](devtap::log_level, std::string_view) {
    ++calls;
    throw std::runtime_error("sink full");
  });
  // A reader thread logs through the same logger: an escaping exception there would be std::terminate.
  std::thread([] { devtap::log(devtap::log_level::error, "from a thread {}", 1); }).join();
  CHECK_NOTHROW(devtap::log(devtap::log_level::warn, "from the test {}", 2));
  devtap::set_log_sink([&](devtap::log_level, std::string_view) {
    ++calls;
    throw 42;  // not even a std::exception
  });
  std::thread([] { devtap::log(devtap::log_level::info, "from a thread {}", 3); }).join();
  devtap::set_log_sink({});
  devtap::set_log_level(before);
  const std::string text = err.text();
  CHECK(calls == 3);
  CHECK(text ==
        "[devtap error] the log sink threw (sink full); the lines it fails to take go to stderr\n"
        "[devtap error] from a thread 1\n"
        "[devtap warn] from the test 2\n"
        "[devtap error] the log sink threw (unknown exception); the lines it fails to take go to stderr\n"
        "[devtap info] from a thread 3\n");
  CHECK(occurrences(text, "the log sink threw (sink full)") == 1);  // once per sink
}

TEST_CASE("a sink that logs, or sets the sink, does not wait for itself: its own line goes to stderr") {
  const auto before = devtap::get_log_level();
  devtap::set_log_level(devtap::log_level::info);
  std::vector<std::string> lines;
  std::string refusal;
  stderr_capture err;
  devtap::set_log_sink([&](devtap::log_level, std::string_view m) {
    lines.emplace_back(m);
    devtap::log(devtap::log_level::warn, "the sink saw {} bytes", m.size());  // the logger's mutex is held here
    try {
      devtap::set_log_sink({});
    } catch (const std::logic_error& e) {
      refusal = e.what();
    }
  });
  std::thread([] { devtap::log(devtap::log_level::error, "from a thread {}", 1); }).join();
  devtap::log(devtap::log_level::info, "from the test");
  devtap::set_log_sink({});  // outside the sink: allowed
  devtap::set_log_level(before);
  CHECK(lines == std::vector<std::string>{"from a thread 1", "from the test"});
  CHECK(err.text() == "[devtap warn] the sink saw 15 bytes\n[devtap warn] the sink saw 13 bytes\n");
  CHECK(refusal == "devtap: set_log_sink called from inside the log sink (it would wait for itself)");
}

TEST_CASE("DEVTAP_LOG values: case and surrounding white space do not matter; others are reported") {
  using devtap::detail::log_env_problem;
  using devtap::detail::parse_log_level;
  CHECK(parse_log_level(nullptr) == devtap::log_level::warn);
  CHECK(parse_log_level("") == devtap::log_level::warn);
  CHECK(parse_log_level(" Info\r\n") == devtap::log_level::info);
  CHECK(parse_log_level("DEBUG") == devtap::log_level::debug);
  CHECK(parse_log_level("warning") == devtap::log_level::warn);
  CHECK(parse_log_level("none") == devtap::log_level::off);
  for (const char* fine : {static_cast<const char*>(nullptr), "", "  ", "\t\r\n", "debug", "INFO", " warn ", "Error", "off"})
    CHECK(log_env_problem(fine).empty());  // blank counts as unset, as for every variable
  CHECK(parse_log_level("  ") == devtap::log_level::warn);
  CHECK(log_env_problem("loud") ==
        "DEVTAP_LOG='loud' is not a log level (expected debug, info, warn, error or off); using warn");
  CHECK(log_env_problem("3") ==
        "DEVTAP_LOG='3' is not a log level (expected debug, info, warn, error or off); using warn");
  CHECK(log_env_problem("warn\x01") ==
        "DEVTAP_LOG='warn\\x01' is not a log level (expected debug, info, warn, error or off); using warn");
  const std::string long_value(300, 'x');  // cut, with its length
  CHECK(log_env_problem(long_value.c_str()) == "DEVTAP_LOG='" + std::string(200, 'x') +
                                                   "... (300 bytes)' is not a log level (expected debug, info, warn, "
                                                   "error or off); using warn");
}

TEST_CASE("a log_level out of the enum's range is never logged, and its name is '?', not read past the names") {
  std::string seen;
  devtap::set_log_sink([&](devtap::log_level, std::string_view line) { seen = line; });
  devtap::log(static_cast<devtap::log_level>(9), "odd level {}", 9);
  devtap::log(static_cast<devtap::log_level>(-1), "odd level {}", -1);
  devtap::set_log_sink({});
  CHECK(seen.empty());
  CHECK(devtap::detail::level_name(static_cast<devtap::log_level>(9)) == "?");
  CHECK(devtap::detail::level_name(static_cast<devtap::log_level>(-1)) == "?");
  CHECK(devtap::detail::level_name(devtap::log_level::error) == "error");
}

namespace {
// Logs as it is destroyed: what a receiver a sink owns does ("destroyed without close()").
struct logs_when_destroyed {
  ~logs_when_destroyed() { devtap::log(devtap::log_level::warn, "destroyed with the sink {}", 1); }
};
struct thrown_that_logs : std::runtime_error {
  thrown_that_logs() : std::runtime_error("logs when destroyed") {}
  thrown_that_logs(const thrown_that_logs&) = default;
  ~thrown_that_logs() override { devtap::log(devtap::log_level::warn, "a thrown object logged {}", 2); }
};
}  // namespace

TEST_CASE("a sink replaced while what it owns logs as it goes does not wait for itself") {
  stderr_capture err;
  std::vector<std::string> second;
  {
    auto owned = std::make_shared<logs_when_destroyed>();
    devtap::set_log_sink([owned](devtap::log_level, std::string_view) {});
  }
  // The old sink holds the last reference: it logs from its destructor, which set_log_sink runs
  // after releasing the logger's lock (it hung on that lock before).
  devtap::set_log_sink([&](devtap::log_level, std::string_view m) { second.emplace_back(m); });
  devtap::log(devtap::log_level::warn, "after");
  devtap::set_log_sink({});
  CHECK(second == std::vector<std::string>{"destroyed with the sink 1", "after"});
  CHECK(err.text().empty());
}

TEST_CASE("an exception a sink throws may log as it is destroyed: its line goes to stderr") {
  stderr_capture err;
  devtap::set_log_sink([](devtap::log_level, std::string_view) { throw thrown_that_logs(); });
  devtap::log(devtap::log_level::error, "first");
  devtap::set_log_sink({});
  const std::string text = err.text();
  CHECK(occurrences(text, "[devtap warn] a thrown object logged 2\n") >= 1);
  CHECK(occurrences(text, "[devtap error] first\n") == 1);
}

TEST_CASE("a line with NUL bytes reaches stderr whole") {
  stderr_capture err;
  devtap::log(devtap::log_level::error, "receiver '{}' ends here", std::string_view("rx\0name", 7));
  using namespace std::string_literals;
  CHECK(err.text() == "[devtap error] receiver 'rx\0name' ends here\n"s);
}

#if defined(__SIZEOF_INT128__)
TEST_CASE("128-bit integers are logged in full, in both compiler modes") {
  __extension__ typedef __int128 i128;
  __extension__ typedef unsigned __int128 u128;
  const u128 two_to_70 = u128{1} << 70;
  const i128 most_negative = static_cast<i128>(u128{1} << 127);
  CHECK(devtap::detail::format_message("{} {} {} {}", two_to_70, (u128{1} << 64) + 5, most_negative, i128{-7}) ==
        "1180591620717411303424 18446744073709551621 -170141183460469231731687303715884105728 -7");
  enum class wide : u128 { big = u128{1} << 100 };
  CHECK(devtap::detail::format_message("{}", wide::big) == "1267650600228229401496703205376");
}
#endif
