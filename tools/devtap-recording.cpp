// devtap-recording: what a recording (receiver_options::record_file) holds, and its trace file.
//
//   devtap-recording summary RUN.devtap           devices, points, record counts, time span, markers
//   devtap-recording trace RUN.devtap OUT.json    the Chrome Trace Event file of the live run, but that
//                                                 tap values show their sizes (their types are the program's);
//                                                 OUT.json "-": standard output
//
// Exit status: 0 done, 1 a damaged or unreadable recording or an unwritable output, 2 bad usage.
#include <devtap/devtap.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

using devtap::detail::point_kind;
using devtap::detail::recorded_entry;
using devtap::detail::recording_reader;

std::string cut_text(const recording_reader& file) {
  return fmt::format("the recording is cut short at byte {}: its writer stopped there without closing it (a crash, or a "
                     "run still going); what came before is shown",
                     file.cut_short_at());
}

// A name as the summary prints it: control bytes as \xNN, so a recording from elsewhere cannot break
// the table's lines or send the terminal escape sequences.
std::string printable(std::string_view name) { return devtap::detail::printable(name, false, name.size()); }

std::string_view kind_name(point_kind k) {
  switch (k) {
    case point_kind::tap: return "tap";
    case point_kind::call: return "call";
    case point_kind::print: return "print";
    case point_kind::scope: return "scope";
  }
  return "?";
}

// Standard output is buffered: a full disk or a closed pipe shows only at the flush, which must
// not turn into exit status 0.
int finish_output(std::string_view what) {
  if (std::fflush(stdout) == 0 && std::ferror(stdout) == 0) return 0;
  fmt::print(stderr, "devtap-recording: {} could not be written to standard output: {}\n", what, std::strerror(errno));
  return 1;
}

int summary(recording_reader& file) {
  struct counts {
    std::uint64_t records = 0, bytes = 0;
  };
  // By (unknown, id): a record no point had live gets a row of its own, not the row of the point
  // that took its id later. (Ids use all 32 bits: calls carry the top one.)
  std::map<std::pair<bool, std::uint32_t>, counts> by_point;
  std::vector<counts> by_device(file.devices().size());
  std::map<std::string_view, std::pair<std::uint64_t, std::uint64_t>> markers;  // name -> (count, markers)
  std::vector<std::uint64_t> lines(file.devices().size(), 0);
  std::uint64_t first = ~std::uint64_t{0}, last = 0;
  file.for_each([&](const recorded_entry& e) {
    first = std::min(first, e.stamp.time_ns);
    last = std::max(last, e.stamp.time_ns);
    if (e.is_line) {
      ++lines[e.device];
      return;
    }
    if (e.is_marker) {
      auto& m = markers[devtap::detail::marker_name(e.marker)];
      m.first += e.count, ++m.second;
      return;
    }
    auto& p = by_point[{e.unknown, e.id}];
    ++p.records, p.bytes += e.bytes;
    ++by_device[e.device].records, by_device[e.device].bytes += e.bytes;
  });
  fmt::print("recording {}: receiver '{}', {} device(s), timestamps {}\n", printable(file.path()), printable(file.receiver_name()),
             file.devices().size(), file.timestamps() ? "on" : "off");
  if (first <= last)
    fmt::print("time span: {:.3f} ms (from {:.3f} ms after the receiver opened)\n", (last - first) / 1e6,
               (static_cast<double>(first) - static_cast<double>(file.origin_ns())) / 1e6);
  fmt::print("\n{:<24} {:>14} {:>16} {:>14}\n", "device", "records", "payload bytes", "printed lines");
  for (std::size_t d = 0; d < by_device.size(); ++d)
    fmt::print("{:<24} {:>14} {:>16} {:>14}\n", printable(file.devices()[d].name), by_device[d].records, by_device[d].bytes, lines[d]);
  fmt::print("\n{:<24} {:<6} {:>14} {:>16}\n", "point", "kind", "records", "payload bytes");
  for (const auto& [key, c] : by_point) {
    const auto* p = key.first ? nullptr : file.point(key.second);
    fmt::print("{:<24} {:<6} {:>14} {:>16}\n", p != nullptr ? printable(p->name) : devtap::detail::unknown_id_text(key.second),
               p != nullptr ? kind_name(p->kind) : "-", c.records, c.bytes);
  }
  fmt::print("\nmarkers:");
  if (markers.empty()) fmt::print(" none");
  for (const auto& [name, m] : markers) fmt::print(" {} {} ({} marker(s))", name, m.first, m.second);
  fmt::print("\n");
  if (file.cut_short_at() != 0) fmt::print("{}\n", cut_text(file));
  return finish_output("the summary");
}

int trace(recording_reader& file, const std::string& out_path) {
  // Read through once first: a recording damaged halfway is refused before the output is touched.
  file.for_each([](const recorded_entry&) {});
  std::vector<std::string> names;
  for (const auto& d : file.devices()) names.push_back(d.name);
  devtap::detail::trace_writer trace(out_path, file.receiver_name(), names, file.origin_ns(), "");  // errors name the path
  trace.start();
  for (const auto& [id, name] : file.scope_names()) trace.name_scope(id, name);
  // Lines and markers only add to a device's buffer; records say when it is full. A run of lines
  // alone is written every so many, so the buffer stays small.
  std::vector<unsigned> unwritten(file.devices().size());
  file.for_each([&](const recorded_entry& e) {
    if (e.is_line || e.is_marker) {
      if (e.is_line) trace.line(e.device, e.stamp.time_ns, e.text, true);  // a printer's line, as the live printer wrote it
      else trace.marker(e.device, e.stamp.time_ns, e.marker, e.count, e.text, true);
      if (e.device < unwritten.size() && ++unwritten[e.device] == 256) trace.write_out(e.device), unwritten[e.device] = 0;
      return;
    }
    const devtap::detail::point_description* point = e.unknown ? nullptr : file.point(e.id);
    devtap::detail::sink_record r{e.device, e.id, e.fingerprint, e.stamp, e.payload, e.bytes, 0};
    if (trace.record(r, point, nullptr)) trace.write_out(e.device);
  });
  for (std::size_t d = 0; d < file.devices().size(); ++d) trace.end(d, 0, 0);
  constexpr auto never = std::chrono::steady_clock::time_point::max();
  if (const std::string error = trace.close(never, never); !error.empty()) {
    fmt::print(stderr, "devtap-recording: {}\n", error);
    return 1;
  }
  // On stderr: the trace may be standard output ("-").
  fmt::print(stderr, "devtap-recording: wrote {} ({} events)\n", out_path, trace.events());
  if (file.cut_short_at() != 0) fmt::print(stderr, "devtap-recording: {}\n", cut_text(file));
  return finish_output("the trace");
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a closed pipe on stdout is a write error (exit status 1), not a kill
  const std::vector<std::string_view> args(argv + 1, argv + argc);
  const bool is_summary = args.size() == 2 && args[0] == "summary";
  const bool is_trace = args.size() == 3 && args[0] == "trace";
  if (!is_summary && !is_trace) {
    fmt::print(stderr,
               "usage: devtap-recording summary RUN.devtap\n"
               "       devtap-recording trace RUN.devtap OUT.json   (OUT.json: - for standard output)\n");
    return 2;
  }
  const std::string out = !is_trace ? std::string() : args[2] == "-" ? std::string("/dev/stdout") : std::string(args[2]);
  std::error_code same_error;  // (none: an output that does not exist yet is not the input)
  if (is_trace && std::filesystem::equivalent(args[1], out, same_error)) {
    fmt::print(stderr, "devtap-recording: the output {} is the recording itself: writing it would destroy what it reads\n",
               args[2]);
    return 1;
  }
  try {
    recording_reader file{std::string(args[1])};
    return is_summary ? summary(file) : trace(file, out);
  } catch (const std::exception& e) {
    fmt::print(stderr, "devtap-recording: {}\n", e.what());
    return 1;
  }
}
