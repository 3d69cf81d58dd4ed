#pragma once
// Replaces the global operator new of the one test executable whose .cpp includes this (include it
// in one translation unit only): a single allocation above `allocation_limit` fails, with
// std::bad_alloc, or aborting with a message where `abort_above_limit` is set, and the largest
// allocation is kept. A damaged recording must never make a reader allocate what its file cannot
// hold. Every unaligned form is replaced (a sanitizer's own nothrow new must not meet this free());
// the aligned forms keep the runtime's, in pairs. Clang's sanitizer runtimes (static) define
// operator new themselves: there nothing is replaced, and `allocations_guarded` is false.
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

#if defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DEVTAP_TEST_RUNTIME_OWNS_NEW 1
#endif
#endif

namespace devtap_test {
#if defined(DEVTAP_TEST_RUNTIME_OWNS_NEW)
inline constexpr bool allocations_guarded = false;
#else
inline constexpr bool allocations_guarded = true;
#endif
inline std::atomic<std::size_t> allocation_limit{std::size_t{1} << 30};
inline std::atomic<bool> abort_above_limit{false};
inline std::atomic<std::size_t> largest_allocation{0};
}  // namespace devtap_test

#if !defined(DEVTAP_TEST_RUNTIME_OWNS_NEW)
// Out of line: inlined, GCC would see free() meet operator new's pointer (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t n) {
  if (n > devtap_test::allocation_limit.load(std::memory_order_relaxed)) {
    if (devtap_test::abort_above_limit.load(std::memory_order_relaxed)) {
      std::fprintf(stderr, "allocation_guard: an allocation of %zu bytes, above the test's limit\n", n);
      std::abort();
    }
    throw std::bad_alloc();
  }
  std::size_t seen = devtap_test::largest_allocation.load(std::memory_order_relaxed);
  while (n > seen && !devtap_test::largest_allocation.compare_exchange_weak(seen, n, std::memory_order_relaxed)) {
  }
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t n) { return ::operator new(n); }
[[gnu::noinline]] void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (...) {
    return nullptr;
  }
}
[[gnu::noinline]] void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept { return ::operator new(n, tag); }
[[gnu::noinline]] void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#endif
