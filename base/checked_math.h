// Arithmetic on sizes and counts that users give (config values, CLI
// options): a sum or product that does not fit in 64 bits is reported or
// saturated, never wrapped.
#pragma once

#include <cstdint>
#include <limits>

namespace spillway {

// False when a + b does not fit; *sum is then the wrapped value, not to be used.
[[nodiscard]] inline bool CheckedAdd(uint64_t a, uint64_t b, uint64_t* sum) { return !__builtin_add_overflow(a, b, sum); }

// False when a * b does not fit; *product is then not to be used.
[[nodiscard]] inline bool CheckedMul(uint64_t a, uint64_t b, uint64_t* product) {
  return !__builtin_mul_overflow(a, b, product);
}

// a + b, or UINT64_MAX where that does not fit: for totals that only bound something.
inline uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t sum = 0;
  return CheckedAdd(a, b, &sum) ? sum : std::numeric_limits<uint64_t>::max();
}

}  // namespace spillway
