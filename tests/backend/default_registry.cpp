// The process-wide registry through the free functions. Each case is its own `meson test` (hidden
// tag, own process, own environment: see meson.build), because the registry lives once per process.
#include "test_backends.hpp"

#include <devtap/backend.hpp>
#include <devtap/receiver.hpp>

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(DEVTAP_WITH_CUDA)
#include <cuda_runtime_api.h>
#endif

using devtap::backend_error;
using devtap::log_level;
using devtap_test::fallback_warning;
using devtap_test::log_capture;

namespace {

#if defined(DEVTAP_WITH_CUDA)
constexpr const char* known = "cpu, cuda";
/** cudaSuccess with at least one GPU, or the error cudaGetDeviceCount reports. */
cudaError_t gpu_status() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  return status == cudaSuccess && n == 0 ? cudaErrorNoDevice : status;
}
/** The whole reason the cuda backend records for `status`: the CUDA part is the runtime's own text
 *  (it differs between machines and CUDA versions), so it is asked from the runtime here. */
std::string cuda_failure(cudaError_t status) {
  return std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status) + " (" + cudaGetErrorName(status) +
         ", code " + std::to_string(static_cast<int>(status)) + ")";
}
#else
constexpr const char* known = "cpu";
#endif

}  // namespace

TEST_CASE("default registry: without a GPU, the cuda failure is recorded and cpu is used, with one warning",
          "[.default]") {
  log_capture log;  // before the first use, so the registry's lines are captured
  auto all = devtap::backends();
  devtap::backends();
  devtap::get_backend();
  REQUIRE(!all.empty());
#if defined(DEVTAP_WITH_CUDA)
  const cudaError_t status = gpu_status();
  if (status == cudaSuccess) {  // a machine with a GPU: cuda is the default, no warning
    CHECK(devtap::default_backend() == "cuda");
    CHECK(all.size() == 2);
    CHECK(devtap::backend_errors().empty());
    CHECK(log.count(log_level::warn, fallback_warning) == 0);
    auto& gpu = dynamic_cast<devtap::cuda_device&>(*devtap::devices("cuda")[0]);
    CHECK(gpu.compute_capability_major() >= 7);
    CHECK(gpu.total_memory() > 0);
    CHECK(!gpu.host_can_tap());
    return;
  }
  // The fallback is right only where there is nothing to run on: with a driver present, CUDA failing
  // is an error of this machine, and this GPU case must fail rather than pass on cpu.
  const devtap::cuda_availability probe = devtap::probe_cuda();
  INFO("probe_cuda: " << probe.reason);
  REQUIRE(probe.nothing_to_run_on());
  const auto errors = devtap::backend_errors();
  REQUIRE(errors.count("cuda") == 1);
  const std::string& reason = errors.at("cuda");
  INFO("recorded: " << reason);
  CHECK_THAT(reason, Catch::Equals(cuda_failure(status)));
  CHECK_THROWS_WITH(devtap::get_backend("cuda"), "Unable to initialize backend 'cuda': " + reason);
  CHECK(log.count(log_level::info, "Unable to initialize backend 'cuda': " + reason) == 1);
  CHECK(log.count(log_level::warn, fallback_warning) == 1);
  CHECK(log.lines(log_level::warn).size() == 1);
#else
  CHECK(log.lines(log_level::warn).empty());  // no GPU backend compiled in: nothing to fall back from
#endif
  CHECK(devtap::default_backend() == "cpu");
  CHECK(all.size() == 1);
  CHECK(all.front()->platform() == "cpu");
  CHECK(log.count(log_level::debug, "Initializing backend 'cpu'") == 1);
  CHECK(devtap::process_count() == 1);
  CHECK(log.count(log_level::debug,
                  "Initialized backend cpu: process_index 0, device_count 1, local_devices [cpu:0]") == 1);
  // Work runs on the fallback.
  CHECK(devtap::cpu_devices()[0]->run([](devtap::cpu_context& ctx) { return ctx.device().id(); }) == 0);
  CHECK_THROWS_WITH(devtap::get_backend("tpu"), std::string("Unknown backend 'tpu' (known: ") + known + ")");
}

TEST_CASE("default registry: asking for cpu first means no warning", "[.asked]") {
  log_capture log;
  CHECK(devtap::device_count("cpu") == 1);
  const auto name = devtap::default_backend();
  CHECK((name == "cpu" || name == "cuda"));
  CHECK(log.count(log_level::warn, fallback_warning) == 0);
}

TEST_CASE("default registry: asked from a static destructor, after this thread's calls", "[.at_exit]") {
  // Before, the registry's per-thread list of calls under way was a thread_local vector, destroyed
  // before static destructors: a call from one wrote into its freed buffer (ASan: use after free).
  CHECK(devtap::device_count() >= 1);
  static struct asker {
    ~asker() {
      if (devtap::device_count() < 1) std::abort();  // (no Catch here: it is gone)
    }
  } at_exit;
  (void)at_exit;
}

TEST_CASE("default registry: DEVTAP_CPU_DEVICES=3", "[.cpu3]") {
  REQUIRE(std::string_view(std::getenv("DEVTAP_CPU_DEVICES")) == "3");
  CHECK(devtap::device_count("cpu") == 3);
  auto devs = devtap::cpu_devices();
  REQUIRE(devs.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(devs[i]->name() == "cpu:" + std::to_string(i));
    CHECK(devs[i]->run([](devtap::cpu_context& ctx) { return ctx.device().id(); }) == static_cast<int>(i));
  }
  // A backend named twice names the backend (its first device would otherwise be "listed twice").
  CHECK_THROWS_WITH(devtap::receiver({.backends = {"cpu", "cpu"}, .name = "twice"}),
                    "devtap: receiver 'twice': backend 'cpu' is listed twice");
  // A name the registry does not know: its message, said to come from the receiver's options.
  CHECK_THROWS_AS(devtap::receiver({.backends = {"CPU "}, .name = "odd"}), devtap::backend_error);
  CHECK_THROWS_WITH(devtap::receiver({.backends = {"cp\x01u"}, .name = "odd"}),
                    Catch::StartsWith("devtap: receiver 'odd': receiver_options.backends: Unknown backend 'cp\\x01u' (known: "));
  devtap::receiver rx({.backends = {"cpu"}, .name = "once"});  // the failed one left every device free
  CHECK(rx.devices().size() == 3);
}

TEST_CASE("default registry: a malformed DEVTAP_CPU_DEVICES is a clear error", "[.badcpu]") {
  const std::string message =
      "Unable to initialize backend 'cpu': DEVTAP_CPU_DEVICES='lots' is not a valid device count "
      "(expected an integer from 1 to 1024)";
  CHECK_THROWS_WITH(devtap::backends(), message);  // cpu is required: rethrown
  CHECK_THROWS_WITH(devtap::get_backend("cpu"), message);
  CHECK_THROWS_AS(devtap::get_backend(), backend_error);
  // The failure is kept: a count set now could never take effect, and says so.
  CHECK_THROWS_WITH(devtap::set_cpu_device_count(2),
                    Catch::Equals("devtap::set_cpu_device_count(2) after the cpu backend failed to start (DEVTAP_CPU_DEVICES='lots' "
                                  "is not a valid device count (expected an integer from 1 to 1024)); its failure is kept"));
}

// A sanitizer's runtime reserves terabytes of address space: an address-space limit cannot be set there.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEVTAP_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define DEVTAP_TEST_SANITIZED 1
#endif
#endif

TEST_CASE("default registry: cpu devices whose threads cannot start are a kept, named failure", "[.cpu_threads_fail]") {
  REQUIRE(std::string_view(std::getenv("DEVTAP_CPU_DEVICES")) == "1024");
#if defined(DEVTAP_TEST_SANITIZED)
  WARN("not run under a sanitizer (its runtime needs more address space than the limit this test sets)");
#else
  // Room for this process and a few threads, not for 1024 thread stacks (8 MiB each by default).
  pthread_attr_t defaults;
  std::size_t stack = 0;
  REQUIRE(pthread_getattr_default_np(&defaults) == 0);
  pthread_attr_getstacksize(&defaults, &stack);
  pthread_attr_destroy(&defaults);
  const rlim_t headroom = rlim_t{256} << 20;
  if (1024 * static_cast<rlim_t>(stack) <= 2 * headroom) {
    WARN("not run: threads of " << stack << " bytes of stack would all fit in the address space this test leaves");
    return;
  }
  unsigned long pages = 0;
  if (std::FILE* statm = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(statm, "%lu", &pages) != 1) pages = 0;
    std::fclose(statm);
  }
  REQUIRE(pages > 0);
  rlimit before{};
  REQUIRE(getrlimit(RLIMIT_AS, &before) == 0);
  rlimit limited = before;
  limited.rlim_cur = pages * static_cast<rlim_t>(::sysconf(_SC_PAGESIZE)) + headroom;
  REQUIRE(setrlimit(RLIMIT_AS, &limited) == 0);
  std::string failure;
  try {
    devtap::get_backend("cpu");
  } catch (const backend_error& e) {
    failure = e.what();
  }
  REQUIRE(setrlimit(RLIMIT_AS, &before) == 0);
  INFO(failure);
  CHECK(failure.rfind("Unable to initialize backend 'cpu': the cpu backend could not start its 1024 device(s): ", 0) == 0);
  // Before, the count was published first: set_cpu_device_count said the backend had 1024 devices.
  try {
    devtap::set_cpu_device_count(2);
    FAIL("set_cpu_device_count after a failed start did not throw");
  } catch (const std::logic_error& e) {
    CHECK(std::string_view(e.what()).find("after the cpu backend failed to start (the cpu backend could not start its "
                                          "1024 device(s): ") != std::string_view::npos);
  }
  CHECK_THROWS_WITH(devtap::get_backend("cpu"), failure);  // kept
#endif
}

TEST_CASE("default registry: DEVTAP_PLATFORMS=cpu uses cpu only, silently", "[.platforms_cpu]") {
  log_capture log;
  CHECK(devtap::default_backend() == "cpu");
  CHECK(devtap::backends().size() == 1);
  CHECK(devtap::backend_errors().empty());  // cuda was never tried
  CHECK(log.lines(log_level::warn).empty());
#if defined(DEVTAP_WITH_CUDA)
  CHECK_THROWS_WITH(devtap::get_backend("cuda"), "Backend 'cuda' is not enabled by DEVTAP_PLATFORMS=cpu");
#endif
}

TEST_CASE("default registry: DEVTAP_PLATFORMS=cuda,cpu without a GPU is an error", "[.platforms_cuda]") {
#if defined(DEVTAP_WITH_CUDA)
  const cudaError_t status = gpu_status();
  if (status == cudaSuccess) {
    CHECK(devtap::default_backend() == "cuda");
    return;
  }
  CHECK_THROWS_WITH(devtap::backends(), "Unable to initialize backend 'cuda': " + cuda_failure(status));
  CHECK_THROWS_AS(devtap::get_backend(), backend_error);
  CHECK(devtap::get_backend("cpu").platform() == "cpu");
#else
  CHECK_THROWS_WITH(devtap::backends(), "Unknown backend 'cuda' in DEVTAP_PLATFORMS='cuda,cpu' (known: cpu; devtap's cuda backend is built "
                    "in only with DEVTAP_WITH_CUDA, which the devtap-cuda dependency defines)");
#endif
}

TEST_CASE("default registry: DEVTAP_PLATFORMS=gpu,cpu: gpu means cuda", "[.platforms_gpu]") {
#if defined(DEVTAP_WITH_CUDA)
  const cudaError_t status = gpu_status();
  if (status == cudaSuccess) {
    CHECK(devtap::default_backend() == "cuda");
    return;
  }
  CHECK_THROWS_WITH(devtap::backends(), "Unable to initialize backend 'cuda': " + cuda_failure(status));
  CHECK(devtap::get_backend("cpu").platform() == "cpu");
#else
  CHECK_THROWS_WITH(devtap::backends(), "Unknown backend 'gpu' in DEVTAP_PLATFORMS='gpu,cpu' (known: cpu; devtap's cuda backend is built "
                    "in only with DEVTAP_WITH_CUDA, which the devtap-cuda dependency defines)");
#endif
}

TEST_CASE("default registry: DEVTAP_PLATFORMS=' Cpu ,<CR><LF>' means cpu", "[.platforms_spaces]") {
  log_capture log;
  CHECK(devtap::default_backend() == "cpu");
  CHECK(devtap::backends().size() == 1);
  CHECK(devtap::backend_errors().empty());
  CHECK(log.lines(log_level::warn).empty());
#if defined(DEVTAP_WITH_CUDA)
  CHECK_THROWS_WITH(devtap::get_backend("cuda"), "Backend 'cuda' is not enabled by DEVTAP_PLATFORMS=Cpu ,");
#endif
}

TEST_CASE("default registry: DEVTAP_PLATFORMS=cpu,cpu is an error", "[.platforms_twice]") {
  CHECK_THROWS_WITH(devtap::backends(), "Backend 'cpu' is named twice in DEVTAP_PLATFORMS='cpu,cpu'");
  CHECK_THROWS_AS(devtap::get_backend("cpu"), backend_error);
}

TEST_CASE("default registry: an unknown name in DEVTAP_PLATFORMS", "[.platforms_unknown]") {
  CHECK_THROWS_WITH(devtap::backends(),
                    std::string("Unknown backend 'tpu' in DEVTAP_PLATFORMS='cpu,tpu' (known: ") + known + ")");
  CHECK_THROWS_AS(devtap::get_backend("cpu"), backend_error);
}

TEST_CASE("default registry: an unknown DEVTAP_LOG warns once, through the logger", "[.log_unknown]") {
  REQUIRE(std::string_view(std::getenv("DEVTAP_LOG")) == "loud");
  CHECK(devtap::get_log_level() == log_level::warn);  // what an unknown value means
  log_capture log;  // before devtap's first line, so the warning reaches this sink
  devtap::get_backend("cpu");
  devtap::backends();
  devtap::log(log_level::warn, "a line of {} own", "our");
  const std::vector<std::string> warnings = log.lines(log_level::warn);
  REQUIRE(!warnings.empty());
  CHECK(warnings.front() ==
        "DEVTAP_LOG='loud' is not a log level (expected debug, info, warn, error or off); using warn");
  CHECK(log.count(log_level::warn, warnings.front()) == 1);
  CHECK(warnings.back() == "a line of our own");
}

TEST_CASE("default registry: process index from the launcher", "[.slurm]") {
  CHECK(devtap::get_backend("cpu").process_index() == 2);
  CHECK(devtap::as_cpu_client(devtap::get_backend("cpu")).process_count() == 4);
  CHECK(devtap::devices("cpu")[0]->process_index() == 2);
  CHECK(devtap::process_index() == 2);
  CHECK(devtap::process_index("cpu") == 2);
  CHECK_THROWS_AS(devtap::process_index("tpu"), devtap::backend_error);
  CHECK(devtap::process_count() == 4);
}

TEST_CASE("default registry: the cpu device count set in code", "[.configured]") {
  CHECK_THROWS_WITH(devtap::set_cpu_device_count(0),
                    Catch::Equals("devtap::set_cpu_device_count(0): expected 1 to 1024"));
  CHECK_THROWS_AS(devtap::set_cpu_device_count(1025), std::invalid_argument);
  devtap::set_cpu_device_count(3);
  CHECK(devtap::device_count("cpu") == 3);
  CHECK_THROWS_WITH(devtap::set_cpu_device_count(2),
                    Catch::Equals("devtap::set_cpu_device_count(2) after the cpu backend was created with 3 device(s); "
                                  "call it before the first use of devtap's backends"));
  CHECK(devtap::device_count("cpu") == 3);
}

TEST_CASE("default registry: DEVTAP_CPU_DEVICES wins over the count set in code", "[.configured_env]") {
  REQUIRE(std::string_view(std::getenv("DEVTAP_CPU_DEVICES")) == "2");
  devtap::set_cpu_device_count(3);
  CHECK(devtap::device_count("cpu") == 2);
}

TEST_CASE("default registry: the platforms list set in code", "[.platforms_code]") {
  devtap::set_platforms(" cpu ");
  devtap::set_platforms("cpu");  // again, before first use: the last one counts
  CHECK(devtap::default_backend() == "cpu");
  CHECK(devtap::backends().size() == 1);
  CHECK(devtap::backend_errors().empty());  // cuda was never tried
  CHECK_THROWS_WITH(devtap::set_platforms("cuda,cpu"),
                    Catch::Equals("devtap::set_platforms('cuda,cpu') after the default registry was created; call it "
                                  "before the first use of devtap's backends"));
#if defined(DEVTAP_WITH_CUDA)
  CHECK_THROWS_WITH(devtap::get_backend("cuda"), "Backend 'cuda' is not enabled by DEVTAP_PLATFORMS=cpu");
#endif
}

TEST_CASE("default registry: DEVTAP_PLATFORMS wins over the list set in code", "[.platforms_code_env]") {
  REQUIRE(std::string_view(std::getenv("DEVTAP_PLATFORMS")) == "cpu");
  devtap::set_platforms("tpu,cpu");  // unknown: it would be an error if it counted
  CHECK(devtap::default_backend() == "cpu");
  CHECK(devtap::backend_errors().empty());
}

TEST_CASE("default registry: a DEVTAP_PLATFORMS of white space and commas names nothing: the list set in code holds",
          "[.platforms_code_blank_env]") {
  REQUIRE(std::string_view(std::getenv("DEVTAP_PLATFORMS")) == " ,\t");
  devtap::set_platforms("tpu,cpu");  // counts: its unknown name is reported
  CHECK_THROWS_WITH(devtap::devices(), Catch::Contains("Unknown backend 'tpu'"));
}

TEST_CASE("default registry: an unknown name set in code is reported at first use", "[.platforms_code_unknown]") {
  devtap::set_platforms("cpu,tpu");
  CHECK_THROWS_AS(devtap::get_backend(), devtap::backend_error);
  CHECK_THROWS_WITH(devtap::devices(), Catch::Contains("Unknown backend 'tpu'"));
}
