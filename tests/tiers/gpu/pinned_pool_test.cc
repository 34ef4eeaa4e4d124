// PinnedHostAllocator: the in-slab allocator (with plain slabs, so it runs on
// any machine), background growth, malloc fallback, and real page-locking.
#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "gpu_test_util.h"
#include "tiers/pinned_pool.h"

namespace spillway {
namespace {

using namespace std::chrono_literals;
using Backing = PinnedPoolOptions::Backing;

PinnedPoolOptions Plain(uint64_t capacity, uint64_t slab, uint64_t initial) {
  PinnedPoolOptions o;
  o.capacity_bytes = capacity;
  o.slab_bytes = slab;
  o.initial_bytes = initial;
  o.grow_ahead_bytes = slab;
  o.backing = Backing::kPlain;
  return o;
}

TEST_CASE("pinned pool: best-fit inside slabs, no overlap, frees coalesce") {
  PinnedHostAllocator pool(Plain(64 << 20, 8 << 20, 32 << 20));
  REQUIRE(pool.WaitForFree(32 << 20, 10s).ok());
  std::mt19937_64 rng(5);
  struct A {
    std::byte* p;
    uint64_t n;
    uint8_t tag;
  };
  std::vector<A> live;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t n = rng() % 3 == 0 ? rng() % 300 : rng() % 40000;
    std::byte* p = pool.TryAllocatePinned(n);
    if (p == nullptr) break;
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    const uint8_t tag = static_cast<uint8_t>(i);
    std::memset(p, tag, n);
    live.push_back({p, n, tag});
    if (rng() % 4 == 0) {  // free a random one
      const size_t k = rng() % live.size();
      pool.Free(live[k].p, live[k].n);
      live.erase(live.begin() + k);
    }
  }
  REQUIRE(live.size() > 500);
  size_t corrupt = 0;
  for (const A& a : live) {
    for (uint64_t j = 0; j < a.n; ++j) {
      if (static_cast<uint8_t>(a.p[j]) != a.tag) {
        ++corrupt;
        break;
      }
    }
  }
  CHECK(corrupt == 0);
  std::shuffle(live.begin(), live.end(), rng);
  for (const A& a : live) pool.Free(a.p, a.n);
  PinnedPoolStats s = pool.stats();
  CHECK(s.allocated_bytes == 0);
  CHECK(s.free_bytes == s.slab_bytes);
  // Coalesced: a whole slab is one free range again.
  std::byte* whole = pool.TryAllocatePinned(8 << 20);
  CHECK(whole != nullptr);
  pool.Free(whole, 8 << 20);
}

TEST_CASE("pinned pool: granule-aligned parts of one allocation are freed separately") {
  PinnedHostAllocator pool(Plain(16 << 20, 4 << 20, 4 << 20));
  REQUIRE(pool.WaitForFree(4 << 20, 10s).ok());
  const uint64_t sizes[] = {0, 1, 255, 256, 257, 10000, 65536};
  uint64_t total = 0;
  for (uint64_t n : sizes) total += PinnedHostAllocator::RoundUp(n);
  std::byte* base = pool.TryAllocatePinned(total);
  REQUIRE(base != nullptr);
  CHECK(pool.stats().allocated_bytes == total);
  uint64_t off = 0;
  for (uint64_t n : sizes) {
    pool.Free(base + off, n);
    off += PinnedHostAllocator::RoundUp(n);
  }
  CHECK(pool.stats().allocated_bytes == 0);
}

TEST_CASE("pinned pool: falls back to malloc while empty, then grows for large requests") {
  PinnedPoolOptions o = Plain(64 << 20, 4 << 20, 0);
  o.grow_ahead_bytes = 1;  // grow only on demand
  PinnedHostAllocator pool(o);
  // Nothing pinned yet: Allocate still succeeds, from malloc.
  std::byte* p = pool.Allocate(10 << 20);
  REQUIRE(p != nullptr);
  CHECK_FALSE(pool.IsFromPool(p));
  std::memset(p, 1, 10 << 20);
  pool.Free(p, 10 << 20);
  CHECK(pool.stats().fallback_allocations == 1);
  // The failed 10 MiB request made the grower add a slab big enough for it.
  std::byte* q = nullptr;
  for (int i = 0; i < 500 && q == nullptr; ++i) {
    q = pool.TryAllocatePinned(10 << 20);
    if (!q) std::this_thread::sleep_for(10ms);
  }
  REQUIRE(q != nullptr);
  CHECK(pool.IsFromPool(q));
  pool.Free(q, 10 << 20);
  // Without the fallback, Allocate answers null when there is no room.
  PinnedPoolOptions strict = Plain(4 << 20, 4 << 20, 4 << 20);
  strict.fallback_to_malloc = false;
  PinnedHostAllocator small(strict);
  REQUIRE(small.WaitForFree(4 << 20, 10s).ok());
  std::byte* all = small.Allocate(4 << 20);
  CHECK(all != nullptr);
  CHECK(small.Allocate(1) == nullptr);
  CHECK(small.WaitForFree(8 << 20, 1s).code() == StatusCode::kNoSpace);
  small.Free(all, 4 << 20);
}

TEST_CASE("pinned pool: construction is instant whatever the capacity") {
  // A 64 GiB pinned host tier must open in under 100 ms: nothing is pinned on
  // the caller's path.
  PinnedPoolOptions o;
  o.capacity_bytes = 64ull << 30;
  const auto t0 = std::chrono::steady_clock::now();
  auto pool = std::make_unique<PinnedHostAllocator>(o);
  std::byte* p = pool->Allocate(1 << 20);  // served at once (pinned or fallback)
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("construct + first Allocate of a 64 GiB pool: " << ms << " ms");
  CHECK(ms < 100);
  REQUIRE(p != nullptr);
  pool->Free(p, 1 << 20);
}

TEST_CASE("pinned pool: slabs are page-locked with a GPU and fail visibly without one") {
  PinnedPoolOptions o;
  o.capacity_bytes = 512 << 20;
  o.slab_bytes = 64 << 20;
  o.initial_bytes = 64 << 20;
  PinnedHostAllocator pool(o);
  Status st = pool.WaitForFree(64 << 20, 30s);
  if (!testing::NoGpuReason().empty()) {
    CHECK(st.code() == StatusCode::kNotSupported);
    CHECK_FALSE(pool.pinned());
    CHECK(pool.stats().pinning_failed);
    MESSAGE("pinning unavailable as expected: " << pool.stats().last_error);
    std::byte* p = pool.Allocate(4096);  // malloc fallback still works
    REQUIRE(p != nullptr);
    pool.Free(p, 4096);
    return;
  }
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(pool.pinned());
  std::byte* p = pool.TryAllocatePinned(1 << 20);
  REQUIRE(p != nullptr);
  auto k = cuda::Classify(p);
  REQUIRE(k.ok());
  CHECK(k->kind == cuda::PointerKind::kPinnedHost);
  MESSAGE("pinned " << pool.stats().slab_bytes << " bytes in " << pool.stats().pin_seconds << " s");
  pool.Free(p, 1 << 20);
}

}  // namespace
}  // namespace spillway
