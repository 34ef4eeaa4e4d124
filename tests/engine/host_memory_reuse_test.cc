// Host tiers without a pinned pool reuse the memory of objects they gave up
// (tiers/host_block_cache.h, wired in engine/engine_open.cc), within their
// capacity, and keep none in a process with a memory limit.
#include <doctest/doctest.h>

#include "base/process_memory.h"
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
    auto e = MustOpen(HostFileChain(dir.path() + (background ? "/bg" : "/fg"), 8 * kMiB, 256 * kMiB), nullptr, background);
    for (int i = 0; i < 64; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
    REQUIRE(e->Flush().ok());
    EngineStats s = e->Stats();
    CHECK(s.tiers[1].objects >= 48);
    // Every object the host tier took was allocated through the block cache,
    // and most found a block a demotion had freed. Under heavy load (the
    // sanitizer stages of CI) a Put can wait a second with nothing moving and
    // go straight to the file tier (Mover::MakeRoom): it allocates no host
    // block, so the count is of the Puts the host tier stored.
    const uint64_t host_puts = s.tiers[0].raw_bytes_written / kMiB;
    CAPTURE(host_puts);
    CHECK(host_puts >= 32);
    CHECK(s.host_cache_hits >= 32);
    CHECK(s.host_cache_misses + s.host_cache_hits >= host_puts);
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

TEST_CASE("a process with a memory limit keeps no freed host blocks, and keeps them again without one") {
  TempDir dir("reuse-limit");
  auto e = MustOpen(HostFileChain(dir.path(), 8 * kMiB, 256 * kMiB), nullptr, /*background=*/true);
  for (int i = 0; i < 32; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e->Flush().ok());
  // Erasing what the host tier holds frees blocks with room to keep them
  // (a Put may have taken the last kept block just before).
  for (int i = 0; i < 32; ++i) REQUIRE(e->Erase("k" + std::to_string(i)).ok());
  REQUIRE(e->Stats().host_cache_bytes > 0);
  // A Dask worker's store sets one: its memory manager reads the resident
  // set, so what the tiers give up goes back at once.
  e->SetProcessMemoryLimit(ProcessResidentBytes() + 1024 * kMiB);
  CHECK(e->Stats().host_cache_bytes == 0);
  for (int i = 0; i < 64; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e->Flush().ok());
  for (int i = 0; i < 64; ++i) REQUIRE(e->Erase("k" + std::to_string(i)).ok());
  CHECK(e->Stats().host_cache_bytes == 0);
  e->SetProcessMemoryLimit(0);
  for (int i = 0; i < 32; ++i) REQUIRE(e->Put("n" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e->Flush().ok());
  for (int i = 0; i < 32; ++i) REQUIRE(e->Erase("n" + std::to_string(i)).ok());
  CHECK(e->Stats().host_cache_bytes > 0);
  CHECK(e->Stats().host_cache_bytes + e->Stats().tiers[0].used_bytes <= 8 * kMiB);
}
