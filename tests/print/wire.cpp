// The CUDA side's protocol, driven from host threads: formats defined in-band (the record that
// carries the text), an id-only record that overtakes its definition, a definition that never
// comes, and records that are not prints. detail::print_send is what a kernel's print calls; these
// formats are never printed through devtap::print here, so the host has not registered them.
#include <devtap/print_host.hpp>
#include <devtap/receiver/recording.hpp>

#include "../temp_file.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace devtap::detail;

std::vector<devtap::device*> all(devtap::cpu_client& c) {
  auto d = c.local_devices();
  return {d.begin(), d.end()};
}

struct fixture {
  devtap::cpu_client cpus{1};
  std::vector<std::string> lines;
  devtap::receiver rx{{.devices = all(cpus), .budget_bytes = 1 << 16}};
  devtap::print_channel ch = devtap::attach_print(rx, {.sink = [this](std::string_view l) { lines.emplace_back(l); }});
  devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
};

}  // namespace

TEST_CASE("a definition carried by the record: the host learns the format from it") {
  fixture f;
  using sig = print_signature<"in-band {} {:.2f} {}", int, double, std::span<const int>>;
  const int xs[2] = {4, 5};
  print_send<sig, true>(f.out, 1, 2.5, std::span<const int>(xs));
  print_send<sig, false>(f.out, 2, 3.5, std::span<const int>(xs, 1));
  f.rx.close();
  CHECK(f.lines == std::vector<std::string>{"in-band 1 2.50 [4, 5]", "in-band 2 3.50 [4]"});
  CHECK(f.ch.stats().definitions == 1);
  REQUIRE(global_print_registry().find(sig::id) != nullptr);
  CHECK(global_print_registry().find(sig::id)->text == "in-band {} {:.2f} {}");
}

TEST_CASE("id-only records that overtake their definition wait for it, and keep their order") {
  fixture f;
  using first = print_signature<"overtaken {}", int>;
  using other = print_signature<"other {}", char>;
  print_send<first, false>(f.out, 1);  // another CUDA thread saw the format as defined already
  print_send<other, true>(f.out, 'a');   // known, but must wait behind line 1
  print_send<first, false>(f.out, 2);
  f.rx.flush();
  CHECK(f.lines.empty());  // nothing can be written before line 1
  print_send<first, true>(f.out, 3);     // the thread that won the definition
  print_send<first, false>(f.out, 4);
  f.rx.close();
  CHECK(f.lines == std::vector<std::string>{"overtaken 1", "other a", "overtaken 2", "overtaken 3", "overtaken 4"});
  CHECK(f.ch.stats().unknown_formats == 0);
}

TEST_CASE("a line that waited for its definition is on the timeline at its own record's time") {
  // Before, at the time of the record that carried the definition: drawn late in the trace and the recording.
  const devtap_test::temp_file file("print-held-time.devtap");
  devtap::cpu_client cpus(1);
  {
    devtap::receiver rx({.devices = all(cpus), .budget_bytes = 1 << 16, .timestamps = true, .record_file = file.path});
    auto ch = devtap::attach_print(rx, {.sink = [](std::string_view) {}});
    devtap::printer out = ch.on(rx.outfeed(*cpus.cpu_devices()[0]));
    using sig = print_signature<"held until defined {}", int>;
    print_send<sig, false>(out, 1);  // overtook its definition
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    print_send<sig, true>(out, 2);  // carries it
    rx.close();
  }
  std::vector<std::uint64_t> record_times, line_times;
  std::vector<std::string> texts;
  recording_reader(file.path).for_each([&](const recorded_entry& e) {
    if (e.is_line) line_times.push_back(e.stamp.time_ns), texts.emplace_back(e.text);
    else if (!e.is_marker) record_times.push_back(e.stamp.time_ns);
  });
  REQUIRE(record_times.size() == 2);
  REQUIRE(record_times[0] < record_times[1]);
  CHECK(texts == std::vector<std::string>{"held until defined 1", "held until defined 2"});
  CHECK(line_times == record_times);
}

TEST_CASE("a definition that never comes: those lines are reported at the end of the stream, none lost") {
  fixture f;
  using never = print_signature<"never defined {}", int>;
  using fine = print_signature<"fine {}", int>;
  print_send<fine, true>(f.out, 1);
  print_send<never, false>(f.out, 2);
  print_send<fine, false>(f.out, 3);
  f.rx.close();
  REQUIRE(f.lines.size() == 3);
  CHECK(f.lines[0] == "fine 1");
  // One int argument: 8 argument bytes (the wire pads arguments to a multiple of 8).
  CHECK(f.lines[1] == fmt::format("devtap::print: format id {:#018x} unknown (its definition never arrived from cpu:0; "
                                   "8 argument bytes)",
                                   never::id));
  CHECK(f.lines[2] == "fine 3");
  CHECK(f.ch.stats().unknown_formats == 1);
  CHECK(f.ch.stats().lines == 3);
}

TEST_CASE("records that are not prints, and definitions the host refuses, are error lines") {
  fixture f;
  // Garbage through the printer's tap point (the receiver's type check passes: same type).
  alignas(8) const std::array<std::byte, 12> garbage{};
  f.rx.outfeed(*f.cpus.cpu_devices()[0]).tap(f.ch.point().point, std::span<const std::byte>(garbage));
  // A record whose argument bytes disagree with its format's definition.
  using sig = print_signature<"shape {}", int>;
  print_send<sig, true>(f.out, 1);
  print_record<16> wrong;  // that format's id, with 16 argument bytes where it has 8
  wrong.head.count = sizeof(wrong) - 8;
  wrong.head.id = sig::id;
  wrong.head.arg_bytes = 16;
  f.out.out().tap(devtap::tap_point<print_record<16>>{f.ch.point().point.id, f.ch.point().point.fingerprint, f.ch.point().point.receiver}, wrong);
  print_send<sig, false>(f.out, 3);
  f.rx.close();
  REQUIRE(f.lines.size() == 4);
  CHECK(f.lines[0] == "devtap::print: malformed record (shorter than a print record's head)");
  CHECK(f.lines[1] == "shape 1");
  CHECK(f.lines[2] == "devtap::print: malformed arguments for format \"shape {}\"");
  CHECK(f.lines[3] == "shape 3");
  CHECK(f.ch.stats().malformed == 2);
}

TEST_CASE("a device-defined format that fails the checker on the host is reported, not formatted") {
  fixture f;
  // What a corrupted (or hostile) definition could hold: a precision for an integer. devtap::print
  // would refuse it at compile time; print_signature alone does not check.
  using bad = print_signature<"bad {:.3}", int>;
  STATIC_REQUIRE(bad::check.code == print_check::spec_precision);
  print_send<bad, true>(f.out, 7);
  f.rx.close();
  REQUIRE(f.lines.size() == 1);
  CHECK(f.lines[0] == "devtap::print: format \"bad {:.3}\" rejected at offset 6: a precision in a spec for an "
                      "argument that takes none (only floating point and strings do)");
  CHECK(f.ch.stats().format_errors == 1);
}
