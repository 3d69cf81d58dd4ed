#pragma once
/** The process-wide registry (cpu, plus cuda when the build enables it) and free functions on it. */
#include <devtap/backend/cpu.hpp>
#include <devtap/backend/cuda.hpp>
#include <devtap/backend/process.hpp>
#include <devtap/backend/registry.hpp>
#include <devtap/config.hpp>

#include <cstddef>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

#if defined(DEVTAP_WITH_CUDA)
/** The registry type behind the free functions: cpu and cuda. */
using default_registry = registry<cpu_backend, cuda_backend>;
#else
/** The registry type behind the free functions: cpu only (this build has no CUDA). */
using default_registry = registry<cpu_backend>;
#endif

/** The process-wide `default_registry`, created on first use (reading `DEVTAP_PLATFORMS` then).
 *
 * It is deliberately never destroyed: destroying it at exit would join device threads from a
 * static destructor, which can deadlock or touch already-destroyed objects (the stdexec lesson).
 * Its devices' threads simply end with the process. Code that needs a clean join owns a registry
 * or a client of its own. */
inline default_registry& default_registry_instance() {
  static default_registry* const instance = new default_registry();  // leaked on purpose, see above
  return *instance;
}

/** Initialises backend `name` only and returns its client. See `registry::get_backend`. */
inline client& get_backend(std::string_view name) { return default_registry_instance().get_backend(name); }
/** The default backend's client (initialises every backend). */
inline client& get_backend() { return default_registry_instance().get_backend(); }
/** Initialises every backend; the usable ones, default first. See `registry::backends`. */
inline std::vector<client*> backends() { return default_registry_instance().backends(); }
/** Backend name → reason, for every backend that failed so far. */
inline std::map<std::string, std::string, std::less<>> backend_errors() {
  return default_registry_instance().backend_errors();
}
/** The default backend's name, e.g. "cuda" or "cpu". */
inline std::string_view default_backend() { return default_registry_instance().default_backend(); }
/** The devices of backend `name`. */
inline std::span<device* const> devices(std::string_view name) { return default_registry_instance().devices(name); }
/** The devices of the default backend. */
inline std::span<device* const> devices() { return default_registry_instance().devices(); }
/** Number of local devices (this process's) of backend `name`. */
inline std::size_t device_count(std::string_view name) { return default_registry_instance().device_count(name); }
/** Number of local devices (this process's) of the default backend. */
inline std::size_t device_count() { return default_registry_instance().device_count(); }
/** This process's index (default backend). */
inline int process_index() { return default_registry_instance().process_index(); }
/** Number of processes (default backend); 1 without a launcher. */
inline int process_count() { return get_backend().process_count(); }
/** The cpu backend's devices, typed (initialises cpu; counts as asking for cpu). */
inline std::span<cpu_device* const> cpu_devices() { return as_cpu_client(get_backend("cpu")).cpu_devices(); }

DEVTAP_END_NAMESPACE
