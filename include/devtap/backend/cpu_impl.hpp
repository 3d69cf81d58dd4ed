#pragma once
// The definitions of the cpu backend (declared in cpu.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/cpu.hpp>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC cpu_device::cpu_device(int id, int process_index)
      : device(id, detail::cpu_platform, "cpu:" + std::to_string(id), process_index) {}

DEVTAP_FUNC std::unique_ptr<detail::ring_allocation> cpu_device::allocate_ring(std::uint64_t capacity) {
  return std::make_unique<detail::host_ring_allocation>(capacity);
}

DEVTAP_FUNC void cpu_device::after_pending_work(std::function<void()> fn) {
  executor_.post([this, fn = std::move(fn)] {
    run_pending_work_callback(fn);
  });
}

DEVTAP_FUNC cpu_client::cpu_client(int devices, process_info process) : process_(process) {
  if (devices < 1) throw backend_error(detail::format_message("devtap::cpu_client({}): needs at least one device", devices));
  if (devices > detail::max_cpu_devices)  // as DEVTAP_CPU_DEVICES: past it, one thread each would starve the system first
    throw backend_error(detail::format_message("devtap::cpu_client({}): at most {} devices (one thread each)", devices,
                                               detail::max_cpu_devices));
  owned_.reserve(static_cast<std::size_t>(devices));
  for (int i = 0; i < devices; ++i) {
    try {
      owned_.push_back(std::make_unique<cpu_device>(i, process_.index));
    } catch (const std::system_error& e) {  // its thread (a thread or pid limit): the devices made so far are joined
      throw backend_error(detail::format_message("devtap::cpu_client({}): cannot start the thread of device cpu:{}: {}",
                                                 devices, i, e.what()));
    }
    views_.push_back(owned_.back().get());
    cpu_views_.push_back(owned_.back().get());
  }
}

DEVTAP_FUNC cpu_client::~cpu_client() {
  // Every device lives until none has work left: work queued on one may use another. Each pass
  // waits for every queue; one in which nothing but its own waits was posted leaves them all empty.
  const auto drain = [this] {
    for (std::uint64_t before = 1, after = 0; after != before;) {
      before = after = 0;
      for (auto& d : owned_) before += d->executor_.posted();
      for (auto& d : owned_) d->executor_.wait_idle();
      for (auto& d : owned_) after += d->executor_.posted();
      before += owned_.size();  // (the waits' own tasks)
    }
  };
  // From a device's own work, or from a consumer of a receiver on them (their work may wait for it
  // to read), a wait for the devices' work would wait for itself.
  const auto own = std::find_if(owned_.begin(), owned_.end(), [](const auto& d) { return d->runs_on_this_thread(); });
  const bool consumer_here = std::any_of(owned_.begin(), owned_.end(), [](const auto& d) { return d->consumer_runs_here(); });
  const bool may_wait = own == owned_.end() && !consumer_here;
  if (may_wait) drain();
  bool receivers_closed = true;  // after the work that taps into them; else they drain freed devices
  for (auto& d : owned_) receivers_closed = d->close_attached_receiver() && receivers_closed;
  if (may_wait && receivers_closed) {
    drain();  // what the receivers' consumers queued as they were closed
    while (!owned_.empty()) owned_.pop_back();  // last device first, each joined in turn
    return;
  }
  // Destroyed from a device's own work (it cannot join its own thread), from a consumer of a
  // receiver on them, from a thread a receiver's close() waits for, or while a consumer that a
  // close() gave up on still runs (it may use its device): nothing may go.
  const std::string how = own != owned_.end() ? "from the work of its device '" + (*own)->name() + "'"
                          : consumer_here     ? "from a consumer of a receiver on its devices"
                                              : "while a receiver still uses its devices (from a thread its close() waits "
                                                "for, or while a consumer its close() gave up on still runs)";
  log(log_level::warn, "cpu_client destroyed {}: its {} device(s) are kept, threads and all, until the process exits",
      how, owned_.size());
  detail::keep_devices_until_exit(owned_);
}

DEVTAP_FUNC std::unique_ptr<cpu_client> cpu_backend::create() {
  std::lock_guard lock(detail::cpu_device_count_mutex());  // set_cpu_device_count sees the count and the start, or neither
  const char* env = std::getenv("DEVTAP_CPU_DEVICES");
  const int configured = detail::configured_cpu_devices().load();
  const bool env_blank = env == nullptr || detail::trim(env).empty();  // names no count: the code's holds
  // A registry keeps a failure for good: set_cpu_device_count must not look fine after one.
  const auto keep_failure = [](const std::string& why) {
    detail::cpu_start_failure() = why;
    int none = 0;
    detail::created_cpu_devices().compare_exchange_strong(none, -1);
  };
  int count = 0;
  try {
    count = env_blank && configured != 0 ? configured : detail::cpu_device_count_from(env);
  } catch (const backend_error& e) {
    keep_failure(e.what());
    throw;
  }
  // The count is published once the devices run (their threads may fail to start).
  std::unique_ptr<cpu_client> started;
  try {
    started = std::make_unique<cpu_client>(count);
  } catch (const std::exception& e) {
    const std::string why = detail::format_message("the cpu backend could not start its {} device(s): {}", count, e.what());
    keep_failure(why);
    throw backend_error(why);
  }
  if (detail::created_cpu_devices().load() <= 0) detail::created_cpu_devices().store(count);  // (a later start that works)
  return started;
}

DEVTAP_FUNC int detail::cpu_device_count_from(const char* text) {
  if (text == nullptr || detail::trim(text).empty()) return 1;
  int n = 0;
  if (!parse_non_negative(text, n) || n < 1 || n > max_cpu_devices)
    throw backend_error(detail::format_message(
        "DEVTAP_CPU_DEVICES='{}' is not a valid device count (expected an integer from 1 to {})", printable(text, true),
        max_cpu_devices));
  return n;
}

DEVTAP_FUNC std::atomic<int>& detail::configured_cpu_devices() noexcept {
  static std::atomic<int> count{0};
  return count;
}

DEVTAP_FUNC std::atomic<int>& detail::created_cpu_devices() noexcept {
  static std::atomic<int> count{0};
  return count;
}

DEVTAP_FUNC std::string& detail::cpu_start_failure() {  // cpu_device_count_mutex held
  static std::string& failure = *new std::string();  // never destroyed, as the registry that keeps the failure
  return failure;
}

DEVTAP_FUNC std::mutex& detail::cpu_device_count_mutex() noexcept {
  static std::mutex mutex;
  return mutex;
}

DEVTAP_FUNC void set_cpu_device_count(int count) {
  if (count < 1 || count > detail::max_cpu_devices)
    throw std::invalid_argument(detail::format_message("devtap::set_cpu_device_count({}): expected 1 to {}", count,
                                                       detail::max_cpu_devices));
  std::lock_guard lock(detail::cpu_device_count_mutex());  // the check and the store against create()'s read
  if (detail::created_cpu_devices().load() < 0)
    throw std::logic_error(detail::format_message(
        "devtap::set_cpu_device_count({}) after the cpu backend failed to start ({}); its failure is kept", count,
        detail::cpu_start_failure()));
  if (const int created = detail::created_cpu_devices().load(); created != 0)
    throw std::logic_error(detail::format_message(
        "devtap::set_cpu_device_count({}) after the cpu backend was created with {} device(s); call it before "
        "the first use of devtap's backends",
        count, created));
  detail::configured_cpu_devices().store(count);
}

DEVTAP_FUNC cpu_device& as_cpu_device(device& d) {
  if (auto* cpu = dynamic_cast<cpu_device*>(&d)) return *cpu;
  throw backend_error(detail::format_message("Device '{}' is not a cpu device", d.name()));
}

DEVTAP_FUNC cpu_client& as_cpu_client(client& c) {
  if (auto* cpu = dynamic_cast<cpu_client*>(&c)) return *cpu;
  throw backend_error(detail::format_message("Backend '{}' is not the cpu backend", c.platform()));
}

DEVTAP_END_NAMESPACE
