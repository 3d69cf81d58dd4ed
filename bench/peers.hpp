#pragma once
// The pipelines a user would hand-build instead of devtap, each given the same work: records of
// S bytes copied in by producer thread(s), read in full (checksum) by one consumer thread, one
// callback per record, at most budget_bytes of records in flight. Lock-free peers wait by spinning
// then yielding (their best case for throughput; an idle consumer of theirs burns a core).
#include "common.hpp"

#include <boost/lockfree/spsc_queue.hpp>
#include <concurrentqueue/concurrentqueue.h>
#include <readerwriterqueue/readerwriterqueue.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace bench {

/** Runs `produce(p, first, last)` on `producers` threads and `consume()` on one, released together.
 *  `consume` returns {checksum, end time}. */
template <class Produce, class Consume>
sample run_threads(std::uint64_t n, int producers, Produce produce, Consume consume) {
  start_gate gate;
  std::uint64_t sum = 0, end = 0;
  std::thread consumer([&] {
    placement::get().consumer();
    gate.wait();
    auto [s, e] = consume();
    sum = s;
    end = e;
  });
  std::vector<std::thread> threads;
  for (int p = 0; p < producers; ++p)
    threads.emplace_back([&, p] {
      placement::get().producer();
      gate.wait();
      produce(p, share_first(n, producers, p), share_first(n, producers, p + 1));
    });
  const std::uint64_t t0 = gate.open();
  for (auto& t : threads) t.join();
  consumer.join();
  return {static_cast<double>(end - t0) * 1e-9, n, sum};
}

/** boost::lockfree::spsc_queue of records (preallocated slots); the consumer drains with consume_all. */
template <std::size_t S>
class boost_spsc {
public:
  static constexpr const char* name = "boost-spsc";
  boost_spsc() : q_(budget_bytes / S) {}

  sample run(const source& src, std::uint64_t n, int producers) {
    return run_threads(
        n, producers,
        [&](int, std::uint64_t first, std::uint64_t last) {
          backoff b;
          for (std::uint64_t i = first; i < last; ++i) {
            while (!q_.push(record_at<S>(src, i))) b.pause();
            b.reset();
          }
        },
        [&] {
          std::uint64_t got = 0, s = 0;
          backoff b;
          auto read = [&s](const record<S>& r) { s += checksum(r.data(), S); };
          while (got < n) {
            if (const std::size_t k = q_.consume_all(read)) {
              got += k;
              b.reset();
            } else {
              b.pause();
            }
          }
          return std::pair{s, now_ns()};
        });
  }

private:
  boost::lockfree::spsc_queue<record<S>> q_;
};

/** moodycamel::ReaderWriterQueue as one preallocated block of budget/S slots; read in place (peek, pop). */
template <std::size_t S>
class moodycamel_rwq {
public:
  static constexpr const char* name = "moodycamel-rwq";
  // One block of budget/S slots, one kept free: the in-flight bound is the budget, not 2x it.
  moodycamel_rwq() : q_(budget_bytes / S - 1) {}

  sample run(const source& src, std::uint64_t n, int producers) {
    return run_threads(
        n, producers,
        [&](int, std::uint64_t first, std::uint64_t last) {
          backoff b;
          for (std::uint64_t i = first; i < last; ++i) {
            while (!q_.try_enqueue(record_at<S>(src, i))) b.pause();
            b.reset();
          }
        },
        [&] {
          std::uint64_t got = 0, s = 0;
          backoff b;
          while (got < n) {
            if (const record<S>* r = q_.peek()) {
              s += checksum(r->data(), S);
              q_.pop();
              ++got;
              b.reset();
            } else {
              b.pause();
            }
          }
          return std::pair{s, now_ns()};
        });
  }

private:
  moodycamel::ReaderWriterQueue<record<S>, budget_bytes / S> q_;
};

/** moodycamel::ConcurrentQueue, 2 producers. Small records travel by value (enqueue with a producer
 *  token, bulk dequeue), bounded by an atomic count of bytes in flight: try_enqueue on a preallocated
 *  queue is no bound (it fails for good once a producer's block index is full, cameron314/concurrentqueue
 *  #379, and hung this benchmark). Records of 4 KiB and up are written into a pool of budget/S slots
 *  whose indices travel through a queue and come back through a free list (the consumer reads the
 *  slot in place instead of copying it out). */
template <std::size_t S>
class moodycamel_cq {
public:
  static constexpr const char* name = "moodycamel-cq";
  static constexpr bool by_value = S <= 256;
  static constexpr std::size_t slots = budget_bytes / S;

  moodycamel_cq() : values_(by_value ? 2 * slots : 0), full_(by_value ? 0 : slots), free_(by_value ? 0 : slots) {
    if constexpr (!by_value) {
      pool_.resize(slots);
      for (std::uint32_t k = 0; k < slots; ++k) free_.enqueue(k);
    }
  }

  sample run(const source& src, std::uint64_t n, int producers) {
    if constexpr (by_value) {
      return run_threads(
          n, producers,
          [&](int, std::uint64_t first, std::uint64_t last) {
            moodycamel::ProducerToken tok(values_);
            backoff b;
            for (std::uint64_t i = first; i < last; ++i) {
              while (in_flight_.load(std::memory_order_relaxed) + S > budget_bytes) b.pause();
              b.reset();
              in_flight_.fetch_add(S, std::memory_order_relaxed);  // two producers may pass together: +S each
              values_.enqueue(tok, record_at<S>(src, i));
            }
          },
          [&] {
            moodycamel::ConsumerToken tok(values_);
            std::vector<record<S>> buf(64);
            std::uint64_t got = 0, s = 0;
            backoff b;
            while (got < n) {
              if (const std::size_t k = values_.try_dequeue_bulk(tok, buf.begin(), buf.size())) {
                for (std::size_t j = 0; j < k; ++j) s += checksum(buf[j].data(), S);
                in_flight_.fetch_sub(k * S, std::memory_order_relaxed);
                got += k;
                b.reset();
              } else {
                b.pause();
              }
            }
            return std::pair{s, now_ns()};
          });
    } else {
      return run_threads(
          n, producers,
          [&](int, std::uint64_t first, std::uint64_t last) {
            moodycamel::ProducerToken tok(full_);
            backoff b;
            for (std::uint64_t i = first; i < last; ++i) {
              std::uint32_t k;
              while (!free_.try_dequeue(k)) b.pause();
              b.reset();
              std::memcpy(pool_[k].data(), src.at(i), S);
              full_.enqueue(tok, k);
            }
          },
          [&] {
            moodycamel::ConsumerToken tok(full_);
            moodycamel::ProducerToken back(free_);
            std::uint32_t idx[16];
            std::uint64_t got = 0, s = 0;
            backoff b;
            while (got < n) {
              if (const std::size_t k = full_.try_dequeue_bulk(tok, idx, 16)) {
                for (std::size_t j = 0; j < k; ++j) s += checksum(pool_[idx[j]].data(), S);
                free_.enqueue_bulk(back, idx, k);
                got += k;
                b.reset();
              } else {
                b.pause();
              }
            }
            return std::pair{s, now_ns()};
          });
    }
  }

private:
  moodycamel::ConcurrentQueue<record<S>> values_;
  moodycamel::ConcurrentQueue<std::uint32_t> full_, free_;
  std::vector<record<S>> pool_;
  std::atomic<std::size_t> in_flight_{0};
};

/** A std::deque under a mutex, bounded by bytes, with two condition variables. The consumer takes
 *  everything queued in one swap and reads it outside the lock (the usual hand-built batching). */
template <std::size_t S>
class mutex_deque {
public:
  static constexpr const char* name = "mutex-deque";

  sample run(const source& src, std::uint64_t n, int producers) {
    return run_threads(
        n, producers,
        [&](int, std::uint64_t first, std::uint64_t last) {
          for (std::uint64_t i = first; i < last; ++i) {
            {
              std::unique_lock lock(m_);
              space_.wait(lock, [&] { return bytes_ + S <= budget_bytes; });
              q_.push_back(record_at<S>(src, i));
              bytes_ += S;
            }
            nonempty_.notify_one();
          }
        },
        [&] {
          std::deque<record<S>> local;
          std::uint64_t got = 0, s = 0;
          while (got < n) {
            {
              std::unique_lock lock(m_);
              nonempty_.wait(lock, [&] { return !q_.empty(); });
              local.swap(q_);
            }
            for (const auto& r : local) s += checksum(r.data(), S);
            got += local.size();
            const std::size_t freed = local.size() * S;
            local.clear();
            {
              std::lock_guard lock(m_);
              bytes_ -= freed;
            }
            space_.notify_all();
          }
          return std::pair{s, now_ns()};
        });
  }

private:
  std::mutex m_;
  std::condition_variable nonempty_, space_;
  std::deque<record<S>> q_;
  std::size_t bytes_ = 0;
};

/** Reference: one thread memcpy's each record into a budget-sized staging area. No hand-off, no read. */
template <std::size_t S>
class ref_memcpy {
public:
  static constexpr const char* name = "ref-memcpy";
  ref_memcpy() : dst_(budget_bytes / 8, 0) {}

  sample run(const source& src, std::uint64_t n, int) {
    constexpr std::uint64_t per = budget_bytes / S;
    auto* dst = reinterpret_cast<std::byte*>(dst_.data());
    const std::uint64_t t0 = now_ns();
    for (std::uint64_t i = 0; i < n; ++i) {
      std::memcpy(dst + (i % per) * S, src.at(i), S);
      clobber(dst);
    }
    const std::uint64_t t1 = now_ns();
    return {static_cast<double>(t1 - t0) * 1e-9, n, src.expected(0, n)};  // not read: nothing to check
  }

private:
  std::vector<std::uint64_t> dst_;
};

/** Reference: one thread copies each record into a budget-sized staging area, then reads it (checksum). */
template <std::size_t S>
class ref_copy_read {
public:
  static constexpr const char* name = "ref-copy-read";
  ref_copy_read() : dst_(budget_bytes / 8, 0) {}

  sample run(const source& src, std::uint64_t n, int) {
    constexpr std::uint64_t per = budget_bytes / S;
    auto* dst = reinterpret_cast<std::byte*>(dst_.data());
    std::uint64_t s = 0;
    const std::uint64_t t0 = now_ns();
    for (std::uint64_t i = 0; i < n; ++i) {
      std::byte* slot = dst + (i % per) * S;
      std::memcpy(slot, src.at(i), S);
      clobber(slot);
      s += checksum(slot, S);
    }
    const std::uint64_t t1 = now_ns();
    return {static_cast<double>(t1 - t0) * 1e-9, n, s};
  }

private:
  std::vector<std::uint64_t> dst_;
};

}  // namespace bench
