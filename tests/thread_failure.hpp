#pragma once
// A thread that cannot start (EAGAIN: a thread or pid limit): pthread_create, replaced in the
// executable that includes this (one translation unit), fails its `threads_until_failure`-th call
// from now (-1: never). Not where a sanitizer's runtime intercepts pthread_create itself: its
// threads must start through it (DEVTAP_TEST_RUNTIME_STARTS_THREADS is then defined).
#include <atomic>
#include <cerrno>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define DEVTAP_TEST_RUNTIME_STARTS_THREADS 1
#elif defined(__clang__) && defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define DEVTAP_TEST_RUNTIME_STARTS_THREADS 1
#endif
#endif
#if !defined(DEVTAP_TEST_RUNTIME_STARTS_THREADS)
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
namespace {
std::atomic<int> threads_until_failure{-1};
std::atomic<int> failing_thread_takes_ms{0};  // how long the failing call takes before it fails
}
extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using create_fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const auto real = reinterpret_cast<create_fn>(::dlsym(RTLD_NEXT, "pthread_create"));
  for (int left = threads_until_failure.load(); left >= 0;)
    if (threads_until_failure.compare_exchange_weak(left, left - 1)) {
      if (left == 0) {
        if (const int ms = failing_thread_takes_ms.load(); ms > 0) ::usleep(static_cast<useconds_t>(ms) * 1000);
        return EAGAIN;
      }
      break;
    }
  return real(thread, attr, start, arg);
}
#endif
