// The mover (engine/mover.h, engine/demote.cc): demotion batch sizes.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::internal;
using namespace spillway::testing;

TEST_CASE("a mover pass demotes at least min(64 MiB, capacity / 4)") {
  TempDir dir("eng");
  const uint64_t cap = 4 << 20;
  auto e = MustOpen(HostFileChain(dir.path(), cap, 64 << 20));
  int i = 0;
  while (e->Stats().tiers[0].used_bytes <= static_cast<uint64_t>(0.9 * cap)) {
    REQUIRE(e->Put("k" + std::to_string(i), Bytes(64 << 10, i)).ok());
    ++i;
  }
  const uint64_t before = e->Stats().tiers[0].used_bytes;
  REQUIRE(e->Flush().ok());  // no background thread: runs the passes here
  const auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes + cap / 4 <= before);
  CHECK(s.tiers[0].demotions_out >= (cap / 4) / (64 << 10));
  CHECK(s.tiers[0].objects + s.tiers[1].objects == static_cast<uint64_t>(i));
}
