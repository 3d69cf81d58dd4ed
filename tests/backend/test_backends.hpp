#pragma once
// Backends made up for the tests: named at compile time, counting their create() calls.
#include <devtap/backend/device.hpp>
#include <devtap/backend/registry.hpp>
#include <devtap/log.hpp>
#include <devtap/ring/memory.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace devtap_test {

/** A string usable as a template argument, so each test backend is its own type. */
template <std::size_t N>
struct fixed_string {
  char text[N]{};
  constexpr fixed_string(const char (&s)[N]) { std::copy_n(s, N, text); }
  constexpr std::string_view view() const { return {text, N - 1}; }
};

class fake_device final : public devtap::device {
public:
  fake_device(int id, std::string_view platform)
      : device(id, platform, std::string(platform) + ":" + std::to_string(id), 0) {}
  std::unique_ptr<devtap::detail::ring_allocation> allocate_ring(std::uint64_t capacity) override {
    return std::make_unique<devtap::detail::host_ring_allocation>(capacity);
  }
  void after_pending_work(std::function<void()> fn) override { fn(); }
};

class fake_client final : public devtap::client {
public:
  fake_client(std::string_view platform, int devices, bool null_device = false, bool twice = false) : platform_(platform) {
    for (int i = 0; i < devices; ++i) {
      owned_.push_back(std::make_unique<fake_device>(i, platform));
      views_.push_back(owned_.back().get());
    }
    if (null_device) views_.push_back(nullptr);  // a backend's mistake
    if (twice) views_.push_back(views_.front());  // another one
  }
  std::string_view platform() const noexcept override { return platform_; }
  int process_index() const noexcept override { return 0; }
  std::span<devtap::device* const> local_devices() const noexcept override { return views_; }

private:
  std::string_view platform_;
  std::vector<std::unique_ptr<fake_device>> owned_;
  std::vector<devtap::device*> views_;
};

enum class behaviour { ok, fail, null, slow, logs, null_device, device_twice, fail_loudly };

/** A backend named `Name` with `Devices` devices; `How` makes create() throw, return null, sleep,
 * log "create() of <name> runs" at debug level (to see what was logged before it), return a
 * client whose device list holds a null device too or its first device twice, or throw a message
 * of 100 004 bytes that clears the terminal. */
template <fixed_string Name, int Priority, bool Required = false, int Devices = 1, behaviour How = behaviour::ok>
struct test_backend {
  static constexpr std::string_view name = Name.view();
  static constexpr int priority = Priority;
  static constexpr bool required = Required;
  static inline std::atomic<int> creates{0};

  static std::unique_ptr<devtap::client> create() {
    creates.fetch_add(1);
    if constexpr (How == behaviour::fail) throw std::runtime_error("boom: " + std::string(name));
    if constexpr (How == behaviour::fail_loudly) throw std::runtime_error("\x1b[2J" + std::string(100000, 'x'));
    if constexpr (How == behaviour::null) return nullptr;
    if constexpr (How == behaviour::slow) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if constexpr (How == behaviour::logs) devtap::log(devtap::log_level::debug, "create() of {} runs", name);
    return std::make_unique<fake_client>(name, Devices, How == behaviour::null_device, How == behaviour::device_twice);
  }
};

template <fixed_string Name, int Priority, bool Required = false>
using failing_backend = test_backend<Name, Priority, Required, 1, behaviour::fail>;

/** Captures devtap's log lines while alive (and lowers the threshold to debug). */
class log_capture {
public:
  log_capture() : previous_(devtap::get_log_level()) {
    devtap::set_log_level(devtap::log_level::debug);
    devtap::set_log_sink([this](devtap::log_level level, std::string_view line) {
      std::lock_guard lock(mutex_);
      lines_.push_back({level, std::string(line)});
    });
  }
  ~log_capture() {
    devtap::set_log_sink({});
    devtap::set_log_level(previous_);
  }
  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  /** Lines of `level` equal to `text`. */
  int count(devtap::log_level level, std::string_view text) const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(std::count_if(lines_.begin(), lines_.end(),
                                          [&](const auto& l) { return l.level == level && l.text == text; }));
  }
  /** All lines of `level`. */
  std::vector<std::string> lines(devtap::log_level level) const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& l : lines_)
      if (l.level == level) out.push_back(l.text);
    return out;
  }

private:
  struct line {
    devtap::log_level level;
    std::string text;
  };
  devtap::log_level previous_;
  mutable std::mutex mutex_;
  std::vector<line> lines_;
};

inline constexpr std::string_view fallback_warning =
    "No GPU found, falling back to CPU; set DEVTAP_LOG=info or call devtap::backend_errors() to see why";

}  // namespace devtap_test
