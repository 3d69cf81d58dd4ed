#pragma once
/** The process-wide registry (cpu, plus cuda when the build enables it) and free functions on it. */
#include <devtap/backend/cpu.hpp>
#include <devtap/backend/cuda.hpp>
#include <devtap/backend/process.hpp>
#include <devtap/backend/registry.hpp>
#include <devtap/config.hpp>

#include <cstddef>
#include <map>
#include <mutex>
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

#if DEVTAP_COMPILED && !defined(DEVTAP_BUILDING_LIBRARY)
extern template class registry<cpu_backend>;  // instantiated once, in the library (compiled.cpp)
#  if defined(DEVTAP_WITH_CUDA)
extern template class registry<cpu_backend, cuda_backend>;
#  endif
#endif

/** The process-wide `default_registry`, created on first use (reading `DEVTAP_PLATFORMS` then).
 *
 * It is deliberately never destroyed: destroying it at exit would join device threads from a
 * static destructor, which can deadlock or touch already-destroyed objects (the stdexec lesson).
 * Its devices' threads simply end with the process. Code that needs a clean join owns a registry
 * or a client of its own. */
default_registry& default_registry_instance();

/** Sets which backends the default registry enables, and in what order, as `DEVTAP_PLATFORMS`
 *  does ("cuda,cpu"; empty: every backend), from the program. Call it before the first use of the
 *  default registry (the first `devtap::devices()`, `get_backend()`, receiver without `devices`...);
 *  afterwards it throws std::logic_error. Where both are given, `DEVTAP_PLATFORMS` wins. A name the
 *  registry does not know is reported by every call that needs the backends, as for the variable. */
void set_platforms(std::string_view platforms);

/** Initialises backend `name` only and returns its client. See `registry::get_backend`. */
client& get_backend(std::string_view name);
/** The default backend's client (initialises every backend). */
client& get_backend();
/** Initialises every backend; the usable ones, default first. See `registry::backends`. */
std::vector<client*> backends();
/** Backend name → reason, for every backend that failed so far. */
std::map<std::string, std::string, std::less<>> backend_errors();
/** The default backend's name, e.g. "cuda" or "cpu". */
std::string_view default_backend();
/** The devices of backend `name`. */
std::span<device* const> devices(std::string_view name);
/** The devices of the default backend. */
std::span<device* const> devices();
/** Number of local devices (this process's) of backend `name`. */
std::size_t device_count(std::string_view name);
/** Number of local devices (this process's) of the default backend. */
std::size_t device_count();
/** This process's index as backend `name` sees it. */
int process_index(std::string_view name);
/** This process's index (default backend). */
int process_index();
/** Number of processes (default backend); 1 without a launcher. */
int process_count();
/** The cpu backend's devices, typed (initialises cpu; counts as asking for cpu). */
std::span<cpu_device* const> cpu_devices();

DEVTAP_END_NAMESPACE

#if DEVTAP_HEADER_ONLY
#include <devtap/backend/default_impl.hpp>
#endif
