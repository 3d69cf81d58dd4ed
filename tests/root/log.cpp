// The fmt-free logger: placeholders, levels, sinks.
#include <devtap/log.hpp>

#include <catch2/catch.hpp>

#include <string>
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
