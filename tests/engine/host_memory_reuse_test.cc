// Host tiers without a pinned pool reuse the memory of objects they gave up
// (tiers/host_block_cache.h, wired in engine/engine_open.cc), within their
// capacity, and keep none while the process is above its memory limit.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {
constexpr uint64_t kMiB = 1 << 20;
}  // namespace

TEST_CASE("host tiers reuse the blocks of demoted objects, within their capacity") {
  TempDir dir("reuse");
  for (bool background : {false, true}) {
    CAPTURE(background);
    auto e = OpenOrDie(HostFileChain(dir.path() + (background ? "/bg" : "/fg"), 8 * kMiB, 256 * kMiB), background);
    for (int i = 0; i < 64; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
    REQUIRE(e->Flush().ok());
    EngineStats s = e->Stats();
    CHECK(s.tiers[1].objects >= 48);
    // Most Puts found a block a demotion had freed.
    CHECK(s.host_cache_hits >= 32);
    CHECK(s.host_cache_misses + s.host_cache_hits >= 64);
    CHECK(s.host_cache_bytes + s.tiers[0].used_bytes <= 8 * kMiB);
    // Reused blocks hold what was put in them; reads from the file tier
    // (promoted or not) come back intact.
    for (int i = 0; i < 64; ++i) {
      auto h = e->Get("k" + std::to_string(i));
      REQUIRE(h.ok());
      CHECK(HandleEquals(*h, Bytes(kMiB, i)));
    }
    for (int i = 0; i < 64; ++i) REQUIRE(e->Erase("k" + std::to_string(i)).ok());
    s = e->Stats();
    CHECK(s.tiers[0].used_bytes == 0);
    CHECK(s.host_cache_bytes > 0);
    CHECK(s.host_cache_bytes <= 8 * kMiB);
  }
}

TEST_CASE("a process above its memory limit keeps no freed host blocks") {
  TempDir dir("reuse-limit");
  auto e = OpenOrDie(HostFileChain(dir.path(), 8 * kMiB, 256 * kMiB), /*background=*/true);
  for (int i = 0; i < 32; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e->Flush().ok());
  REQUIRE(e->Stats().host_cache_bytes > 0);
  e->SetProcessMemoryLimit(1);  // far below any resident set
  // The mover's tick (every 100 ms) finds the excess and releases what is kept.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (e->Stats().host_cache_bytes > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(e->Stats().host_cache_bytes == 0);
  for (int i = 32; i < 64; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e->Flush().ok());
  CHECK(e->Stats().host_cache_bytes == 0);
  e->SetProcessMemoryLimit(0);
}
