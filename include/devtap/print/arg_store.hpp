#pragma once
// The arguments of one print record as {fmt} arguments: a dynamic_format_arg_store of values and of
// references into the record, refilled for every record (no allocation once warm). Needs {fmt}.
#include <devtap/config.hpp>
#include <devtap/print/descriptor.hpp>
#include <devtap/print/range_formatter.hpp>
#include <devtap/print/record_view.hpp>
#include <devtap/print/registry.hpp>
#include <devtap/ring/layout.hpp>

#include <fmt/args.h>
#include <fmt/format.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

class print_arg_store {
public:
  print_arg_store() {
    ranges_.resize(print_max_args);  // stable addresses: the store refers to them
    store_.reserve(print_max_args, 0);
  }

  const fmt::dynamic_format_arg_store<fmt::format_context>& args() const { return store_; }

  // Fills the store from the record; false when the bytes do not fit the definition.
  bool collect(const print_format_def& def, const print_record_view& r) {
    store_.clear();
    const std::size_t nargs = def.descs.size();
    // the spans, in order
    span_data_.clear();
    std::size_t pos = 0;
    for (std::size_t a = 0; a < nargs; ++a) {
      const std::uint32_t d = def.descs[a];
      if (desc_form(d) != print_form::span) continue;
      if (r.span_bytes - pos < 8) return false;
      const std::uint64_t count = print_load_u64(r.spans + pos);
      const std::size_t size = print_kind_size(desc_kind(d));
      const std::size_t room = r.span_bytes - pos - 8;
      if (count > room / size || align8(static_cast<std::size_t>(count) * size) > room) return false;
      span_data_.push_back({desc_kind(d), r.spans + pos + 8, static_cast<std::size_t>(count)});
      pos += 8 + align8(static_cast<std::size_t>(count) * size);
    }
    if (pos != r.span_bytes) return false;
    for (std::size_t a = 0; a < nargs; ++a) {
      const std::uint32_t d = def.descs[a];
      const print_kind k = desc_kind(d);
      switch (desc_form(d)) {
        case print_form::scalar:
          if (!push_scalar(k, r.args + def.offsets[a])) return false;
          break;
        case print_form::array:
          if (!push_range(a, {k, r.args + def.offsets[a], desc_extent(d)}, false)) return false;
          break;
        case print_form::span:
          if (!push_range(a, span_data_[def.offsets[a]], true)) return false;
          break;
      }
    }
    return true;
  }

private:
  template <class T>
  void push_value(const std::byte* at) {
    T v;
    std::memcpy(&v, at, sizeof(T));
    store_.push_back(v);
  }

  bool push_scalar(print_kind k, const std::byte* at) {
    switch (k) {
      case print_kind::boolean: {
        const auto b = static_cast<unsigned char>(*at);
        if (b > 1) return false;
        store_.push_back(b != 0);
        return true;
      }
      case print_kind::character: push_value<char>(at); return true;
      case print_kind::i8: push_value<signed char>(at); return true;
      case print_kind::i16: push_value<std::int16_t>(at); return true;
      case print_kind::i32: push_value<std::int32_t>(at); return true;
      case print_kind::i64: push_value<long long>(at); return true;
      case print_kind::u8: push_value<unsigned char>(at); return true;
      case print_kind::u16: push_value<std::uint16_t>(at); return true;
      case print_kind::u32: push_value<std::uint32_t>(at); return true;
      case print_kind::u64: push_value<unsigned long long>(at); return true;
      case print_kind::f32: push_value<float>(at); return true;
      case print_kind::f64: push_value<double>(at); return true;
      case print_kind::pointer: {
        std::uint64_t v;
        std::memcpy(&v, at, 8);
        store_.push_back(reinterpret_cast<const void*>(static_cast<std::uintptr_t>(v)));
        return true;
      }
      default: return false;
    }
  }

  // Text (char arrays stop at their first NUL, as fmt prints char arrays; spans do not) or a range.
  bool push_range(std::size_t a, print_range range, bool is_span) {
    if (range.kind == print_kind::character) {
      const char* chars = reinterpret_cast<const char*>(range.data);
      std::size_t n = range.count;
      if (!is_span) {
        const void* nul = std::memchr(chars, 0, n);
        if (nul != nullptr) n = static_cast<std::size_t>(static_cast<const char*>(nul) - chars);
      }
      store_.push_back(fmt::string_view(chars, n));
      return true;
    }
    if (range.kind == print_kind::boolean)
      for (std::size_t i = 0; i < range.count; ++i)
        if (static_cast<unsigned char>(range.data[i]) > 1) return false;
    ranges_[a] = range;
    store_.push_back(std::cref(ranges_[a]));
    return true;
  }

  fmt::dynamic_format_arg_store<fmt::format_context> store_;
  std::vector<print_range> ranges_;
  std::vector<print_range> span_data_;
};

// Refuses a dynamic width or precision above print_max_width as {fmt} refuses a negative one: by
// throwing before a byte of the line is built (the formatter's one error path makes the error line).
inline void print_check_widths(const print_format_def& def, const print_record_view& r) {
  for (std::uint64_t m = def.check.width_arguments; m != 0; m &= m - 1) {
    const auto a = static_cast<std::size_t>(std::countr_zero(m));
    const print_kind k = desc_kind(def.descs[a]);  // an integer: the checker refuses any other
    const std::size_t size = print_kind_size(k);
    std::uint64_t v = 0;
    std::memcpy(&v, r.args + def.offsets[a], size);  // the host's byte order, as push_value reads it
    if (k <= print_kind::i64 && (v >> (8 * size - 1)) != 0) continue;  // negative: {fmt}'s own error
    if (v > print_max_width && v <= 2147483647)  // above INT_MAX {fmt} refuses it first: "number is too big"
      throw fmt::format_error(fmt::format("width or precision {} is above devtap::print's limit of {}", v, print_max_width));
  }
}

}  // namespace detail
DEVTAP_END_NAMESPACE
