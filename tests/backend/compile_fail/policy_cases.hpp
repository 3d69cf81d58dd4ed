#pragma once
// Shared by the compile-fail cases: a well-formed policy to copy from.
#include <devtap/backend/registry.hpp>

#include <memory>
#include <string_view>

struct good_backend {
  static constexpr std::string_view name = "good";
  static constexpr int priority = 1;
  static constexpr bool required = false;
  static std::unique_ptr<devtap::client> create() { return nullptr; }
};
