// AlignUp / AlignDown: exact multiples stay, everything else rounds outwards
// (up) or inwards (down), for powers of two and other alignments alike.
#include <doctest/doctest.h>

#include "base/align.h"

namespace spillway {
namespace {

static_assert(AlignUp(0, 4096) == 0);
static_assert(AlignUp(1, 4096) == 4096);
static_assert(AlignDown(4095, 4096) == 0);

TEST_CASE("AlignUp rounds to the next multiple") {
  CHECK(AlignUp(0, 8) == 0);
  CHECK(AlignUp(1, 8) == 8);
  CHECK(AlignUp(8, 8) == 8);
  CHECK(AlignUp(9, 8) == 16);
  CHECK(AlignUp(4097, 4096) == 8192);
  CHECK(AlignUp(5, 3) == 6);
  CHECK(AlignUp(7, 1) == 7);
  CHECK(AlignUp(UINT64_MAX - 4095, 4096) == UINT64_MAX - 4095);
}

TEST_CASE("AlignDown rounds to the previous multiple") {
  CHECK(AlignDown(0, 8) == 0);
  CHECK(AlignDown(7, 8) == 0);
  CHECK(AlignDown(8, 8) == 8);
  CHECK(AlignDown(15, 8) == 8);
  CHECK(AlignDown(8191, 4096) == 4096);
  CHECK(AlignDown(5, 3) == 3);
  CHECK(AlignDown(UINT64_MAX, 4096) == UINT64_MAX - 4095);
}

}  // namespace
}  // namespace spillway
