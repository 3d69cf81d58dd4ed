#pragma once
/** devtap's version and the few macros every header shares. */

#define DEVTAP_VERSION_MAJOR 0
#define DEVTAP_VERSION_MINOR 1
#define DEVTAP_VERSION_PATCH 0

#if defined(__CUDACC__)
#  define DEVTAP_HOST_DEVICE __host__ __device__
// Before a host/device template that may be instantiated with host-only arguments (a host functor,
// host_atomics): nvcc must not flag the device pass of such an instantiation.
#  define DEVTAP_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#  define DEVTAP_HOST_DEVICE
#  define DEVTAP_NO_EXEC_CHECK
#endif

// devtap reports failures by exceptions (docs/design.md); without them its headers fail far inside,
// with errors that do not say why. (nvcc units are left alone: a kernel's taps throw nothing.)
#if !defined(__CUDACC__) && !defined(__cpp_exceptions) && !defined(__EXCEPTIONS)
#  error "devtap needs C++ exceptions: compile without -fno-exceptions"
#endif

// Header-only (the default) or compiled mode. In compiled mode (DEVTAP_COMPILED=1, which the
// `devtap` dependency of a `-Dcompiled=true` build passes on) the parts of devtap that do not
// depend on the user's types (the receiver's machinery, the registry, the cpu backend, logging and
// error texts) are defined once, in the library built from include/devtap/compiled.cpp, and the
// headers only declare them. Their definitions live in the `*_impl.hpp` files next to the headers.
#if defined(DEVTAP_BUILDING_LIBRARY)
#  undef DEVTAP_COMPILED
#  define DEVTAP_COMPILED 1
#endif
#if !defined(DEVTAP_COMPILED)
#  define DEVTAP_COMPILED 0
#endif
#if !DEVTAP_COMPILED
#  define DEVTAP_HEADER_ONLY 1
#else
#  define DEVTAP_HEADER_ONLY 0
#endif
// One ABI namespace per major version, mode and CUDA setting (v0, v0_cuda, v0_compiled,
// v0_compiled_cuda), so that units built otherwise never share a name: a header-only unit beside
// compiled-mode ones, or a .cpp without DEVTAP_WITH_CUDA beside a .cu with it (the devtap and
// devtap-cuda dependencies), each had its own default registry under one mangled name, and the
// linker kept one of them for both (two registries, or one read as another type: heap corruption).
// Now a function that passes devtap's types between such units fails to link, naming both.
#if DEVTAP_COMPILED && defined(DEVTAP_WITH_CUDA)
#  define DEVTAP_BEGIN_NAMESPACE namespace devtap { inline namespace v0_compiled_cuda {
#elif DEVTAP_COMPILED
#  define DEVTAP_BEGIN_NAMESPACE namespace devtap { inline namespace v0_compiled {
#elif defined(DEVTAP_WITH_CUDA)
#  define DEVTAP_BEGIN_NAMESPACE namespace devtap { inline namespace v0_cuda {
#else
#  define DEVTAP_BEGIN_NAMESPACE namespace devtap { inline namespace v0 {
#endif
#define DEVTAP_END_NAMESPACE } }

// On the in-class declarations of virtual members defined in an *_impl.hpp file: inline when
// header-only, so that the vtable is not anchored to them (which would emit it, and every virtual
// member, in each unit that includes the header); nothing in compiled mode.
#if DEVTAP_HEADER_ONLY
#  define DEVTAP_INLINE_VIRTUAL inline
#else
#  define DEVTAP_INLINE_VIRTUAL
#endif
// On the definitions in the *_impl.hpp files: inline when header-only, strong in the library.
#if defined(DEVTAP_BUILDING_LIBRARY)
#  define DEVTAP_FUNC
#else
#  define DEVTAP_FUNC inline
#endif
