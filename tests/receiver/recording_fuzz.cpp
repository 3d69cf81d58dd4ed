// libFuzzer target over the recording's reader (devtap::replay, receiver/recording_reader_impl.hpp):
// whatever bytes a recording file holds, opening it and run() either work, or throw
// std::runtime_error naming the file, or stop at a cut (replay_stats::cut_short_at); never a crash,
// a read outside what was read, a hang or an allocation the file cannot justify.
// Built with clang -fsanitize=fuzzer when -Dfuzz=true (from an empty corpus, or from the seeds that
// `receiver_recording_fuzz_random 0 DIR` writes into DIR); otherwise recording_fuzz_main.cpp drives
// it with mutated real recordings as an ordinary test.
//
// The consumers attach by the names and types recording_fuzz_main.cpp's seeds record: "n"
// (std::uint64_t), "samples" (fuzz_sample), "plain" (fuzz_plain), "tagged" (fuzz_tagged) and "scope"
// (devtap::scope_event). A name the file does not hold (or holds with another type) is skipped.
#include "recording_fuzz.hpp"

#include <devtap/errors.hpp>
#include <devtap/replay.hpp>
#include <devtap/tap/scope.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <typeinfo>
#include <vector>

#include <unistd.h>


namespace {
using namespace devtap_fuzz;

fuzz_result result;

// One file per process, removed at exit: in /dev/shm where there is one (an ext4 /tmp spends most
// of a run truncating the last input's blocks), else in the temporary directory.
struct input_path {
  std::string path;
  input_path() {
    std::error_code ec;
    const std::filesystem::path dir =
        std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm") : std::filesystem::temp_directory_path();
    path = (dir / ("devtap-test-" + std::to_string(::getpid()) + "-recording-fuzz")).string();
  }
  ~input_path() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }
  input_path(const input_path&) = delete;
  input_path& operator=(const input_path&) = delete;
};
const input_path& the_input() {
  static const input_path file;
  return file;
}

[[noreturn]] void violated(const char* what, const std::string& detail = {}) {
  std::fprintf(stderr, "recording_fuzz: invariant violated: %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

void write_file(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size != 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::perror(("recording_fuzz: cannot write " + path).c_str());
    std::abort();
  }
}

// The index of a device of the replay, from a consumer's tap_info (it must be one of them).
std::size_t index_of(const std::vector<const devtap::device*>& devices, const devtap::device& d) {
  const auto it = std::find(devices.begin(), devices.end(), &d);
  if (it == devices.end()) violated("a consumer got a device that is not one of replay::devices()");
  return static_cast<std::size_t>(it - devices.begin());
}

std::uint64_t ns_of(const devtap::tap_info& info) {
  return static_cast<std::uint64_t>(info.time.time_since_epoch().count());
}

volatile std::uint64_t sink = 0;  // every decoded byte is read (ASan: inside the payload)

void replay_file(const std::string& path, std::size_t size) {
  devtap::replay rp(path);
  const std::vector<const devtap::device*> devices = rp.devices();
  result.devices = devices.size();
  for (const devtap::device* d : devices) {
    if (d == nullptr) violated("a null device");
    for (char c : d->name()) sink = sink + static_cast<unsigned char>(c);
    for (char c : d->platform()) sink = sink + static_cast<unsigned char>(c);
  }
  for (const std::string& name : rp.point_names()) sink = sink + name.size();
  sink = sink + rp.receiver_name().size();

  // Per device: the last sequence of an unstamped record the "n" callable saw (the reader counts
  // each device's records: strictly increasing). Merged: the last stamped (time, device, sequence).
  std::vector<std::uint64_t> next_unstamped(devices.size(), 0);
  bool merged_any = false;
  std::tuple<std::uint64_t, std::size_t, std::uint64_t> merged_last{};
  auto attach = [&](auto&& fn) {
    try {
      fn();
      ++result.attached;
      return true;
    } catch (const std::invalid_argument&) {  // no point of that name and type: documented
      return false;
    }
  };
  const bool n_attached = attach([&] {
    rp.attach<std::uint64_t>("n", [&](const std::uint64_t& v, const devtap::tap_info& info) {
      const std::size_t d = index_of(devices, info.device);
      if (!info.stamped) {
        if (info.sequence < next_unstamped[d]) violated("unstamped sequences of a device go back");
        next_unstamped[d] = info.sequence + 1;
      }
      ++result.counted, ++result.n_values, result.n_sum += v;
    });
  });
  const bool coroutine_attached = attach([&] {
    rp.attach<std::uint64_t>("n", [&](devtap::inbox<std::uint64_t> in) -> devtap::consumer<std::uint64_t> {
      while (auto v = co_await in.next()) {
        (void)index_of(devices, in.info().device);
        sink = sink + *v;
        ++result.counted, ++result.n_coroutine;
      }
      ++result.ends;
    });
  });
  attach([&] {
    rp.attach<fuzz_sample>(
        "samples",
        [&](const fuzz_sample& s) {
          for (int x : s.data) sink = sink + static_cast<std::uint64_t>(x);
          ++result.counted, ++result.samples, result.sample_ints += s.data.size();
        },
        devtap::shared);
  });
  attach([&] {
    rp.attach<fuzz_plain>("plain", [&](const fuzz_plain& p, const devtap::device& d) {
      (void)index_of(devices, d);
      sink = sink + static_cast<std::uint64_t>(p.a) + p.d + static_cast<unsigned char>(p.c[4]) + (p.e ? 1 : 0);
      ++result.counted, ++result.plains;
    });
  });
  attach([&] {
    rp.attach<fuzz_tagged>("tagged", [&](const fuzz_tagged& t) {
      for (double x : std::get<1>(t)) sink = sink + (x != 0);
      ++result.counted, ++result.tagged;
    });
  });
  attach([&] {
    rp.attach<devtap::scope_event>("scope", [&](const devtap::scope_event& e, const devtap::tap_info& info) {
      (void)index_of(devices, info.device);
      for (char c : e.text()) sink = sink + static_cast<unsigned char>(c);
      ++result.counted, ++result.scopes;
    });
  });
  if (rp.timestamps()) {
    attach([&] {
      rp.attach<std::uint64_t>(
          "n",
          [&](const std::uint64_t&, const devtap::tap_info& info) {
            const std::size_t d = index_of(devices, info.device);
            if (info.stamped) {  // unstamped ones sort by their read time, which tap_info does not carry
              const auto key = std::tuple(ns_of(info), d, info.sequence);
              if (merged_any && key < merged_last) violated("a merged consumer's records are out of tap order");
              merged_any = true, merged_last = key;
            }
            ++result.counted, ++result.n_merged;
          },
          devtap::merged);
    });
  } else {
    try {
      rp.attach<std::uint64_t>("n", [](const std::uint64_t&) {}, devtap::merged);
      violated("attach(..., merged) was taken for a recording without timestamps");
    } catch (const std::logic_error&) {
    }
  }

  const devtap::replay_stats st = rp.run();
  result.what = fuzz_result::outcome::replayed;
  result.stats = st;
  const std::string stats = "records " + std::to_string(st.records) + ", delivered " + std::to_string(st.delivered) +
                            ", counted " + std::to_string(result.counted) + ", markers " + std::to_string(st.markers) +
                            ", cut_short_at " + std::to_string(st.cut_short_at) + ", file " + std::to_string(size);
  if (st.delivered != result.counted) violated("replay_stats::delivered is not what the consumers were given", stats);
  if (st.delivered + st.undecodable + st.type_mismatches > st.records * result.attached)
    violated("more deliveries, undecodable and mismatched records than records x consumers", stats);
  if (st.unknown_ids > st.records) violated("more unknown ids than records", stats);
  if (result.n_values > st.records) violated("a consumer got more records than the recording has", stats);
  // The consumers of "n" take the same records (8 bytes of its fingerprint), whatever their form.
  if (coroutine_attached != n_attached) violated("one consumer of \"n\" attached, another not");
  if (result.n_coroutine != result.n_values || (rp.timestamps() && result.n_merged != result.n_values))
    violated("the consumers of \"n\" were given different records", stats + ", callable " + std::to_string(result.n_values) +
             ", coroutine " + std::to_string(result.n_coroutine) + ", merged " + std::to_string(result.n_merged));
  // Chunks start 8-aligned after the 32-byte prefix and the header: a cut is at such a start,
  // inside the file, or at its end (whole chunks, no end chunk); a file whose size is no multiple of 8
  // must end in one.
  if (st.cut_short_at != 0 && (st.cut_short_at < 32 || st.cut_short_at > size || st.cut_short_at % 8 != 0))
    violated("cut_short_at is not the start of a chunk inside the file", stats);
  if (size % 8 != 0 && st.cut_short_at == 0) violated("a file of a size no multiple of 8 replayed whole", stats);
  // Each coroutine (one per device) saw its stream end: nothing threw, none returned early.
  if (coroutine_attached ? result.ends != devices.size() : result.ends != 0)
    violated("a coroutine consumer's stream did not end once per device", stats);
  try {
    (void)rp.run();
    violated("a second run() did not throw");
  } catch (const std::logic_error&) {
  }
}

}  // namespace

namespace devtap_fuzz {
const fuzz_result& last_result() { return result; }
const std::string& input_file() { return the_input().path; }
}  // namespace devtap_fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const input_path& file = the_input();
  result = fuzz_result{};
  write_file(file.path, data, size);
  try {
    replay_file(file.path, size);
  } catch (const devtap::tap_error& e) {  // these consumers never throw
    violated("run() threw devtap::tap_error", e.what());
  } catch (const std::bad_alloc&) {  // nothing a damaged file asks for may be beyond what it holds
    violated("std::bad_alloc: an allocation the file cannot justify");
  } catch (const std::runtime_error& e) {  // the documented refusal: names the file and what is wrong
    result.what = fuzz_result::outcome::refused;
    result.message = e.what();
    if (result.message.rfind("devtap: ", 0) != 0 || result.message.find(file.path) == std::string::npos)
      violated("a refusal that does not name devtap and the file", result.message);
  } catch (const std::exception& e) {  // std::length_error, std::logic_error, ...: not what is documented
    violated((std::string("unexpected exception ") + typeid(e).name()).c_str(), e.what());
  }
  return 0;
}
