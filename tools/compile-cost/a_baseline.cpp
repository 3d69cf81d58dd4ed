// compile-cost unit (a): the baseline. The program of (b) written by hand: a worker thread
// (std::jthread) hands records to the host through a mutex, a condition variable and a queue; the
// host prints them with {fmt}. What devtap's units are measured against.
#include <fmt/core.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

struct sample {
  int step;
  double value;
};

int main() {
  std::mutex m;
  std::condition_variable cv;
  std::deque<sample> queue;
  bool done = false;
  std::jthread worker([&] {
    for (int i = 0; i < 1000; ++i) {
      std::lock_guard lock(m);
      queue.push_back({i, 0.5 * i});
      cv.notify_one();
    }
    std::lock_guard lock(m);
    done = true;
    cv.notify_one();
  });
  double sum = 0;
  for (;;) {
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done || !queue.empty(); });
    if (queue.empty()) break;
    const sample s = queue.front();
    queue.pop_front();
    lock.unlock();
    sum += s.value;
  }
  fmt::print("sum {}\n", sum);
}
