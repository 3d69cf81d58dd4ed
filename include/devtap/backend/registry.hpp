#pragma once
/** `registry<B...>`: a compile-time list of backend policies, each started lazily, at most once. */
#include <devtap/backend/device.hpp>
#include <devtap/backend/init_waits.hpp>
#include <devtap/backend/policy.hpp>
#include <devtap/config.hpp>
#include <devtap/detail/text.hpp>
#include <devtap/errors.hpp>
#include <devtap/log.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

DEVTAP_BEGIN_NAMESPACE

/** The backends `B...`, sorted by priority at compile time, each created lazily and at most once.
 * Nothing runs at construction but parsing the platforms list: a backend's `create()` is first
 * called by `get_backend(name)` (that backend only) or `backends()` (all of them). The outcome of
 * `create()` — a client or the error text — is kept for the registry's lifetime. Thread-safe; not
 * copyable or movable. */
template <class... B>
class registry {
  static_assert(sizeof...(B) > 0, "devtap::registry needs at least one backend");
  static_assert((check_backend_policy<B>() && ...), "devtap::registry: a backend is not a devtap::backend_policy");

  static constexpr std::size_t count = sizeof...(B);
  static constexpr std::array<detail::backend_entry, count> entries_{
      detail::backend_entry{detail::policy_name<B>(), detail::policy_priority<B>(), detail::policy_required<B>(),
                            &detail::policy_create<B>}...};
  static_assert(detail::names_unique(entries_), "devtap::registry: two backends have the same name (names are compared ignoring case)");
  static constexpr std::array<std::size_t, count> order_ = detail::order_by_priority(entries_);

  template <std::size_t... I>
  static consteval std::array<std::string_view, count> sorted_names(std::index_sequence<I...>) {
    return {entries_[order_[I]].name...};
  }

public:
  /** Backend names, highest priority first (ties: declaration order). */
  static constexpr std::array<std::string_view, count> names = sorted_names(std::make_index_sequence<count>{});
  /** Backend names in declaration order (used in "known: ..." messages). */
  static constexpr std::array<std::string_view, count> declared_names{detail::policy_name<B>()...};

  /** Reads the platforms list from `DEVTAP_PLATFORMS` (unset or empty: every backend). */
  registry() : registry(env_platforms()) {}

  /** `platforms`: comma-separated backend names that restrict and order the backends, as
   * `DEVTAP_PLATFORMS` does; empty means every backend, by priority. Names are case-insensitive,
   * white space around the list and each name is ignored, empty items are skipped, and `gpu` means
   * `cuda` (unless a backend is named `gpu`). An unknown or repeated name is reported by every call
   * that needs the backends, not here. */
  explicit registry(std::string_view platforms) {
    platforms = detail::trim(platforms);
    platforms_ = std::string(platforms);
    std::size_t start = 0;
    while (start <= platforms.size()) {
      const std::size_t comma = std::min(platforms.find(',', start), platforms.size());
      const std::string_view item = detail::trim(platforms.substr(start, comma - start));
      start = comma + 1;
      if (item.empty() || !config_error_.empty()) continue;
      const std::size_t index = platform_index(item);
      if (index == count)
        config_error_ = detail::format_message("Unknown backend '{}' in DEVTAP_PLATFORMS='{}' (known: {}{})",
                                               detail::printable(item, true), detail::printable(platforms_, true),
                                               known_names(), detail::cuda_hint(item, index_of("cuda") != count));
      else if (std::find(enabled_.begin(), enabled_.end(), index) != enabled_.end())
        config_error_ = detail::format_message("Backend '{}' is named twice in DEVTAP_PLATFORMS='{}'",
                                               entries_[index].name, detail::printable(platforms_, true));
      else enabled_.push_back(index);
    }
    restricted_ = !enabled_.empty() || !config_error_.empty();
    if (!restricted_)
      for (std::size_t i : order_) enabled_.push_back(i);
  }

  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  /** Waits for the calls under way on other threads, then destroys each client (last declared
   * first) while the rest of the registry still lives: a client's destructor runs the work queued on
   * its devices, and that work may still ask this registry. From the moment this begins, every call
   * throws `backend_error` ("... is being destroyed"). A client, device or span a call returned
   * before is the registry's: not to be used once its client is destroyed. */
  ~registry() {
    destroying_.store(true, std::memory_order_seq_cst);  // partner: call_guard's load, after its increment
    const int mine = call_guard::on_this_thread(*this);  // (a create() or log sink destroying it: not waited for)
    while (in_flight_.load(std::memory_order_seq_cst) > mine) std::this_thread::sleep_for(std::chrono::microseconds(100));
    for (std::size_t i = count; i-- > 0;) slots_[i].instance.reset();  // (reset: null before the delete)
  }

  /** Initialises the backend `name` only (once) and returns its client.
   * Throws `backend_error`: unknown name, not enabled by the platforms list, its `create()` failed
   * (with the recorded reason), or it has no devices. Naming "cpu" counts as asking for cpu. */
  client& get_backend(std::string_view name) {
    const call_guard guard(*this);
    check_config();
    const std::size_t index = index_of(name);
    if (index == count)
      throw backend_error(detail::format_message("Unknown backend '{}' (known: {}{})", detail::printable(name, true), known_names(),
                                                 name == "cuda" ? detail::cuda_hint(name, contains("cuda")) : ""));
    if (std::find(enabled_.begin(), enabled_.end(), index) == enabled_.end())
      throw backend_error(detail::format_message("Backend '{}' is not enabled by DEVTAP_PLATFORMS={}", name,
                                                 detail::printable(platforms_, true)));
    if (name == "cpu") cpu_requested_.store(true, std::memory_order_relaxed);
    return usable(index);
  }

  /** The default backend's client: the highest-priority backend that initialised (initialises all). */
  client& get_backend() {
    const call_guard guard(*this);  // (why_none_text() reads the clients too)
    auto all = backends();
    if (all.empty())
      throw backend_error(detail::format_message("No backend could be initialized (errors: {})", why_none_text()));
    return *all.front();
  }

  /** Initialises every enabled backend (each once) and returns the usable ones, default first.
   *
   * Without a platforms list: a non-required backend that fails is recorded (`backend_errors()`)
   * and skipped, a required one's failure is thrown as `backend_error`, a backend with no devices is
   * skipped, and the order is by priority. With a platforms list: its order, and any listed backend
   * that fails or has no devices is an error. If the default is "cpu", the registry holds another
   * backend, and the user did not ask for cpu (by name or by a platforms list), warns once:
   * "No GPU found, falling back to CPU; set DEVTAP_LOG=info or call devtap::backend_errors() to see why". */
  std::vector<client*> backends() {
    const call_guard guard(*this);
    check_config();
    std::vector<client*> usable_clients;
    for (std::size_t index : enabled_) {
      slot& s = ensure(index);
      if (!s.instance) {
        if (restricted_ || entries_[index].required) throw failed_error(index, s);
        continue;
      }
      if (s.instance->device_count() == 0) {
        if (restricted_) throw no_devices_error(index);
        continue;
      }
      usable_clients.push_back(s.instance.get());
    }
    constexpr std::size_t cpu = index_of("cpu");
    if constexpr (cpu != count && count > 1) {  // cpu alone: no GPU backend was compiled in to fall back from
      // A platforms list is the user's explicit choice, so it never warns. Fallen back: a backend
      // ranked above cpu was tried and cannot be used (one ranked below it was never the default).
      bool skipped_above = false;
      for (std::size_t index : enabled_) {
        if (index == cpu) break;
        skipped_above = skipped_above || !slots_[index].instance || slots_[index].instance->device_count() == 0;
      }
      const bool fell_back = skipped_above && !usable_clients.empty() && usable_clients.front() == slots_[cpu].instance.get();
      if (fell_back && !restricted_ && !cpu_requested_.load(std::memory_order_relaxed) &&
          !warned_.exchange(true, std::memory_order_relaxed))
        log(log_level::warn, "{}",  // "{}": a zero-argument log() warns under nvcc (#186)
            "No GPU found, falling back to CPU; set DEVTAP_LOG=info or call devtap::backend_errors() to see why");
    }
    return usable_clients;
  }

  /** The name of the default backend (see `get_backend()`). */
  std::string_view default_backend() {
    const call_guard guard(*this);
    client& c = get_backend();
    for (std::size_t i = 0; i < count; ++i)
      if (slots_[i].instance.get() == &c) return entries_[i].name;
    return c.platform();  // unreachable
  }

  /** Failures recorded so far, backend name → reason. Initialises nothing: call `backends()` first
   * to have every backend tried. */
  std::map<std::string, std::string, std::less<>> backend_errors() const {
    const call_guard guard(*this);
    std::map<std::string, std::string, std::less<>> errors;
    for (std::size_t i = 0; i < count; ++i) {
      const slot& s = slots_[i];
      if (s.done.load(std::memory_order_acquire) && !s.instance) errors.emplace(entries_[i].name, s.error);
    }
    return errors;
  }

  /** The devices of backend `name` (initialises it). */
  std::span<device* const> devices(std::string_view name) {
    const call_guard guard(*this);
    return get_backend(name).local_devices();
  }
  /** The devices of the default backend. */
  std::span<device* const> devices() {
    const call_guard guard(*this);
    return get_backend().local_devices();
  }
  /** Number of devices of backend `name` (initialises it). */
  std::size_t device_count(std::string_view name) {
    const call_guard guard(*this);  // (across the client's call too)
    return get_backend(name).device_count();
  }
  /** Number of devices of the default backend. */
  std::size_t device_count() {
    const call_guard guard(*this);
    return get_backend().device_count();
  }
  /** This process's index as backend `name` sees it. */
  int process_index(std::string_view name) {
    const call_guard guard(*this);
    return get_backend(name).process_index();
  }
  /** This process's index as the default backend sees it. */
  int process_index() {
    const call_guard guard(*this);
    return get_backend().process_index();
  }

  /** True when `name` is one of this registry's backends. */
  static constexpr bool contains(std::string_view name) noexcept { return index_of(name) != count; }

private:
  struct slot {
    std::atomic<bool> claimed{false};   // a thread has taken create() on (ensure)
    std::atomic<bool> done{false};      // set (release) when instance/error are final
    std::atomic<std::thread::id> initialising{};  // the thread running create(), until it is done
    std::unique_ptr<client> instance;   // null: failed, see error
    std::string error;
  };

  static std::string env_platforms() {
    const char* text = std::getenv("DEVTAP_PLATFORMS");
    return text ? std::string(text) : std::string();
  }

  static constexpr std::size_t index_of(std::string_view name) noexcept {
    for (std::size_t i = 0; i < count; ++i)
      if (entries_[i].name == name) return i;
    return count;
  }

  /** The backend a platforms-list item names: case-insensitive; "gpu" is cuda's alias. */
  static constexpr std::size_t platform_index(std::string_view item) noexcept {
    for (std::size_t i = 0; i < count; ++i)
      if (detail::equal_ignoring_case(entries_[i].name, item)) return i;
    return detail::equal_ignoring_case(item, "gpu") ? index_of("cuda") : count;
  }

  static std::string known_names() {
    return detail::join(declared_names, [](std::string_view n) { return n; });
  }

  /** A call under way: ~registry() waits until none is, and from its start every call throws. */
  class call_guard {
  public:
    explicit call_guard(const registry& r) : r_(r), outer_(innermost()) {
      r_.in_flight_.fetch_add(1, std::memory_order_seq_cst);
      if (r_.destroying_.load(std::memory_order_seq_cst)) {  // partner: ~registry()'s store, before its wait
        r_.in_flight_.fetch_sub(1, std::memory_order_seq_cst);
        throw backend_error(detail::format_message("devtap::registry of backends {} is being destroyed", known_names()));
      }
      innermost() = this;
    }
    ~call_guard() {
      innermost() = outer_;
      r_.in_flight_.fetch_sub(1, std::memory_order_seq_cst);
    }
    call_guard(const call_guard&) = delete;
    call_guard& operator=(const call_guard&) = delete;
    /** How many of this thread's calls under way are in `r`. */
    static int on_this_thread(const registry& r) noexcept {
      int n = 0;
      for (const call_guard* g = innermost(); g != nullptr; g = g->outer_) n += &g->r_ == &r;
      return n;
    }

  private:
    // This thread's innermost call: a plain pointer, valid at exit (a thread_local with a destructor is not).
    static const call_guard*& innermost() noexcept {
      thread_local const call_guard* top = nullptr;
      return top;
    }
    const registry& r_;
    const call_guard* outer_;  // the call this one is inside (on this thread)
  };

  void check_config() const {
    if (!config_error_.empty()) throw backend_error(config_error_);
  }

  std::string why_none_text() const {  // the failures, and the backends without devices
    auto errors = backend_errors();
    for (std::size_t i = 0; i < count; ++i)
      if (slots_[i].done.load(std::memory_order_acquire) && slots_[i].instance && slots_[i].instance->device_count() == 0)
        errors.emplace(entries_[i].name, "provides no devices");
    if (errors.empty()) return "none";
    return detail::join(errors, [](const auto& kv) { return kv.first + ": " + kv.second; }, "; ");
  }

  backend_error failed_error(std::size_t index, const slot& s) const {
    return backend_error(detail::format_message("Unable to initialize backend '{}': {}", entries_[index].name, s.error));
  }
  static backend_error no_devices_error(std::size_t index) {
    return backend_error(detail::format_message("Backend '{}' provides no devices", entries_[index].name));
  }

  client& usable(std::size_t index) {
    slot& s = ensure(index);
    if (!s.instance) throw failed_error(index, s);
    if (s.instance->device_count() == 0) throw no_devices_error(index);
    return *s.instance;
  }

  slot& ensure(std::size_t index) {
    slot& s = slots_[index];
    if (s.done.load(std::memory_order_acquire)) return s;
    // Asked by its own create() (or a log sink its lines reach), or by another thread's create()
    // that it waits for (through any registry), it would wait for itself. (By other means: hangs.)
    auto& waits = detail::init_waits::process();
    if (const auto ring = waits.start({&s.initialising, entries_[index].name}); ring.size() == 1)
      throw backend_error(detail::format_message(
          "Backend '{}' was asked for during its own initialisation (from its create(), or a log sink it logged to)",
          entries_[index].name));
    else if (!ring.empty())
      throw backend_error(detail::format_message(
          "Backend '{}' was asked for during its own initialisation, by the create() of backend{} {} on another thread, "
          "which it waits for: their create()s ask for each other", entries_[index].name, ring.size() > 2 ? "s" : "",
          detail::join(std::span(ring).subspan(1), [](std::string_view n) { return "'" + std::string(n) + "'"; })));
    // Once, as call_once, but never waited for from a log sink: another thread's create() logs its
    // start-up lines, which wait for the sink. (initialise() stores its outcome, never throws.)
    if (bool no = false; s.claimed.compare_exchange_strong(no, true, std::memory_order_acq_rel)) {
      initialise(index, s);
      s.done.notify_all();
    } else if (!s.done.load(std::memory_order_acquire)) {
      if (detail::inside_log_sink()) {
        waits.done();
        throw backend_error(detail::format_message("Backend '{}' was asked for from a log sink while another thread "
                                                   "starts it, whose start-up lines wait for the sink", entries_[index].name));
      }
      s.done.wait(false, std::memory_order_acquire);  // partner: initialise's release store, then notify_all
    }
    waits.done();
    return s;
  }

  void initialise(std::size_t index, slot& s) noexcept {
    const std::string_view name = entries_[index].name;
    s.initialising.store(std::this_thread::get_id(), std::memory_order_relaxed);
    try {  // before create(): a factory that hangs is named by the last line logged
      log(log_level::debug, "Initializing backend '{}'", name);
    } catch (...) {  // only an allocation failure; the logger itself contains a throwing sink
    }
    try {
      s.instance = entries_[index].create();
      if (!s.instance) s.error = "create() returned no client";
      else if (const std::string defect = detail::devices_defect(s.instance->local_devices()); !defect.empty())
        throw backend_error("create() returned a client whose local_devices() " + defect);
    } catch (const std::exception& e) {
      s.instance.reset();
      // Quoted as outside text is (escapes, megabytes): it goes into every later error about it.
      s.error = *detail::message_of(e) != '\0' ? detail::printable(detail::message_of(e), false, 2000) : "unknown error";
    } catch (...) {
      s.instance.reset();
      s.error = "unknown exception";
    }
    try {  // formatting may fail to allocate; initialisation has succeeded or failed regardless
      if (s.instance && log_enabled(log_level::debug)) {
        const auto devs = s.instance->local_devices();
        log(log_level::debug, "Initialized backend {}: process_index {}, device_count {}, local_devices [{}]", name,
            s.instance->process_index(), devs.size(),
            detail::join(devs, [](const device* d) -> const std::string& { return d->name(); }));
      } else if (!s.instance) {
        log(log_level::info, "Unable to initialize backend '{}': {}", name, s.error);
      }
      if (s.instance && s.instance->device_count() == 0)  // skipped by backends(): say why, as for a failure
        log(log_level::info, "Backend '{}' provides no devices", name);
    } catch (...) {
    }
    s.initialising.store(std::thread::id(), std::memory_order_relaxed);
    s.done.store(true, std::memory_order_release);
  }

  std::array<slot, count> slots_;       // by declaration index
  std::vector<std::size_t> enabled_;    // declaration indices, in the order backends() tries them
  bool restricted_ = false;             // a platforms list was given
  std::string platforms_;               // its text, for messages
  std::string config_error_;            // the first unknown or repeated name in the platforms list
  std::atomic<bool> cpu_requested_{false}, warned_{false};
  std::atomic<bool> destroying_{false};  // ~registry() has begun: see call_guard
  mutable std::atomic<int> in_flight_{0};  // calls under way (call_guard)
};

DEVTAP_END_NAMESPACE
