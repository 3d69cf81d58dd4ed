// registry<B...>: compile-time order, lazy once-only creation, failures, platforms, the fallback warning.
#include "test_backends.hpp"

#include <devtap/backend/cpu.hpp>
#include <devtap/backend/registry.hpp>
#include <devtap/errors.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <future>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

using namespace devtap_test;
using devtap::backend_error;
using devtap::log_level;
using sv = std::string_view;

namespace {

std::vector<sv> platforms_of(const std::vector<devtap::client*>& clients) {
  std::vector<sv> out;
  for (auto* c : clients) out.push_back(c->platform());
  return out;
}

}  // namespace

TEST_CASE("backends are sorted by priority at compile time, ties by declaration order", "[registry]") {
  using low = test_backend<"low", 1>;
  using high = test_backend<"high", 300>;
  using mid_a = test_backend<"mid_a", 100>;
  using mid_b = test_backend<"mid_b", 100>;
  using R = devtap::registry<low, mid_a, high, mid_b>;

  static_assert(R::names == std::array<sv, 4>{"high", "mid_a", "mid_b", "low"});
  static_assert(R::declared_names == std::array<sv, 4>{"low", "mid_a", "high", "mid_b"});
  static_assert(R::contains("mid_b") && !R::contains("nope"));
  // Reversing the tied pair reverses their order: ties follow declaration order, not names.
  static_assert(devtap::registry<mid_b, mid_a>::names == std::array<sv, 2>{"mid_b", "mid_a"});

  R r{""};
  CHECK(platforms_of(r.backends()) == std::vector<sv>{"high", "mid_a", "mid_b", "low"});
  CHECK(r.default_backend() == "high");
  CHECK(&r.get_backend() == &r.get_backend("high"));
}

TEST_CASE("nothing is created until asked, and get_backend(name) creates that backend only", "[registry]") {
  using a = test_backend<"lazy_a", 10>;
  using b = test_backend<"lazy_b", 20>;
  const int a0 = a::creates, b0 = b::creates;
  devtap::registry<a, b> r{""};
  CHECK(a::creates == a0);
  CHECK(b::creates == b0);

  devtap::client& first = r.get_backend("lazy_a");
  CHECK(first.platform() == "lazy_a");
  CHECK(a::creates == a0 + 1);
  CHECK(b::creates == b0);  // the other backend is untouched

  CHECK(&r.get_backend("lazy_a") == &first);  // the same client every time
  r.backends();
  r.backends();
  CHECK(a::creates == a0 + 1);
  CHECK(b::creates == b0 + 1);
}

TEST_CASE("an optional backend that fails is recorded and skipped", "[registry]") {
  log_capture log;
  using gpu = failing_backend<"gpu_fail", 200>;
  using cpu = test_backend<"cpu", 0, true>;
  const int g0 = gpu::creates;
  devtap::registry<cpu, gpu> r{""};

  CHECK(r.backend_errors().empty());  // an observer: tries nothing
  CHECK(platforms_of(r.backends()) == std::vector<sv>{"cpu"});
  CHECK(r.default_backend() == "cpu");
  const auto errors = r.backend_errors();
  REQUIRE(errors.size() == 1);
  CHECK(errors.at("gpu_fail") == "boom: gpu_fail");
  CHECK_THROWS_AS(r.get_backend("gpu_fail"), backend_error);
  CHECK_THROWS_WITH(r.get_backend("gpu_fail"), "Unable to initialize backend 'gpu_fail': boom: gpu_fail");
  CHECK(gpu::creates == g0 + 1);  // the failure is kept, never retried
  CHECK(log.count(log_level::info, "Unable to initialize backend 'gpu_fail': boom: gpu_fail") == 1);
}

TEST_CASE("a required backend that fails is rethrown by backends()", "[registry]") {
  using cpu = failing_backend<"cpu", 0, true>;
  using gpu = test_backend<"gpu_ok", 100>;
  const int c0 = cpu::creates;
  devtap::registry<cpu, gpu> r{""};
  CHECK_THROWS_WITH(r.backends(), "Unable to initialize backend 'cpu': boom: cpu");
  CHECK_THROWS_AS(r.backends(), backend_error);
  CHECK(cpu::creates == c0 + 1);
  CHECK(r.backend_errors().at("cpu") == "boom: cpu");
  CHECK(r.get_backend("gpu_ok").platform() == "gpu_ok");  // the others stay usable by name
}

TEST_CASE("a backend with no devices is skipped by backends() and refused by name", "[registry]") {
  log_capture log;
  using empty = test_backend<"empty", 500, false, 0>;
  using cpu = test_backend<"cpu", 0, true, 2>;
  devtap::registry<empty, cpu> r{""};
  CHECK(platforms_of(r.backends()) == std::vector<sv>{"cpu"});
  CHECK(r.default_backend() == "cpu");
  CHECK(r.device_count() == 2);
  CHECK(r.backend_errors().empty());  // not a failure
  CHECK_THROWS_WITH(r.get_backend("empty"), "Backend 'empty' provides no devices");
  CHECK_THROWS_WITH(r.devices("empty"), "Backend 'empty' provides no devices");
  CHECK(log.count(log_level::warn, fallback_warning) == 1);
}

TEST_CASE("a factory that returns no client is a recorded failure", "[registry]") {
  using nothing = test_backend<"nothing", 50, false, 1, behaviour::null>;
  using cpu = test_backend<"cpu", 0, true>;
  devtap::registry<nothing, cpu> r{""};
  CHECK(r.default_backend() == "cpu");
  CHECK(r.backend_errors().at("nothing") == "create() returned no client");
  CHECK_THROWS_WITH(r.get_backend("nothing"), "Unable to initialize backend 'nothing': create() returned no client");
}

TEST_CASE("a factory whose client lists a null device is a recorded failure, with debug logging on or off", "[registry]") {
  // (it crashed where debug logging named the devices, and elsewhere a receiver over every backend
  // said the user had passed a null device)
  const bool debug = GENERATE(false, true);
  std::optional<log_capture> log;
  if (debug) log.emplace();
  using holes = test_backend<"holes", 50, false, 1, behaviour::null_device>;
  using cpu = test_backend<"cpu", 0, true>;
  devtap::registry<holes, cpu> r{""};
  CHECK(r.default_backend() == "cpu");
  CHECK(r.backend_errors().at("holes") == "create() returned a client whose local_devices() holds a null device");
  CHECK_THROWS_WITH(r.get_backend("holes"), "Unable to initialize backend 'holes': create() returned a client whose "
                                            "local_devices() holds a null device");
}

TEST_CASE("a factory whose client lists a device twice, or that fails with control bytes and megabytes, is quoted safely", "[registry]") {
  using twice = test_backend<"twice", 50, false, 2, behaviour::device_twice>;
  using loud = test_backend<"loud", 40, false, 1, behaviour::fail_loudly>;
  using cpu = test_backend<"cpu", 0, true>;
  const log_capture quiet;  // (the fallback's warning)
  devtap::registry<twice, loud, cpu> r{""};
  CHECK(r.default_backend() == "cpu");  // (a receiver on every device used to blame its user's list)
  CHECK(r.backend_errors().at("twice") == "create() returned a client whose local_devices() lists device 'twice:0' twice");
  const std::string failure = r.backend_errors().at("loud");
  CHECK(failure.find('\x1b') == std::string::npos);  // it would have cleared the terminal in every error and log line
  CHECK_THAT(failure, Catch::StartsWith("\\x1b[2Jxxx") && Catch::Contains("100004 bytes"));
  CHECK(failure.size() < 2100);
  CHECK_THROWS_WITH(r.get_backend("loud"), Catch::StartsWith("Unable to initialize backend 'loud': \\x1b[2Jxxx"));
}

TEST_CASE("a log sink that asks for a backend another thread is starting is told, never waits for it", "[registry][log]") {
  // The other thread's start-up line waits for the sink's lock, so a sink that waited for that
  // start waited for ever (hostile helper, session 39).
  using first = test_backend<"sink_first", 2>;
  using second = test_backend<"sink_second", 1>;
  devtap::registry<first, second> r{""};
  const auto before = devtap::get_log_level();
  devtap::set_log_level(log_level::debug);
  std::future<std::size_t> other;
  std::vector<std::string> told;
  devtap::set_log_sink([&](log_level, std::string_view line) {
    if (line != "Initializing backend 'sink_first'") return;
    other = std::async(std::launch::async, [&r] { return r.device_count("sink_second"); });
    // Let the other thread take sink_second's start on, up to its line, which waits for this sink.
    // Should it come later, this sink starts sink_second itself and the test passes without the race.
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    try {
      told.emplace_back(std::to_string(r.devices("sink_second").size()));
    } catch (const backend_error& e) {
      told.emplace_back(e.what());
    }
  });
  auto mine = std::async(std::launch::async, [&r] { return r.device_count("sink_first"); });
  const bool finished = mine.wait_for(std::chrono::seconds(20)) == std::future_status::ready && other.valid() &&
                        other.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!finished) {  // the futures' destructors would hang too: the hang is the failure
    std::fprintf(stderr, "a log sink waited for a backend whose start-up line waits for the sink\n");
    std::_Exit(1);
  }
  devtap::set_log_sink({});
  devtap::set_log_level(before);
  CHECK(mine.get() == 1);
  CHECK(other.get() == 1);
  REQUIRE(told.size() == 1);
  if (told[0] != "1")
    CHECK(told[0] == "Backend 'sink_second' was asked for from a log sink while another thread starts it, whose start-up "
                     "lines wait for the sink");
  CHECK(second::creates == 1);
}

TEST_CASE("16 threads racing get_backend create exactly one client", "[registry][threads]") {
  using slow = test_backend<"slow", 10, false, 1, behaviour::slow>;
  using slow_fail = failing_backend<"slow_fail", 5>;
  const int s0 = slow::creates, f0 = slow_fail::creates;
  devtap::registry<slow, slow_fail> r{""};

  constexpr int n = 16;
  std::vector<devtap::client*> seen(n, nullptr);
  std::vector<int> failures(n, 0);
  std::latch start(n);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        seen[i] = &r.get_backend("slow");
        try {
          r.get_backend("slow_fail");
        } catch (const backend_error&) {
          failures[i] = 1;
        }
      });
  }
  CHECK(slow::creates == s0 + 1);
  CHECK(slow_fail::creates == f0 + 1);
  CHECK(std::set<devtap::client*>(seen.begin(), seen.end()).size() == 1);
  CHECK(seen[0] != nullptr);
  CHECK(std::count(failures.begin(), failures.end(), 1) == n);
}

TEST_CASE("threads racing backends() agree and warn once", "[registry][threads]") {
  log_capture log;
  using gpu = failing_backend<"gpu_race", 100>;
  using cpu = test_backend<"cpu", 0, true, 1, behaviour::slow>;
  devtap::registry<gpu, cpu> r{""};
  constexpr int n = 16;
  std::vector<std::string_view> defaults(n);
  std::latch start(n);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        defaults[i] = r.default_backend();
      });
  }
  CHECK(std::count(defaults.begin(), defaults.end(), "cpu") == n);
  CHECK(log.count(log_level::warn, fallback_warning) == 1);
}

TEST_CASE("unknown names list the known backends in declaration order", "[registry]") {
  devtap::registry<test_backend<"cpu", 0, true>, test_backend<"cuda", 200>> r{""};
  CHECK_THROWS_AS(r.get_backend("tpu"), backend_error);
  CHECK_THROWS_WITH(r.get_backend("tpu"), "Unknown backend 'tpu' (known: cpu, cuda)");
  CHECK_THROWS_WITH(r.devices("tpu"), "Unknown backend 'tpu' (known: cpu, cuda)");
  CHECK_THROWS_WITH(r.device_count("tpu"), "Unknown backend 'tpu' (known: cpu, cuda)");
  CHECK_THROWS_WITH(r.get_backend(""), "Unknown backend '' (known: cpu, cuda)");
  CHECK_THROWS_WITH(r.get_backend("CPU"), "Unknown backend 'CPU' (known: cpu, cuda)");  // names are exact
}

TEST_CASE("a platforms list restricts and orders the backends", "[registry][platforms]") {
  log_capture log;
  using cpu = test_backend<"cpu", 0, true>;
  using fast = test_backend<"fast", 300>;
  using gpu = failing_backend<"gpu_plat", 200>;
  using empty = test_backend<"none", 100, false, 0>;
  using R = devtap::registry<cpu, gpu, fast, empty>;

  SECTION("unset or blank: every backend, by priority") {
    for (sv text : {"", " ", ",", " , ", "\r\n", " ,\n", "\t,\r\n"}) {
      R r{text};
      CHECK(platforms_of(r.backends()) == std::vector<sv>{"fast", "cpu"});
    }
  }
  SECTION("names are case-insensitive; white space around the list and each name is ignored") {
    for (sv text : {"cpu,fast", "CPU,Fast", " Cpu ,\tFAST\r\n", "\r\n cpu\r\n,\r\nfast,\r\n"}) {
      INFO("DEVTAP_PLATFORMS='" << text << "'");
      R r{text};
      CHECK(platforms_of(r.backends()) == std::vector<sv>{"cpu", "fast"});
    }
    R r{" Fast \r\n"};
    CHECK_THROWS_WITH(r.get_backend("cpu"), "Backend 'cpu' is not enabled by DEVTAP_PLATFORMS=Fast");
  }
  SECTION("the list's order wins over priority") {
    R r{"cpu, fast"};
    CHECK(platforms_of(r.backends()) == std::vector<sv>{"cpu", "fast"});
    CHECK(r.default_backend() == "cpu");
    CHECK(log.count(log_level::warn, fallback_warning) == 0);  // the user asked for cpu
  }
  SECTION("backends not listed are never created, and refused by name") {
    const int g0 = gpu::creates;
    R r{"fast"};
    CHECK(platforms_of(r.backends()) == std::vector<sv>{"fast"});
    CHECK(gpu::creates == g0);
    CHECK_THROWS_WITH(r.get_backend("cpu"), "Backend 'cpu' is not enabled by DEVTAP_PLATFORMS=fast");
    CHECK_THROWS_WITH(r.get_backend("tpu"), "Unknown backend 'tpu' (known: cpu, gpu_plat, fast, none)");
  }
  SECTION("a name given twice is an error, whatever its case") {
    R same{"fast,cpu,fast"};
    CHECK_THROWS_WITH(same.backends(), "Backend 'fast' is named twice in DEVTAP_PLATFORMS='fast,cpu,fast'");
    CHECK_THROWS_AS(same.get_backend("cpu"), backend_error);
    R cased{"fast,cpu,FAST \n"};
    CHECK_THROWS_WITH(cased.backends(), "Backend 'fast' is named twice in DEVTAP_PLATFORMS='fast,cpu,FAST'");
  }
  SECTION("a listed backend that fails is an error, not a fallback") {
    R r{"gpu_plat,cpu"};
    CHECK_THROWS_WITH(r.backends(), "Unable to initialize backend 'gpu_plat': boom: gpu_plat");
    CHECK_THROWS_AS(r.get_backend(), backend_error);
    CHECK(r.get_backend("cpu").platform() == "cpu");  // by name, cpu still works
    CHECK(log.count(log_level::warn, fallback_warning) == 0);
  }
  SECTION("a listed backend without devices is an error") {
    R r{"none,cpu"};
    CHECK_THROWS_WITH(r.backends(), "Backend 'none' provides no devices");
  }
  SECTION("an unknown name in the list is reported by every call") {
    R r{"cpu,tpu"};
    const char* message = "Unknown backend 'tpu' in DEVTAP_PLATFORMS='cpu,tpu' (known: cpu, gpu_plat, fast, none)";
    CHECK_THROWS_WITH(r.backends(), message);
    CHECK_THROWS_WITH(r.get_backend("cpu"), message);
    CHECK_THROWS_WITH(r.default_backend(), message);
  }
  SECTION("the message shows the name as written, the list without its surrounding white space") {
    R r{" cpu, TPU \r\n"};
    CHECK_THROWS_WITH(r.backends(), "Unknown backend 'TPU' in DEVTAP_PLATFORMS='cpu, TPU' (known: cpu, gpu_plat, fast, none)");
  }
  SECTION("gpu is not an alias without a cuda backend") {
    R r{"gpu"};
    CHECK_THROWS_WITH(r.backends(), "Unknown backend 'gpu' in DEVTAP_PLATFORMS='gpu' (known: cpu, gpu_plat, fast, none; "
                                    "devtap's cuda backend is built in only with DEVTAP_WITH_CUDA, which the devtap-cuda "
                                    "dependency defines)");
    CHECK_THROWS_WITH(R{""}.get_backend("cuda"), "Unknown backend 'cuda' (known: cpu, gpu_plat, fast, none; devtap's cuda "
                                             "backend is built in only with DEVTAP_WITH_CUDA, which the devtap-cuda "
                                             "dependency defines)");
    // get_backend takes exact names: "CUDA" or "gpu" would not be found with cuda built in either.
    CHECK_THROWS_WITH(R{""}.get_backend("CUDA"), "Unknown backend 'CUDA' (known: cpu, gpu_plat, fast, none)");
    CHECK_THROWS_WITH(R{""}.get_backend("cud"), "Unknown backend 'cud' (known: cpu, gpu_plat, fast, none)");
  }
}

TEST_CASE("gpu in a platforms list means cuda", "[registry][platforms]") {
  using cpu = test_backend<"cpu", 0, true>;
  using cuda = test_backend<"cuda", 200>;
  using R = devtap::registry<cpu, cuda>;
  for (sv text : {"gpu,cpu", "GPU, cpu", "Gpu"}) {
    R r{text};
    CHECK(r.default_backend() == "cuda");
  }
  R r{"cpu,gpu"};
  CHECK(platforms_of(r.backends()) == std::vector<sv>{"cpu", "cuda"});
  R twice{"gpu,cuda"};
  CHECK_THROWS_WITH(twice.backends(), "Backend 'cuda' is named twice in DEVTAP_PLATFORMS='gpu,cuda'");
  // A backend really named "gpu" is taken by its name, not as the alias.
  devtap::registry<cpu, cuda, test_backend<"gpu", 100>> named{"gpu"};
  CHECK(named.default_backend() == "gpu");
  // get_backend takes exact names only, as before.
  CHECK_THROWS_WITH(R{""}.get_backend("gpu"), "Unknown backend 'gpu' (known: cpu, cuda)");
}

TEST_CASE("the fallback warning: once, and only when the user did not ask for cpu", "[registry][warning]") {
  using cpu = test_backend<"cpu", 0, true>;
  using gpu = failing_backend<"gpu_warn", 200>;
  using good_gpu = test_backend<"gpu_good", 200>;

  SECTION("default cpu after a failed gpu: one warning however often asked") {
    log_capture log;
    devtap::registry<cpu, gpu> r{""};
    r.backends();
    r.backends();
    r.get_backend();
    CHECK(r.default_backend() == "cpu");
    CHECK(log.count(log_level::warn, fallback_warning) == 1);
    CHECK(log.lines(log_level::warn).size() == 1);
  }
  SECTION("get_backend(\"cpu\") first counts as asking for cpu") {
    log_capture log;
    devtap::registry<cpu, gpu> r{""};
    r.get_backend("cpu");
    r.backends();
    CHECK(log.count(log_level::warn, fallback_warning) == 0);
  }
  SECTION("no warning when a gpu is the default") {
    log_capture log;
    devtap::registry<cpu, good_gpu> r{""};
    CHECK(r.default_backend() == "gpu_good");
    CHECK(log.count(log_level::warn, fallback_warning) == 0);
  }
  SECTION("no warning from a registry without a cpu backend") {
    log_capture log;
    devtap::registry<test_backend<"solo", 5>> r{""};
    CHECK(r.default_backend() == "solo");
    CHECK(log.lines(log_level::warn).empty());
  }
  SECTION("no warning from a registry of cpu alone: no GPU backend was compiled in") {
    log_capture log;
    devtap::registry<cpu> r{""};
    CHECK(r.default_backend() == "cpu");
    r.backends();
    CHECK(log.lines(log_level::warn).empty());
  }
  SECTION("the warning's whole text says where to look") {
    log_capture log;
    devtap::registry<cpu, gpu> r{""};
    r.backends();
    CHECK(log.lines(log_level::warn) ==
          std::vector<std::string>{"No GPU found, falling back to CPU; set DEVTAP_LOG=info or call "
                                   "devtap::backend_errors() to see why"});
  }
}

TEST_CASE("a backend is named at debug level before its create() runs", "[registry][log]") {
  log_capture log;
  using talker = test_backend<"talker", 10, false, 1, behaviour::logs>;
  using broken = failing_backend<"broken", 5>;
  devtap::registry<talker, broken> r{""};
  r.get_backend("talker");
  // A factory that hangs is named by the last line before the hang.
  CHECK(log.lines(log_level::debug) ==
        std::vector<std::string>{"Initializing backend 'talker'", "create() of talker runs",
                                 "Initialized backend talker: process_index 0, device_count 1, local_devices [talker:0]"});
  r.backends();
  r.backends();
  CHECK(log.count(log_level::debug, "Initializing backend 'talker'") == 1);  // once per backend
  CHECK(log.count(log_level::debug, "Initializing backend 'broken'") == 1);  // failing ones too
  CHECK(log.count(log_level::info, "Unable to initialize backend 'broken': boom: broken") == 1);
}

TEST_CASE("each initialisation logs platform, process index, device count and devices", "[registry][log]") {
  log_capture log;
  devtap::registry<test_backend<"trio", 1, false, 3>> r{""};
  r.get_backend("trio");
  r.backends();
  CHECK(log.count(log_level::debug,
                  "Initialized backend trio: process_index 0, device_count 3, local_devices [trio:0, trio:1, trio:2]") == 1);
}

TEST_CASE("free-function mirrors: devices, device_count, process_index", "[registry]") {
  devtap::registry<test_backend<"pair", 7, true, 2>> r{""};
  CHECK(r.device_count("pair") == 2);
  CHECK(r.device_count() == 2);
  REQUIRE(r.devices("pair").size() == 2);
  CHECK(r.devices()[1]->name() == "pair:1");
  CHECK(r.devices()[1]->id() == 1);
  CHECK(r.devices()[1]->platform() == "pair");
  CHECK(r.process_index() == 0);
  CHECK(r.process_index("pair") == 0);
}

TEST_CASE("no backend usable: get_backend() says why", "[registry]") {
  devtap::registry<failing_backend<"only", 1>> r{""};
  CHECK(r.backends().empty());
  CHECK_THROWS_WITH(r.get_backend(), "No backend could be initialized (errors: only: boom: only)");
  // A backend without devices is no failure, but it is why none is usable: said, and logged at info.
  log_capture log;
  devtap::registry<test_backend<"hollow", 5, false, 0>, failing_backend<"only", 1>> two{""};
  CHECK_THROWS_WITH(two.get_backend(), "No backend could be initialized (errors: hollow: provides no devices; only: boom: only)");
  CHECK(two.backend_errors().size() == 1);  // (the failures only, as documented)
  CHECK(log.count(log_level::info, "Backend 'hollow' provides no devices") == 1);
}

TEST_CASE("the fallback warning needs a backend ranked above cpu that cannot be used", "[registry][warning]") {
  log_capture log;
  using below = test_backend<"below", -10>;  // works, but cpu outranks it: cpu is the default anyway
  devtap::registry<test_backend<"cpu", 0, true>, below> r{""};
  CHECK(r.default_backend() == "cpu");
  CHECK(platforms_of(r.backends()) == std::vector<sv>{"cpu", "below"});
  CHECK(log.lines(log_level::warn).empty());
  devtap::registry<test_backend<"cpu", 0, true>, below, failing_backend<"above", 10>> with_failure{""};
  CHECK(with_failure.default_backend() == "cpu");
  CHECK(log.count(log_level::warn, fallback_warning) == 1);
}

namespace malformed {

struct no_create {
  static constexpr std::string_view name = "x";
  static constexpr int priority = 0;
  static constexpr bool required = false;
};
struct runtime_name {
  static inline std::string_view name = "x";  // not a constant
  static constexpr int priority = 0;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};
struct empty_name {
  static constexpr std::string_view name = "";
  static constexpr int priority = 0;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};
struct int_required {
  static constexpr std::string_view name = "x";
  static constexpr int priority = 0;
  static constexpr int required = 1;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};

}  // namespace malformed

TEST_CASE("backend_policy accepts well-formed policies and rejects malformed ones", "[registry][policy]") {
  static_assert(devtap::backend_policy<test_backend<"ok", 1>>);
  static_assert(devtap::check_backend_policy<test_backend<"ok", 1>>());
  static_assert(!devtap::backend_policy<malformed::no_create>);
  static_assert(!devtap::backend_policy<malformed::runtime_name>);
  static_assert(!devtap::backend_policy<malformed::empty_name>);
  static_assert(!devtap::backend_policy<malformed::int_required>);
  static_assert(!devtap::backend_policy<int>);
  SUCCEED();
}

namespace {
struct reentrant_backend;
devtap::registry<reentrant_backend, test_backend<"plain", 0>>* reentered = nullptr;
/** A backend whose create() asks its own registry for every backend: its own once is taken again. */
struct reentrant_backend {
  static constexpr std::string_view name = "reentrant";
  static constexpr int priority = 100;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() {
    (void)reentered->backends();  // throws: this backend is being initialised on this thread
    return std::make_unique<fake_client>(name, 1);
  }
};
}  // namespace

TEST_CASE("a backend asked for by its own create() fails with a clear error instead of waiting for itself", "[registry]") {
  log_capture log;
  devtap::registry<reentrant_backend, test_backend<"plain", 0>> r{""};
  reentered = &r;
  CHECK(platforms_of(r.backends()) == std::vector<sv>{"plain"});  // (it used to hang here, in call_once)
  reentered = nullptr;
  CHECK(r.backend_errors().at("reentrant") ==
        "Backend 'reentrant' was asked for during its own initialisation (from its create(), or a log sink it logged to)");
  CHECK_THROWS_WITH(r.get_backend("reentrant"), Catch::Contains("was asked for during its own initialisation"));
}

TEST_CASE("a log sink that asks for a backend while it is being initialised does not hang", "[registry][log]") {
  using talker = test_backend<"talker_sink", 10>;
  devtap::registry<talker> r{""};
  const auto before = devtap::get_log_level();
  devtap::set_log_level(log_level::debug);
  std::vector<std::string> refused;
  devtap::set_log_sink([&](log_level, std::string_view line) {
    if (line.find("Initializing backend") == std::string_view::npos) return;
    try {
      (void)r.get_backend("talker_sink");
    } catch (const backend_error& e) {
      refused.emplace_back(e.what());
    }
  });
  CHECK(r.get_backend("talker_sink").device_count() == 1);  // the backend itself starts
  devtap::set_log_sink({});
  devtap::set_log_level(before);
  REQUIRE(refused.size() == 1);
  CHECK_THAT(refused[0], Catch::Contains("'talker_sink' was asked for during its own initialisation"));
}

namespace {

std::atomic<bool> herald_going{false};  // set when herald's client is destroyed

class herald_client final : public devtap::client {
public:
  ~herald_client() override { herald_going.store(true); }
  std::string_view platform() const noexcept override { return "herald"; }
  int process_index() const noexcept override { return 0; }
  std::span<devtap::device* const> local_devices() const noexcept override { return {&view_, 1}; }

private:
  fake_device device_{0, "herald"};
  devtap::device* view_ = &device_;
};

struct herald_backend {
  static constexpr std::string_view name = "herald";
  static constexpr int priority = 0;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return std::make_unique<herald_client>(); }
};

}  // namespace

TEST_CASE("work queued on a registry's device that asks the registry while it is destroyed is told so", "[registry][lifetime]") {
  // The registry destroys its clients last declared first: herald's destructor marks the moment
  // ~registry() has begun, before cpu's client runs the work still queued on its device.
  herald_going = false;
  std::string asked, errors;
  {
    devtap::registry<devtap::cpu_backend, herald_backend> r{""};
    r.get_backend("herald");
    devtap::cpu_device& d = *devtap::as_cpu_client(r.get_backend("cpu")).cpu_devices()[0];
    d.submit([&r, &asked, &errors] {
      for (int i = 0; i < 10'000 && !herald_going.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      try {
        r.devices("cpu");
        asked = "answered";
      } catch (const backend_error& e) {
        asked = e.what();
      }
      try {
        r.backend_errors();
        errors = "answered";
      } catch (const backend_error& e) {
        errors = e.what();
      }
    });
  }
  CHECK(herald_going.load());
  CHECK(asked == "devtap::registry of backends cpu, herald is being destroyed");
  CHECK(errors == asked);
}

namespace {
struct second_cpu_backend {  // a second client with its own threads, asked for by the first's work
  static constexpr std::string_view name = "cpu2";
  static constexpr int priority = 0;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return std::make_unique<devtap::cpu_client>(1); }
};
}  // namespace

TEST_CASE("a registry waits for the calls under way before it destroys a client they may be reading", "[registry][lifetime]") {
  // Before, a call that had passed the "being destroyed" check read a client as it was reset (a
  // null client, SEGV), 5 runs in 5. Every call now ends before any client goes, or is refused.
  for (int run = 0; run < 20; ++run) {
    std::atomic<int> answered{0};
    std::atomic<bool> stopped{false};
    std::string refused;
    {
      devtap::registry<devtap::cpu_backend, second_cpu_backend> r{""};
      r.get_backend("cpu2");
      devtap::cpu_device& d = *devtap::as_cpu_client(r.get_backend("cpu")).cpu_devices()[0];
      d.submit([&r, &answered, &stopped, &refused] {
        try {
          for (;;) {
            answered += static_cast<int>(r.device_count("cpu2"));
            if (r.devices("cpu2").size() != 1) throw std::logic_error("a wrong device count");  // (caught below)
          }
        } catch (const std::exception& e) {
          refused = e.what();
          stopped = true;
        }
      });
      while (answered.load() == 0 && !stopped.load()) std::this_thread::yield();
    }
    CHECK(refused == "devtap::registry of backends cpu, cpu2 is being destroyed");
  }
}

namespace {
/** Asks `other` for `other_name` once both create()s have begun, so both run at once (a fixed sleep
 *  let a thread that started late find the other backend already started by the first); keeps
 *  what it is told. */
template <class Registry>
std::unique_ptr<devtap::client> ask_once_both_begun(std::string_view self, Registry* other, std::string_view other_name,
                                                    std::atomic<int>& begun, std::mutex& told_mutex,
                                                    std::vector<std::string>& told) {
  ++begun;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (begun < 2 && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  try {
    (void)other->get_backend(other_name);
  } catch (const backend_error& e) {
    std::lock_guard lock(told_mutex);
    told.emplace_back(e.what());
  }
  return std::make_unique<fake_client>(self, 1);
}
}  // namespace

namespace {
struct ring_a;
struct ring_b;
devtap::registry<ring_a, ring_b>* ring_registry = nullptr;
std::mutex ring_refusals_mutex;
std::vector<std::string> ring_refusals;  // what the create()s were told
std::atomic<int> ring_creates_begun{0};
std::unique_ptr<devtap::client> ask_for(std::string_view self, std::string_view other);
struct ring_a {
  static constexpr std::string_view name = "ring_a";
  static constexpr int priority = 2;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return ask_for(name, "ring_b"); }
};
struct ring_b {
  static constexpr std::string_view name = "ring_b";
  static constexpr int priority = 1;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return ask_for(name, "ring_a"); }
};
std::unique_ptr<devtap::client> ask_for(std::string_view self, std::string_view other) {
  return ask_once_both_begun(self, ring_registry, other, ring_creates_begun, ring_refusals_mutex, ring_refusals);
}
}  // namespace

namespace {
struct cross_a;
struct cross_b;
devtap::registry<cross_a>* cross_registry_a = nullptr;
devtap::registry<cross_b>* cross_registry_b = nullptr;
std::atomic<int> cross_creates_begun{0};
std::mutex cross_refusals_mutex;
std::vector<std::string> cross_refusals;
template <class Registry>
std::unique_ptr<devtap::client> ask_across(std::string_view self, Registry* other, std::string_view other_name) {
  return ask_once_both_begun(self, other, other_name, cross_creates_begun, cross_refusals_mutex, cross_refusals);
}
struct cross_a {
  static constexpr std::string_view name = "cross_a";
  static constexpr int priority = 0;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create();
};
struct cross_b {
  static constexpr std::string_view name = "cross_b";
  static constexpr int priority = 0;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create();
};
std::unique_ptr<devtap::client> cross_a::create() { return ask_across(name, cross_registry_b, "cross_b"); }
std::unique_ptr<devtap::client> cross_b::create() { return ask_across(name, cross_registry_a, "cross_a"); }
}  // namespace

// Each registry saw only its own waits, so the two threads waited for each other for ever (hostile
// helper, session 39): the waits are the process's now.
TEST_CASE("two registries whose create()s ask each other's, on two threads, do not wait for each other", "[registry][threads]") {
  devtap::registry<cross_a> a{""};
  devtap::registry<cross_b> b{""};
  cross_registry_a = &a;
  cross_registry_b = &b;
  auto fa = std::async(std::launch::async, [&a] { return a.get_backend("cross_a").device_count(); });
  auto fb = std::async(std::launch::async, [&b] { return b.get_backend("cross_b").device_count(); });
  const bool finished = fa.wait_for(std::chrono::seconds(20)) == std::future_status::ready &&
                        fb.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!finished) {  // the futures' destructors would hang too: the hang is the failure
    std::fprintf(stderr, "two registries' create()s waited for each other\n");
    std::_Exit(1);
  }
  CHECK(fa.get() == 1);
  CHECK(fb.get() == 1);
  REQUIRE(cross_refusals.size() == 1);
  CHECK_THAT(cross_refusals[0], Catch::Contains("was asked for during its own initialisation, by the create() of backend 'cross_") &&
                                    Catch::Contains("on another thread, which it waits for: their create()s ask for each other"));
}

TEST_CASE("a platforms list's control and non-ASCII bytes are shown as \\xNN in its errors", "[registry][platforms]") {
  devtap::registry<test_backend<"plain", 0>> bad{"plain,\x01"};
  CHECK_THROWS_WITH(bad.backends(), "Unknown backend '\\x01' in DEVTAP_PLATFORMS='plain,\\x01' (known: plain)");
  devtap::registry<test_backend<"plain", 0>> spaced{"plain\xc2\xa0"};  // a no-break space is no white space
  CHECK_THROWS_WITH(spaced.backends(), Catch::StartsWith("Unknown backend 'plain\\xc2\\xa0' in DEVTAP_PLATFORMS="));
  devtap::registry<test_backend<"plain", 0>> fine{""};
  CHECK_THROWS_WITH(fine.get_backend("\x1b[2J"), Catch::StartsWith("Unknown backend '\\x1b[2J' (known: plain"));
}

// Before, each thread waited in call_once for the backend the other initialised, for ever (hostile
// helper, session 35): one of them is now told, and both backends start.
TEST_CASE("two create()s on two threads that ask for each other's backend do not wait for each other", "[registry][threads]") {
  devtap::registry<ring_a, ring_b> r{""};
  ring_registry = &r;
  ring_creates_begun = 0;
  auto a = std::async(std::launch::async, [&r] { return r.get_backend("ring_a").device_count(); });
  auto b = std::async(std::launch::async, [&r] { return r.get_backend("ring_b").device_count(); });
  const bool finished = a.wait_for(std::chrono::seconds(20)) == std::future_status::ready &&
                        b.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  REQUIRE(finished);  // (else this test hangs in the futures' destructors, and ctest's timeout names it)
  CHECK(a.get() == 1);
  CHECK(b.get() == 1);
  ring_registry = nullptr;
  REQUIRE(ring_refusals.size() == 1);
  CHECK_THAT(ring_refusals[0], Catch::Contains("was asked for during its own initialisation, by the create() of backend") &&
                                   Catch::Contains("on another thread, which it waits for: their create()s ask for each other"));
}
