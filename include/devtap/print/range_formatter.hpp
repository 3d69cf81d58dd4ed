#pragma once
// {fmt} formatting of a range argument (array or span, not text) taken from a print record: its
// element type is known only at run time, so it keeps the spec and formats as fmt's own range
// formatter would for a std::span of that type ("[1, 2]", "{::x}", "{:n}"). Needs {fmt}: host only.
#include <devtap/config.hpp>
#include <devtap/print/descriptor.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstddef>
#include <cstdint>
#include <span>

DEVTAP_BEGIN_NAMESPACE
namespace detail {

// A range argument (array or span, not text) in the record, formatted as std::span<const T>.
struct print_range {
  print_kind kind = print_kind::invalid;
  const std::byte* data = nullptr;
  std::size_t count = 0;
};

}  // namespace detail
DEVTAP_END_NAMESPACE

// Formats a print_range as fmt formats a std::span of its element type ("[1, 2]", "{::x}", "{:n}").
template <>
struct fmt::formatter<devtap::detail::print_range> {
  fmt::string_view spec;
  int first_dynamic_id = 0;  // automatic ids of {} widths in the element spec start here

  // The element type is known only at format time: keep the spec, and take the argument ids of
  // its dynamic widths and precisions from the outer context now, as fmt's range formatter would.
  constexpr auto parse(fmt::format_parse_context& ctx) {
    auto it = ctx.begin();
    auto end = it;
    bool first = true;
    while (end != ctx.end() && *end != '}') {
      if (*end == '{') {
        ++end;
        if (end != ctx.end() && *end == '}') {
          const int id = ctx.next_arg_id();
          if (first) first_dynamic_id = id;
          first = false;
        } else {
          int id = 0;
          while (end != ctx.end() && *end >= '0' && *end <= '9') id = id * 10 + (*end++ - '0');
          ctx.check_arg_id(id);
        }
        while (end != ctx.end() && *end != '}') ++end;
        if (end != ctx.end()) ++end;
        continue;
      }
      ++end;
    }
    spec = fmt::string_view(it, static_cast<std::size_t>(end - it));
    return end;
  }

  template <class T>
  auto format_as(const devtap::detail::print_range& r, fmt::format_context& ctx) const {
    const std::span<const T> values(reinterpret_cast<const T*>(r.data), r.count);
    fmt::formatter<std::span<const T>> f;
    fmt::format_parse_context inner(spec, {}, first_dynamic_id);
    inner.advance_to(f.parse(inner));
    return f.format(values, ctx);
  }

  auto format(const devtap::detail::print_range& r, fmt::format_context& ctx) const {
    using devtap::detail::print_kind;
    switch (r.kind) {
      case print_kind::boolean: return format_as<bool>(r, ctx);
      case print_kind::character: return format_as<char>(r, ctx);
      case print_kind::i8: return format_as<signed char>(r, ctx);
      case print_kind::i16: return format_as<std::int16_t>(r, ctx);
      case print_kind::i32: return format_as<std::int32_t>(r, ctx);
      case print_kind::i64: return format_as<std::int64_t>(r, ctx);
      case print_kind::u8: return format_as<unsigned char>(r, ctx);
      case print_kind::u16: return format_as<std::uint16_t>(r, ctx);
      case print_kind::u32: return format_as<std::uint32_t>(r, ctx);
      case print_kind::u64: return format_as<std::uint64_t>(r, ctx);
      case print_kind::f32: return format_as<float>(r, ctx);
      case print_kind::f64: return format_as<double>(r, ctx);
      case print_kind::pointer: return format_as<const void*>(r, ctx);
      default: throw fmt::format_error("devtap::print: unknown argument kind");
    }
  }
};
