#pragma once
// How attach_print sets a printer up: the line prefixes, the sink, the options. fmt-free; host only
// in use, but parsed by nvcc in a .cu file's host code.
#include <devtap/config.hpp>
#include <devtap/fwd.hpp>

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

DEVTAP_BEGIN_NAMESPACE

/** Prefixes of each printed line; combine with `|`. Times are the host's when it formats the line. */
enum class print_prefix : unsigned {
  none = 0,
  device = 1,      ///< "[cpu:0] "
  elapsed = 2,     ///< "[    1.234567] ": seconds since attach_print
  wall_clock = 4,  ///< "[13:37:42.123456] ": local time of day
};
constexpr print_prefix operator|(print_prefix a, print_prefix b) {
  return static_cast<print_prefix>(static_cast<unsigned>(a) | static_cast<unsigned>(b));
}
/** True when `set` includes `flag`. */
constexpr bool has_prefix(print_prefix set, print_prefix flag) {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(flag)) != 0;
}

/** Where printed lines go: a FILE* (stdout by default), or a callable taking `std::string_view line`
 *  (without its '\n'), optionally followed by `const devtap::device&`. A callable is never called
 *  concurrently (devices take turns); a FILE gets each line in one fwrite. */
class print_sink {
public:
  using callback_type = std::function<void(std::string_view, const device&)>;

  print_sink() : file_(stdout) {}
  print_sink(std::FILE* file) : file_(file) {}  // NOLINT: implicit, so `.sink = stderr` reads well
  template <class F>
    requires(!std::is_convertible_v<F, std::FILE*> &&
             (std::is_invocable_v<F&, std::string_view, const device&> || std::is_invocable_v<F&, std::string_view>))
  print_sink(F fn) {  // NOLINT: implicit, so `.sink = [&](std::string_view line) {...}` reads well
    static_assert(std::is_copy_constructible_v<F>,
                  "devtap::print_sink: the callable must be copyable (it is kept in a std::function); "
                  "hold what cannot be copied by std::shared_ptr");
    // Remembered rather than wrapped: a wrapped empty function would only fail at the first line.
    if constexpr (is_nullable<F>::value) {
      if (fn == nullptr) {
        empty_callable_ = true;
        return;
      }
    }
    if constexpr (std::is_invocable_v<F&, std::string_view, const device&>)
      callback_ = std::move(fn);
    else
      callback_ = [f = std::move(fn)](std::string_view line, const device&) mutable { f(line); };
  }

  std::FILE* file() const noexcept { return file_; }
  const callback_type& callback() const noexcept { return callback_; }
  /** Why this sink cannot take lines ("a null FILE*", "an empty callable"), or nullptr when it can;
   *  attach_print refuses such a sink with std::invalid_argument. */
  const char* unusable() const noexcept {
    if (callback_ || file_ != nullptr) return nullptr;
    return empty_callable_ ? "an empty callable (an empty std::function or a null function pointer)" : "a null FILE*";
  }

private:
  // The callables that can be empty: std::function, function and member pointers.
  template <class F>
  struct is_nullable : std::bool_constant<std::is_pointer_v<F> || std::is_member_pointer_v<F>> {};
  template <class R, class... A>
  struct is_nullable<std::function<R(A...)>> : std::true_type {};

  std::FILE* file_ = nullptr;
  callback_type callback_;
  bool empty_callable_ = false;
};

/** How attach_print sets a printer up. */
struct print_options {
  print_sink sink{};                          ///< stdout unless told otherwise
  print_prefix prefix = print_prefix::none;   ///< what each line starts with
  bool flush_each_line = false;               ///< fflush a FILE sink after every line (also off a terminal)
  std::string name = "print";                 ///< the consumer's name in the receiver's errors
};

DEVTAP_END_NAMESPACE
