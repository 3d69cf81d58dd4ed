#pragma once
// devtap::print itself (fmt-free, device-safe): check the print at compile time, then send its
// record, from a host thread or from a CUDA thread.
#include <devtap/config.hpp>
#include <devtap/print/encode.hpp>
#include <devtap/print/fixed_string.hpp>
#include <devtap/print/printer.hpp>
#include <devtap/print/registry.hpp>
#include <devtap/print/rejection.hpp>
#include <devtap/print/signature.hpp>

#include <cstdint>
#include <string_view>
#include <type_traits>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

#if !defined(__CUDA_ARCH__)
// Host threads: the format goes into the process-wide registry before the first record, so the
// reader always knows it and the record never carries the text.
template <class Sig, fixed_string F>
inline bool print_register() {
  global_print_registry().add(Sig::id, std::string_view(F.data(), F.size()), Sig::descs, Sig::nargs);
  return true;
}
#endif

#if defined(__CUDACC__)
// Per device (each GPU has its own copy), module and format: the token of the printer that last
// received this format's definition from the device. Keyed by a second hash of the text too: a
// format whose id collides with another's still sends its own definition, so the host sees the
// collision. (Integers: nvcc's registration of a device variable cannot name a class argument.)
template <std::uint64_t Id, std::uint64_t TextKey>
__device__ unsigned int print_defined_token = 0;
#endif

}  // namespace detail

/** Prints one line: `devtap::print<"step {} loss {:.3f}">(out, step, loss)`. From a cpu device's
 *  work, a host thread, or a CUDA kernel (any thread). Under the receiver's `block` policy it waits
 *  for room; on the host it throws outfeed_error where a tap would. A format or an argument type
 *  that cannot print is a compile error that says why. */
template <fixed_string F, class... Args>
DEVTAP_HOST_DEVICE void print(const printer& out, const Args&... args) {
  using namespace detail;
  using sig = print_signature<F, Args...>;  // (as passed: the checks see a volatile argument)
  print_reject<sig::check.code>();  // compiles only when the verdict is ok
  if constexpr (sig::valid) {
#if defined(__CUDA_ARCH__)
    unsigned int* const defined = &print_defined_token<sig::id, sig::text_key>;
    const unsigned int token = out.point().token;
    if (*static_cast<volatile unsigned int*>(defined) != token && atomicExch(defined, token) != token)
      print_send<sig, true>(out, args...);
    else
      print_send<sig, false>(out, args...);
#else
    static const bool registered = print_register<sig, F>();  // once per process, before the first record
    (void)registered;
    print_send<sig, false>(out, args...);
#endif
  }
}

DEVTAP_END_NAMESPACE
