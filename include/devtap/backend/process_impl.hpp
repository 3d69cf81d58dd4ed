#pragma once
// The definitions of the process lookup (declared in process.hpp): included by that header when
// header-only, compiled once into the library in compiled mode (see config.hpp).
#include <devtap/backend/process.hpp>

DEVTAP_BEGIN_NAMESPACE

DEVTAP_FUNC process_info current_process() {
  return detail::process_info_from([](const char* name) -> const char* { return std::getenv(name); });
}

DEVTAP_END_NAMESPACE
