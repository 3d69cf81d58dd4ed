#pragma once
// The formats the host knows (host only, fmt-free): host threads register a format before their
// first record of it; CUDA devices define theirs in-band and the reader registers it.
#include <devtap/config.hpp>
#include <devtap/print/check.hpp>
#include <devtap/print/wire.hpp>

#if !defined(__CUDA_ARCH__)
#  include <devtap/log.hpp>

#  include <algorithm>
#  include <atomic>
#  include <cstddef>
#  include <cstdint>
#  include <memory>
#  include <mutex>
#  include <string>
#  include <string_view>
#  include <unordered_map>
#  include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A format the host knows: its text and argument descriptors, and where each argument is.
struct print_format_def {
  std::uint64_t id = 0;
  std::string text;
  std::vector<std::uint32_t> descs;
  std::vector<std::size_t> offsets;  // fixed-size arguments: offset in the block; spans: ordinal
  std::size_t arg_bytes = 0;
  std::size_t span_count = 0;
  print_check_result check{};  // the checker's verdict (device definitions are checked here)
  // Another format hashed to this id (the registry keeps the first, and `other_text` once set):
  // from then on a record of this id cannot be told apart, and prints as an error line.
  std::atomic<bool> id_shared{false};
  std::string other_text;  // (written once, before id_shared is set; read after it is)
};

// Builds a definition; nullptr-equivalent (empty unique_ptr) when the descriptors are invalid.
inline std::unique_ptr<print_format_def> make_print_format_def(std::uint64_t id, std::string_view text,
                                                               const std::uint32_t* descs, std::size_t nargs) {
  auto def = std::make_unique<print_format_def>();
  def->id = id;
  def->text.assign(text);
  def->descs.assign(descs, descs + nargs);
  def->offsets.assign(nargs, 0);
  const print_layout l = print_compute_layout(descs, nargs, def->offsets.data());
  if (!l.ok) return {};
  def->arg_bytes = l.arg_bytes;
  def->span_count = l.span_count;
  def->check = check_print_format(def->text.data(), def->text.size(), descs, nargs);
  return def;
}

// Every format this process has learned, by id (entries are never removed: pointers stay valid).
class print_registry {
public:
  // Adds a definition. A second one with the same id is ignored; a different one (two formats
  // whose ids collide) marks the id shared, and is logged.
  const print_format_def* add(std::uint64_t id, std::string_view text, const std::uint32_t* descs, std::size_t nargs) {
    std::lock_guard lock(mutex_);
    if (auto it = formats_.find(id); it != formats_.end()) {
      print_format_def& known = *it->second;
      if (known.text != text || known.descs.size() != nargs ||
          !std::equal(known.descs.begin(), known.descs.end(), descs)) {
        if (!known.id_shared.load(std::memory_order_relaxed)) {  // (logged once, as the first collision)
          known.other_text.assign(text);
          known.id_shared.store(true, std::memory_order_release);  // partner: the formatter's acquire load
          log(log_level::error, "devtap::print: two formats share the id {:#018x} (\"{}\" and \"{}\"): records of "
              "either print as error lines from now on", id, known.text, std::string(text));
        }
      }
      return &known;
    }
    auto def = make_print_format_def(id, text, descs, nargs);
    if (!def) return nullptr;
    const print_format_def* p = def.get();
    formats_.emplace(id, std::move(def));
    return p;
  }

  const print_format_def* find(std::uint64_t id) const {
    std::lock_guard lock(mutex_);
    auto it = formats_.find(id);
    return it == formats_.end() ? nullptr : it->second.get();
  }

private:
  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<print_format_def>> formats_;
};

// The process-wide registry (function-local: no static-initialisation order to worry about). Never
// destroyed, as the logger and the open-receiver list: receivers closed at exit (the exit handler, a
// static receiver) still format the prints they drain, after function-local statics are gone.
inline print_registry& global_print_registry() {
  static auto* const registry = new print_registry();
  return *registry;
}

}  // namespace detail
DEVTAP_END_NAMESPACE
#endif  // !__CUDA_ARCH__
