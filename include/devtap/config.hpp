#pragma once
/** devtap's version and the few macros every header shares. */

#define DEVTAP_VERSION_MAJOR 0
#define DEVTAP_VERSION_MINOR 1
#define DEVTAP_VERSION_PATCH 0

// One ABI namespace per major version, so two builds never link against each other silently.
#define DEVTAP_BEGIN_NAMESPACE namespace devtap { inline namespace v0 {
#define DEVTAP_END_NAMESPACE } }

#if defined(__CUDACC__)
#  define DEVTAP_HOST_DEVICE __host__ __device__
// Before a host/device template that may be instantiated with host-only arguments (a host functor,
// host_atomics): nvcc must not flag the device pass of such an instantiation.
#  define DEVTAP_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#  define DEVTAP_HOST_DEVICE
#  define DEVTAP_NO_EXEC_CHECK
#endif
