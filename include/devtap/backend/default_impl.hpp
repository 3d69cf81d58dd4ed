#pragma once
// The definitions of the process-wide registry (declared in default.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/default.hpp>

DEVTAP_BEGIN_NAMESPACE

namespace detail {
// The platforms list set in code, and whether the default registry exists yet (then it is too late).
struct default_platforms_config {
  std::mutex mutex;
  std::string platforms;
  bool set = false;
  bool created = false;
};
DEVTAP_FUNC default_platforms_config& default_platforms() {
  static auto* const config = new default_platforms_config();  // leaked, like the registry
  return *config;
}
}  // namespace detail

DEVTAP_FUNC default_registry& default_registry_instance() {
  static default_registry* const instance = [] {  // leaked on purpose, see default.hpp
    auto& config = detail::default_platforms();
    std::lock_guard lock(config.mutex);
    config.created = true;
    const char* env = std::getenv("DEVTAP_PLATFORMS");
    // White space and commas alone name no backend, as empty does: set_platforms() then holds.
    const bool env_names_none =
        env == nullptr || std::string_view(env).find_first_not_of(" \t\n\v\f\r,") == std::string_view::npos;
    if (env_names_none && config.set) return new default_registry(config.platforms);
    return new default_registry();  // reads DEVTAP_PLATFORMS: the environment wins
  }();
  return *instance;
}

DEVTAP_FUNC void set_platforms(std::string_view platforms) {
  auto& config = detail::default_platforms();
  std::lock_guard lock(config.mutex);
  if (config.created)
    throw std::logic_error("devtap::set_platforms('" + std::string(platforms) +
                           "') after the default registry was created; call it before the first use of devtap's "
                           "backends");
  config.platforms = std::string(platforms);
  config.set = true;
}

DEVTAP_FUNC client& get_backend(std::string_view name) { return default_registry_instance().get_backend(name); }

DEVTAP_FUNC client& get_backend() { return default_registry_instance().get_backend(); }

DEVTAP_FUNC std::vector<client*> backends() { return default_registry_instance().backends(); }

DEVTAP_FUNC std::map<std::string, std::string, std::less<>> backend_errors() {
  return default_registry_instance().backend_errors();
}

DEVTAP_FUNC std::string_view default_backend() { return default_registry_instance().default_backend(); }

DEVTAP_FUNC std::span<device* const> devices(std::string_view name) { return default_registry_instance().devices(name); }

DEVTAP_FUNC std::span<device* const> devices() { return default_registry_instance().devices(); }

DEVTAP_FUNC std::size_t device_count(std::string_view name) { return default_registry_instance().device_count(name); }

DEVTAP_FUNC std::size_t device_count() { return default_registry_instance().device_count(); }

DEVTAP_FUNC int process_index(std::string_view name) { return default_registry_instance().process_index(name); }

DEVTAP_FUNC int process_index() { return default_registry_instance().process_index(); }

DEVTAP_FUNC int process_count() { return get_backend().process_count(); }

DEVTAP_FUNC std::span<cpu_device* const> cpu_devices() { return as_cpu_client(get_backend("cpu")).cpu_devices(); }

DEVTAP_END_NAMESPACE
