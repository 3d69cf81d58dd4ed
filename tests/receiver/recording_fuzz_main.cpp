// Runs the recording fuzz target (recording_fuzz.cpp) on mutated real recordings without libFuzzer
// (every compiler, every CI build). Two seeds are recorded first by real receivers on cpu devices
// (timestamps on and off, taps of every type the target attaches, scopes, prints, markers), checked
// to replay whole with exactly what was tapped, then damaged: bytes flipped, files cut, the format's
// 4- and 8-byte fields (found by walking the seed) set to boundary values and to sizes just past
// what is left, chunks duplicated, dropped, swapped, shrunk or grown; pure random bytes too.
//
//   receiver_recording_fuzz_random [RUNS [DIR]]
//     RUNS mutated inputs (default below: ~5 s under ASan+UBSan in a debug build, ~0.3 s optimized);
//     DIR: the seeds are written there too (a libFuzzer corpus), e.g. `... 0 corpus/`
//
// A crash leaves the input it died on in the file the target writes (its path is printed first).
// Any single allocation above 64 MiB while fuzzing aborts (the inputs are a few KiB), as does an
// input that takes over 20 s.
#include <devtap/backend/cpu.hpp>
#include <devtap/print_host.hpp>
#include <devtap/receiver/receiver.hpp>
#include <devtap/replay.hpp>
#include <devtap/tap/scope.hpp>

#include "recording_fuzz.hpp"
#include "../allocation_guard.hpp"
#include "../temp_file.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <new>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);


// ---- allocations: none above 64 MiB while fuzzing (../allocation_guard.hpp) ---------------------

namespace {
using namespace devtap_fuzz;
using bytes_t = std::vector<std::uint8_t>;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "recording_fuzz-random: %s\n", what.c_str());
  std::exit(1);
}

bytes_t read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// ---- the seeds: real recordings -------------------------------------------------------------

struct seed {
  std::string name;
  bytes_t bytes;
  std::size_t devices;
  bool stamped;
  std::uint64_t n_per_device, samples_per_device, plains_per_device, tagged_per_device, scopes_per_device;
  std::uint64_t n_sum;
  std::uint64_t other_records;  // records of no attached point: prints, a mismatch, an unknown id
};

// One receiver over `devices` cpu devices, each tapping every type the target attaches inside a
// scope, printing a line; device 0 also taps a mismatch and an unknown id (markers, skipped records).
seed record_seed(const std::string& name, std::size_t devices, bool stamped) {
  devtap_test::temp_file file("recording-fuzz-seed-" + name);
  devtap::cpu_client cpus(static_cast<int>(devices));
  seed s{name, {}, devices, stamped, 12, 3, 2, 2, 2, 0, 0};
  {
    auto all = cpus.local_devices();
    devtap::receiver rx({.devices = {all.begin(), all.end()}, .budget_bytes = std::size_t{1} << 20, .name = "fuzz-" + name,
                         .timestamps = stamped, .record_file = file.path});
    auto n = rx.attach<std::uint64_t>([](const std::uint64_t&) {}, "n");
    auto samples = rx.attach<fuzz_sample>([](const fuzz_sample&) {}, "samples");
    auto plains = rx.attach<fuzz_plain>([](const fuzz_plain&) {}, devtap::shared, "plain");
    auto tags = rx.attach<fuzz_tagged>([](const fuzz_tagged&) {}, "tagged");
    rx.attach<devtap::scope_event>([](const devtap::scope_event&) {});
    rx.name_scope(7, "kernel seven");  // a scope_name chunk
    devtap::print_channel prints = devtap::attach_print(rx, {.sink = [](std::string_view) {}});
    for (std::size_t d = 0; d < devices; ++d)
      cpus.cpu_devices()[d]->run([&, d](devtap::cpu_context& ctx) {
        devtap::printer out(ctx, prints);
        auto scope = ctx.scope(d == 0 ? "step" : "other step");
        for (std::uint64_t i = 0; i < s.n_per_device; ++i) ctx.tap(n, d * 1000 + i);
        const int ints[] = {1, -2, 3, -4, 5};
        for (const std::size_t k : {std::size_t{0}, std::size_t{2}, std::size_t{5}})
          ctx.tap(samples, fuzz_sample{static_cast<int>(k), std::span<const int>(ints, k), 0.5});
        for (int i = 0; i < 2; ++i) ctx.tap(plains, fuzz_plain{i, 1.5, {'a', 'b', '\0', '\n', 'e'}, 200, i == 1});
        const double doubles[] = {0.25, 0.5, 0.75};
        for (const std::size_t k : {std::size_t{0}, std::size_t{3}})
          ctx.tap(tags, fuzz_tagged{static_cast<std::int16_t>(-1), std::span<const double>(doubles, k), 'x'});
        devtap::print<"device {} wrote {} values">(out, d, s.n_per_device);
      });
    const devtap::outfeed out = rx.outfeed(*cpus.cpu_devices()[0]);
    out.tap(devtap::tap_point<double>{n.id, devtap::type_fingerprint_v<double>, n.receiver}, 1.0);  // a mismatch
    out.tap(devtap::tap_point<int>{999, devtap::type_fingerprint_v<int>, n.receiver}, 5);           // an unknown id
    try {
      rx.close();
    } catch (const devtap::tap_error&) {  // the mismatch and the unknown id, reported live
    }
  }
  for (std::size_t d = 0; d < devices; ++d)
    for (std::uint64_t i = 0; i < s.n_per_device; ++i) s.n_sum += d * 1000 + i;
  s.other_records = devices + 2;  // a print per device, the mismatch, the unknown id
  s.bytes = read_all(file.path);
  if (s.bytes.size() < 256) fail("seed " + name + ": the recording has only " + std::to_string(s.bytes.size()) + " bytes");
  return s;
}

// The seed, unmodified, through the target: it must replay whole, exactly what was tapped.
void check_seed(const seed& s) {
  LLVMFuzzerTestOneInput(s.bytes.data(), s.bytes.size());
  const fuzz_result& r = last_result();
  auto expect = [&](const char* what, std::uint64_t got, std::uint64_t want) {
    if (got != want)
      fail("seed " + s.name + ": " + what + " is " + std::to_string(got) + ", expected " + std::to_string(want) +
           (r.message.empty() ? "" : " (" + r.message + ")"));
  };
  expect("the outcome (0 not a file, 1 replayed, 2 refused)", static_cast<std::uint64_t>(r.what),
         static_cast<std::uint64_t>(fuzz_result::outcome::replayed));
  const std::uint64_t d = s.devices;
  expect("devices", r.devices, d);
  expect("consumers attached", r.attached, s.stamped ? 7 : 6);
  expect("cut_short_at", r.stats.cut_short_at, 0);
  expect("n records (callable)", r.n_values, d * s.n_per_device);
  expect("n records (coroutine)", r.n_coroutine, d * s.n_per_device);
  expect("n records (merged)", r.n_merged, s.stamped ? d * s.n_per_device : 0);
  expect("the sum of n", r.n_sum, s.n_sum);
  expect("samples", r.samples, d * s.samples_per_device);
  expect("ints in samples", r.sample_ints, d * 7);
  expect("plain records", r.plains, d * s.plains_per_device);
  expect("tagged records", r.tagged, d * s.tagged_per_device);
  expect("scope events", r.scopes, d * s.scopes_per_device);
  expect("coroutine ends", r.ends, d);
  const std::uint64_t attached_records =
      d * (s.n_per_device + s.samples_per_device + s.plains_per_device + s.tagged_per_device + s.scopes_per_device);
  expect("records", r.stats.records, attached_records + s.other_records);
  expect("delivered", r.stats.delivered,
         attached_records + d * s.n_per_device * (s.stamped ? 2 : 1));  // "n" has 2 or 3 consumers
  expect("dropped", r.stats.dropped, 0);
  expect("undecodable", r.stats.undecodable, 0);
  if (r.stats.markers < 2) fail("seed " + s.name + ": the mismatch and the unknown id left no marker");
}

// ---- where the seed's fields are -----------------------------------------------------------

std::uint64_t get(const bytes_t& b, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  std::memcpy(&v, b.data() + at, width);
  return v;
}
void put(bytes_t& b, std::size_t at, std::size_t width, std::uint64_t v) {
  if (at + width <= b.size()) std::memcpy(b.data() + at, &v, width);
}

struct layout {
  std::vector<std::size_t> fields4, fields8;          // offsets of the format's u32 and u64 fields
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // [begin, end)
  std::vector<std::size_t> records_chunks;            // indices into chunks
  std::size_t entries_at = 0;
};

// Walks a valid recording as docs/timeline.md lays it out (no checks beyond staying inside).
layout walk(const bytes_t& b) {
  layout l;
  if (b.size() < 32) {
    l.entries_at = b.size();
    return l;
  }
  l.fields4 = {8, 12};
  l.fields8 = {16, 24};
  const std::uint64_t header_bytes = get(b, 24, 8);
  std::size_t at = 32;
  const std::size_t header_end = header_bytes > b.size() - 32 ? b.size() : 32 + static_cast<std::size_t>(header_bytes);
  auto str = [&](std::size_t& p, std::size_t end) {
    if (p + 4 > end) return;
    l.fields4.push_back(p);
    p += 4 + static_cast<std::size_t>(get(b, p, 4));
    p = (p + 7) / 8 * 8;
  };
  str(at, header_end);
  if (at + 4 <= header_end) {
    l.fields4.push_back(at);
    const auto devices = get(b, at, 4);
    at += 8;
    for (std::uint64_t i = 0; i < devices && at + 4 <= header_end; ++i) {
      l.fields4.push_back(at);
      at += 8;
      str(at, header_end);
      str(at, header_end);
    }
  }
  l.entries_at = header_end;
  for (at = header_end; at + 16 <= b.size();) {
    const auto type = get(b, at, 4);
    const std::uint64_t body = get(b, at + 8, 8);
    if (body > b.size() - at - 16) break;
    const std::size_t begin = at + 16, end = begin + static_cast<std::size_t>(body);
    l.fields4.push_back(at), l.fields4.push_back(at + 4), l.fields8.push_back(at + 8);
    if (type == 1) {  // point: id kind fingerprint name
      l.fields4.push_back(begin), l.fields4.push_back(begin + 4), l.fields8.push_back(begin + 8), l.fields4.push_back(begin + 16);
    } else if (type == 2) {  // scope name: id name
      l.fields4.push_back(begin), l.fields4.push_back(begin + 8);
    } else if (type == 3) {
      l.records_chunks.push_back(l.chunks.size());
      for (std::size_t e = begin; e + 16 <= end;) {
        const auto word = get(b, e, 4);
        const auto bytes = get(b, e + 4, 4);
        l.fields4.push_back(e), l.fields4.push_back(e + 4);
        std::size_t p = e + 8;
        if (word == 0) {  // a marker or a line: time kind 0 count text
          l.fields8.push_back(p), l.fields4.push_back(p + 8), l.fields4.push_back(p + 12), l.fields8.push_back(p + 16);
          p += 24 + static_cast<std::size_t>(bytes);
        } else {
          if ((bytes & (std::uint64_t{1} << 31)) != 0) l.fields8.push_back(p), p += 8;
          l.fields8.push_back(p), p += 8;                                 // time
          if ((word & (std::uint32_t{1} << 30)) != 0) l.fields8.push_back(p), p += 8;  // sequence
          const std::size_t payload = static_cast<std::size_t>(bytes & ~(std::uint64_t{1} << 31));
          for (std::size_t q = 0; q + 8 <= payload && p + q + 8 <= end; q += 8) l.fields8.push_back(p + q);  // span counts
          p += payload;
        }
        e = (p + 7) / 8 * 8;
      }
    }
    l.chunks.emplace_back(at, end);
    at = end;
  }
  return l;
}

// ---- mutations ------------------------------------------------------------------------------

struct mutator {
  std::mt19937_64 rng{20240601};
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : rng() % n; }
  bool one_in(std::uint64_t n) { return below(n) == 0; }

  // A value for a field at `at` of `width` bytes, in a file of `size` bytes.
  std::uint64_t boundary(std::uint64_t old, std::size_t at, std::size_t size, std::size_t width) {
    const std::uint64_t left = size > at ? size - at : 0;
    const std::uint64_t values[] = {0, 1, 2, 3, 7, 8, 16, 24, 0x7f, 0xff, 0x100, 0xffff, 0x7fffffff, 0x80000000,
                                    0xfffffff8, 0xffffffff, std::uint64_t{1} << 30, (std::uint64_t{1} << 30) - 1,
                                    (std::uint64_t{1} << 30) - 2, std::uint64_t{1} << 32, std::uint64_t{1} << 62,
                                    std::uint64_t{1} << 63, ~std::uint64_t{0}, ~std::uint64_t{7}, size, size + 8,
                                    left, left + 1, left + 8, left + 16, left - 8, left - 16, left - 24,
                                    old + 8, old - 8, old + 1, old ^ (std::uint64_t{1} << 31), old ^ (std::uint64_t{1} << 30),
                                    old * 2, old << 32, static_cast<std::uint64_t>(size) << 3};
    std::uint64_t v = values[below(std::size(values))];
    if (width == 4 && v > 0xffffffffu && one_in(2)) v = 0xffffffffu - below(16);
    return v;
  }

  void field(bytes_t& b, const layout& l) {
    const bool wide = !l.fields8.empty() && (l.fields4.empty() || one_in(3));
    const auto& fields = wide ? l.fields8 : l.fields4;
    if (fields.empty()) return;
    const std::size_t at = fields[below(fields.size())], width = wide ? 8 : 4;
    if (at + width > b.size()) return;
    put(b, at, width, boundary(get(b, at, width), at, b.size(), width));
  }
  void any_field(bytes_t& b) {  // a boundary value at any 4-aligned place
    if (b.size() < 8) return;
    const std::size_t width = one_in(2) ? 8 : 4;
    const std::size_t at = below(b.size() - width + 1) / 4 * 4;
    put(b, at, width, boundary(get(b, at, width), at, b.size(), width));
  }
  void flip(bytes_t& b) {
    if (b.empty()) return;
    for (std::uint64_t i = 0, n = 1 + below(4); i < n; ++i) {
      const std::size_t at = below(b.size());
      b[at] = static_cast<std::uint8_t>(b[at] ^ (one_in(2) ? 1u << below(8) : 1 + below(255)));
    }
  }
  void truncate(bytes_t& b, const layout& l) {
    if (!l.chunks.empty() && one_in(2)) {  // near a chunk's start or end
      const auto& c = l.chunks[below(l.chunks.size())];
      const std::size_t at = (one_in(2) ? c.first : c.second) + below(33) - 16;
      b.resize(std::min(b.size(), at));
    } else {
      b.resize(below(b.size() + 1));
    }
  }
  void chunks(bytes_t& b, const layout& l) {
    if (l.chunks.empty()) return;
    const auto c = l.chunks[below(l.chunks.size())];
    if (c.second > b.size()) return;
    const bytes_t chunk(b.begin() + static_cast<std::ptrdiff_t>(c.first), b.begin() + static_cast<std::ptrdiff_t>(c.second));
    const auto other = l.chunks[below(l.chunks.size())];
    const std::size_t body = c.second - c.first - 16;
    switch (below(6)) {
      case 0:  // duplicated, somewhere at a chunk boundary (a point defined twice, records twice)
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(std::min(b.size(), one_in(2) ? other.first : other.second)),
                 chunk.begin(), chunk.end());
        break;
      case 1:  // dropped (records before their point's definition, a device without records)
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(c.first), b.begin() + static_cast<std::ptrdiff_t>(c.second));
        break;
      case 2:  // moved to the end
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(c.first), b.begin() + static_cast<std::ptrdiff_t>(c.second));
        b.insert(b.end(), chunk.begin(), chunk.end());
        break;
      case 3: {  // its body shrunk by whole words, the size kept consistent: entries cut mid-way
        const std::size_t cut = 8 * (1 + below(std::max<std::size_t>(body / 8, 1)));
        if (cut > body) break;
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(c.second - cut), b.begin() + static_cast<std::ptrdiff_t>(c.second));
        put(b, c.first + 8, 8, body - cut);
        break;
      }
      case 4: {  // its body grown by words of boundary values, the size kept consistent
        bytes_t extra(8 * (1 + below(4)));
        for (std::size_t q = 0; q < extra.size(); q += 8) put(extra, q, 8, boundary(0, q, extra.size(), 8));
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(c.second), extra.begin(), extra.end());
        put(b, c.first + 8, 8, body + extra.size());
        break;
      }
      default:  // another type, another device
        put(b, c.first + (one_in(2) ? 0 : 4), 4, below(6));
        break;
    }
  }
  void splice(bytes_t& b, const seed& other) {  // this file's header, the other's chunks (or the reverse)
    const layout lo = walk(other.bytes), lb = walk(b);
    if (one_in(2)) {
      b.resize(std::min(b.size(), lb.entries_at));
      b.insert(b.end(), other.bytes.begin() + static_cast<std::ptrdiff_t>(lo.entries_at), other.bytes.end());
    } else {
      bytes_t out(other.bytes.begin(), other.bytes.begin() + static_cast<std::ptrdiff_t>(lo.entries_at));
      if (lb.entries_at <= b.size()) out.insert(out.end(), b.begin() + static_cast<std::ptrdiff_t>(lb.entries_at), b.end());
      b = std::move(out);
    }
  }
  void random_bytes(bytes_t& b) {
    const std::size_t at = below(b.size() + 1);
    bytes_t junk(below(64) + 1);
    for (auto& x : junk) x = static_cast<std::uint8_t>(rng());
    if (one_in(2) && at + junk.size() <= b.size()) std::copy(junk.begin(), junk.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
    else b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), junk.begin(), junk.end());
  }
};

// ---- a watchdog: an input that does not finish is a hang --------------------------------------

extern "C" void on_alarm(int) {
  const char msg[] = "recording_fuzz-random: an input took over 20 s (a hang?); it is in the target's file\n";
  [[maybe_unused]] const auto n = ::write(2, msg, sizeof msg - 1);
  std::abort();
}

}  // namespace

int main(int argc, char** argv) {
  const long runs = argc > 1 ? std::atol(argv[1]) : 15000;
  const auto began = std::chrono::steady_clock::now();
  std::printf("recording_fuzz-random: the input being replayed is in %s\n", input_file().c_str());
  std::fflush(stdout);

  devtap::set_log_sink([](devtap::log_level, std::string_view) {});  // the seeds' mismatches are logged
  const std::vector<seed> seeds = {record_seed("stamped", 2, true), record_seed("plain", 3, false)};
  devtap::set_log_sink({});
  for (const seed& s : seeds) {
    if (argc > 2) {
      const std::string path = std::string(argv[2]) + "/seed-" + s.name + ".devtap";
      std::ofstream out(path, std::ios::binary | std::ios::trunc);
      out.write(reinterpret_cast<const char*>(s.bytes.data()), static_cast<std::streamsize>(s.bytes.size()));
      if (!out) fail("cannot write " + path);
    }
  }
  std::signal(SIGALRM, on_alarm);
  devtap_test::allocation_limit = std::size_t{64} << 20;  // a damaged file of a few KiB
  devtap_test::abort_above_limit = true;
  devtap_test::largest_allocation = 0;
  for (const seed& s : seeds) check_seed(s);
  std::vector<layout> layouts;
  for (const seed& s : seeds) layouts.push_back(walk(s.bytes));
  for (std::size_t i = 0; i < seeds.size(); ++i)
    if (layouts[i].records_chunks.empty() || layouts[i].chunks.back().second != seeds[i].bytes.size())
      fail("seed " + seeds[i].name + ": its chunks do not walk to the end of the file");

  mutator m;
  std::uint64_t replayed = 0, refused = 0, cut = 0, delivered = 0, undecodable = 0;
  bytes_t buf;
  for (long r = 0; r < runs; ++r) {
    const std::size_t which = m.below(seeds.size());
    const seed& s = seeds[which];
    const std::uint64_t kind = m.below(16);
    if (kind == 0) {  // pure random bytes; half of them behind a valid magic and version
      buf.assign(m.below(300), 0);
      for (auto& x : buf) x = static_cast<std::uint8_t>(m.rng());
      if (m.one_in(2) && buf.size() >= 16) std::copy(s.bytes.begin(), s.bytes.begin() + 16, buf.begin());
    } else if (kind == 1) {  // the valid header, then random words
      buf.assign(s.bytes.begin(), s.bytes.begin() + static_cast<std::ptrdiff_t>(layouts[which].entries_at));
      for (std::uint64_t i = 0, n = m.below(40); i < n; ++i) {
        std::uint64_t w = m.one_in(2) ? m.rng() : m.boundary(0, buf.size(), buf.size() + 64, 8);
        if (m.one_in(3)) w = (w & ~std::uint64_t{0xffffffff}) | (1 + m.below(3));  // a chunk type
        buf.resize(buf.size() + 8);
        put(buf, buf.size() - 8, 8, w);
      }
    } else {  // the seed, damaged 1 to 4 times
      buf = s.bytes;
      for (std::uint64_t i = 0, n = 1 + m.below(4); i < n; ++i) {
        const layout l = i == 0 ? layouts[which] : walk(buf);  // fields move when chunks do
        switch (m.below(8)) {
          case 0: m.flip(buf); break;
          case 1: m.truncate(buf, l); break;
          case 2: case 3: m.field(buf, l); break;
          case 4: m.any_field(buf); break;
          case 5: m.chunks(buf, l); break;
          case 6: m.splice(buf, seeds[m.below(seeds.size())]); break;
          default: m.random_bytes(buf); break;
        }
      }
    }
    ::alarm(20);
    LLVMFuzzerTestOneInput(buf.data(), buf.size());
    ::alarm(0);
    const fuzz_result& res = last_result();
    if (res.what == fuzz_result::outcome::replayed) {
      ++replayed, delivered += res.stats.delivered, undecodable += res.stats.undecodable;
      if (res.stats.cut_short_at != 0) ++cut;
    } else {
      ++refused;
    }
  }
  devtap_test::abort_above_limit = false;
  devtap_test::allocation_limit = ~std::size_t{0};
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
#if defined(DEVTAP_TEST_RUNTIME_OWNS_NEW)
  const std::string largest = "not tracked (the sanitizer's runtime owns operator new)";
#else
  const std::string largest = std::to_string(devtap_test::largest_allocation.load()) + " bytes";
#endif
  std::printf("recording_fuzz-random: %ld inputs in %.1f s: %llu replayed (%llu cut short, %llu records delivered), "
              "%llu refused, %llu records undecodable; largest allocation while fuzzing: %s\n",
              runs, seconds, static_cast<unsigned long long>(replayed), static_cast<unsigned long long>(cut),
              static_cast<unsigned long long>(delivered), static_cast<unsigned long long>(refused),
              static_cast<unsigned long long>(undecodable), largest.c_str());
  // The mutations must reach both ends: files that replay (the consumers decode damaged payloads)
  // and files that are refused.
  if (runs >= 1000 && (replayed < static_cast<std::uint64_t>(runs) / 20 || refused < static_cast<std::uint64_t>(runs) / 20))
    fail("the mutations no longer reach both replayed and refused files");
  return 0;
}
