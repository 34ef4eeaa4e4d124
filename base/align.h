// Rounding to a multiple: I/O blocks, allocation granules, record padding.
// One definition, so every caller rounds the same way.
#pragma once

#include <cstdint>

namespace spillway {

// The smallest multiple of `a` not below `v`.
// REQUIRES: a > 0, and v + a - 1 does not overflow.
constexpr uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// The largest multiple of `a` not above `v`. REQUIRES: a > 0.
constexpr uint64_t AlignDown(uint64_t v, uint64_t a) { return v / a * a; }

}  // namespace spillway
