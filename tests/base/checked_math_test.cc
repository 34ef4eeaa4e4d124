// Checked and saturating arithmetic on user-given sizes: the edges of 2^64.
#include <doctest/doctest.h>

#include "base/checked_math.h"

namespace spillway {
namespace {

TEST_CASE("CheckedAdd and CheckedMul report what does not fit in 64 bits") {
  uint64_t r = 0;
  CHECK(CheckedAdd(UINT64_MAX - 1, 1, &r));
  CHECK(r == UINT64_MAX);
  CHECK_FALSE(CheckedAdd(UINT64_MAX, 1, &r));
  CHECK_FALSE(CheckedAdd(UINT64_MAX - 4095, 4096, &r));
  CHECK(CheckedMul(1ull << 32, (1ull << 32) - 1, &r));
  CHECK(r == UINT64_MAX - ((1ull << 32) - 1));
  CHECK_FALSE(CheckedMul(1ull << 32, 1ull << 32, &r));
  CHECK(CheckedMul(0, UINT64_MAX, &r));
  CHECK(r == 0);
}

TEST_CASE("SaturatingAdd stops at UINT64_MAX") {
  CHECK(SaturatingAdd(1, 2) == 3);
  CHECK(SaturatingAdd(UINT64_MAX, 1) == UINT64_MAX);
  CHECK(SaturatingAdd(UINT64_MAX - 1, UINT64_MAX - 1) == UINT64_MAX);
}

}  // namespace
}  // namespace spillway
