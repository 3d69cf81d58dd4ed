// Format ids pinned for g++ and clang (tests/print/check.cpp) and nvcc's device pass
// (tests/print/print_nvcc.cu): X(format, id, argument types...).
#pragma once
#include <span>
#include <string_view>

#define DEVTAP_PRINT_ID_CASES(X)                                                                       \
  X("step {} loss {:.3f}", 0x501654916a2af9b0ull, int, float)                                          \
  X("{} {} {}", 0x4f0768d7cdfd5918ull, bool, char, const void*)                                        \
  X("{:>8} {::x} {}", 0x031372d263c011c6ull, std::string_view, std::span<const unsigned>, double[2])   \
  X("{}", 0x9ce3bfba5c9ddc48ull, long long)
