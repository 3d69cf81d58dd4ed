#pragma once
// A small test harness for the .cu tests: Catch2's single header compiles under nvcc but takes
// half a minute per file on two cores, and these tests need little of it. Named cases, checks that
// print both sides, exceptions reported per case, `exe [case ...]` runs a subset, and exit code 77
// (meson's SKIP) when a GPU is required and the machine has none (no driver, no device); any other
// CUDA failure at start (a driver older than the runtime, for one) fails with the error's name.
#include <devtap/cuda/probe.hpp>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace harness {

struct test_case {
  const char* name;
  void (*fn)();
};

inline std::vector<test_case>& registry() {
  static std::vector<test_case> cases;
  return cases;
}

struct registrar {
  registrar(const char* name, void (*fn)()) { registry().push_back({name, fn}); }
};

inline int& failures() {
  static int n = 0;
  return n;
}

inline bool check(bool ok, const char* expr, const char* file, int line, const std::string& detail = {}) {
  if (!ok && ++failures() <= 25) {
    if (failures() == 25) std::printf("  (further failures are counted, not printed)\n");
    std::printf("  FAILED %s:%d: %s%s%s\n", file, line, expr, detail.empty() ? "" : "  with ", detail.c_str());
  }
  return ok;
}

template <class A, class B>
bool check_eq(const A& a, const B& b, const char* expr, const char* file, int line) {
  if (a == b) return true;
  std::ostringstream os;
  os << a << " != " << b;
  return check(false, expr, file, line, os.str());
}

/** Why no GPU can be used, or empty when one can. */
inline std::string gpu_unavailable() { return devtap::probe_cuda().reason; }

/** Runs the cases named on the command line (all without arguments). 77 = skip when `needs_gpu`
 *  and the machine has no GPU; 1 when CUDA fails otherwise, a check failed or a case threw. */
inline int run(int argc, char** argv, bool needs_gpu) {
  if (needs_gpu) {
    if (const devtap::cuda_availability gpu = devtap::probe_cuda(); !gpu.usable()) {
      if (!gpu.nothing_to_run_on()) {
        std::printf("FAIL: the CUDA runtime fails although a driver is present: %s\n", gpu.reason.c_str());
        return 1;
      }
      std::printf("SKIP: %s: the GPU tests were compiled, not run\n", gpu.reason.c_str());
      return 77;
    }
  }
  int ran = 0;
  for (const auto& c : registry()) {
    bool wanted = argc < 2;
    for (int i = 1; i < argc; ++i) wanted = wanted || std::strcmp(argv[i], c.name) == 0;
    if (!wanted) continue;
    ++ran;
    const int before = failures();
    std::printf("case %s\n", c.name);
    std::fflush(stdout);
    try {
      c.fn();
    } catch (const std::exception& e) {
      check(false, "unexpected exception", c.name, 0, e.what());
    } catch (...) {
      check(false, "unexpected exception", c.name, 0, "(not a std::exception)");
    }
    std::printf("case %s: %s\n", c.name, failures() == before ? "ok" : "FAILED");
    std::fflush(stdout);
  }
  if (ran == 0) {
    std::printf("no case matches the arguments\n");
    return 1;
  }
  std::printf("%d case(s), %d failed check(s)\n", ran, failures());
  return failures() == 0 ? 0 : 1;
}

}  // namespace harness

#define HARNESS_CASE(name)                                      \
  static void name();                                           \
  static const harness::registrar name##_registrar(#name, name); \
  static void name()
#define CHECK(...) harness::check(static_cast<bool>(__VA_ARGS__), #__VA_ARGS__, __FILE__, __LINE__)
#define CHECK_EQ(a, b) harness::check_eq((a), (b), #a " == " #b, __FILE__, __LINE__)
/** A CUDA runtime call that must succeed; throws (failing the case) when it does not. */
#define CUDA_OK(call)                                                                                  \
  do {                                                                                                 \
    const cudaError_t cuda_ok_status_ = (call);                                                        \
    if (cuda_ok_status_ != cudaSuccess)                                                                \
      throw std::runtime_error(std::string(#call ": ") + cudaGetErrorString(cuda_ok_status_));          \
  } while (0)

/** Device memory that frees itself, also when a check throws. */
struct cuda_free {
  void operator()(void* p) const noexcept { cudaFree(p); }
};
template <class T>
using device_array = std::unique_ptr<T[], cuda_free>;

/** A copy of `host` in device memory. */
template <class T>
device_array<T> to_device(const std::vector<T>& host) {
  T* raw = nullptr;
  CUDA_OK(cudaMalloc(&raw, host.size() * sizeof(T)));
  device_array<T> out(raw);
  CUDA_OK(cudaMemcpy(raw, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return out;
}
