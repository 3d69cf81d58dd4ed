// What devtap::print refuses at compile time, one case per -DDEVTAP_PRINT_CASE_<name>; with
// -DDEVTAP_CONTROL each case is its sound twin and compiles (tests/print/meson.build).
#include <devtap/print.hpp>

#include <memory>
#include <string>
#include <string_view>

int step_count();  // (function_name)

void cases(const devtap::printer& out) {
#if defined(DEVTAP_PRINT_CASE_too_many)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{} {}">(out, 1, 2);
#  else
  devtap::print<"{}">(out, 1, 2);
#  endif
#elif defined(DEVTAP_PRINT_CASE_too_few)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{} {}">(out, 1, 2.0);
#  else
  devtap::print<"{} {}">(out, 1);
#  endif
#elif defined(DEVTAP_PRINT_CASE_index_past_end)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{1} {0}">(out, 1, 2);
#  else
  devtap::print<"{2} {0}">(out, 1, 2);
#  endif
#elif defined(DEVTAP_PRINT_CASE_char_pointer)
  const char* name = "x";
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{} {}">(out, std::string_view(name), static_cast<const void*>(name));
#  else
  devtap::print<"{}">(out, name);
#  endif
#elif defined(DEVTAP_PRINT_CASE_unsupported_type)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{}">(out, std::string_view("text"));
#  else
  devtap::print<"{}">(out, std::string("text"));
#  endif
#elif defined(DEVTAP_PRINT_CASE_long_double)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{}">(out, 1.0);
#  else
  devtap::print<"{}">(out, 1.0L);
#  endif
#elif defined(DEVTAP_PRINT_CASE_float_spec_for_int)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{:.3f}">(out, 1.0);
#  else
  devtap::print<"{:.3f}">(out, 1);
#  endif
#elif defined(DEVTAP_PRINT_CASE_precision_for_int)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{:8}">(out, 1);
#  else
  devtap::print<"{:.3}">(out, 1);
#  endif
#elif defined(DEVTAP_PRINT_CASE_sign_for_unsigned)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{:+}">(out, 1);
#  else
  devtap::print<"{:+}">(out, 1u);
#  endif
#elif defined(DEVTAP_PRINT_CASE_unmatched_brace)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"a }} b">(out);
#  else
  devtap::print<"a } b">(out);
#  endif
#elif defined(DEVTAP_PRINT_CASE_mixed_indexing)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{0} {1}">(out, 1, 2);
#  else
  devtap::print<"{} {1}">(out, 1, 2);
#  endif
#elif defined(DEVTAP_PRINT_CASE_dynamic_width_not_int)
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{:{}}">(out, 1, 5);
#  else
  devtap::print<"{:{}}">(out, 1, 5.0);
#  endif
#elif defined(DEVTAP_PRINT_CASE_format_without_nul)
  // A char array as the format: without its terminator it would lose its last character.
  static constexpr char with_nul[4] = {'a', 'b', 'c', '\0'};
  static constexpr char without_nul[3] = {'a', 'b', 'c'};
#  if defined(DEVTAP_CONTROL)
  devtap::print<with_nul>(out);
  (void)without_nul;
#  else
  devtap::print<without_nul>(out);
  (void)with_nul;
#  endif
#elif defined(DEVTAP_PRINT_CASE_move_only_sink)
  // A sink callable that cannot be copied (it is kept in a std::function): devtap's message, not
  // only the standard library's.
  (void)out;
#  if defined(DEVTAP_CONTROL)
  const devtap::print_sink sink([held = std::make_shared<int>(0)](std::string_view) { (void)held; });
#  else
  const devtap::print_sink sink([held = std::make_unique<int>(0)](std::string_view) { (void)held; });
#  endif
  (void)sink;
#elif defined(DEVTAP_PRINT_CASE_function_name)
  // A function's name where its result or its address was meant: its own message, not the list of
  // supported types.
#  if defined(DEVTAP_CONTROL)
  devtap::print<"{} {}">(out, step_count(), &step_count);
#  else
  devtap::print<"{}">(out, step_count);
#  endif
#else
#  error "no DEVTAP_PRINT_CASE_ given"
#endif
}

int main() {}
