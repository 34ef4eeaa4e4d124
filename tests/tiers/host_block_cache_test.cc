// HostBlockCache (tiers/host_block_cache.h): freed blocks reused by size
// class, never more kept than the tiers' capacity allows, and all of them
// given back on request.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "tiers/blob.h"
#include "tiers/host_block_cache.h"
#include "tiers/host_tier.h"

using namespace spillway;

namespace {
constexpr uint64_t kMiB = 1u << 20;
}  // namespace

TEST_CASE("host block cache: size classes are within an eighth of the size and page multiples") {
  CHECK(HostBlockCache::ClassBytes(64 << 10) == (64u << 10));
  CHECK(HostBlockCache::ClassBytes(kMiB) == kMiB);
  CHECK(HostBlockCache::ClassBytes(kMiB + 1) == kMiB + kMiB / 8);
  CHECK(HostBlockCache::ClassBytes(64 * kMiB) == 64 * kMiB);
  for (uint64_t n : {uint64_t{65537}, uint64_t{100000}, uint64_t{3 * kMiB + 5}, uint64_t{(9ull << 20) + 13}}) {
    CAPTURE(n);
    const uint64_t c = HostBlockCache::ClassBytes(n);
    CHECK(c >= n);
    CHECK(c % 4096 == 0);
    CHECK(c - n <= n / 8 + 4096);
  }
}

TEST_CASE("host block cache: a freed block serves the next allocation of its class") {
  HostBlockCache cache(64 * kMiB, [] { return uint64_t{0}; });
  std::byte* a = cache.Allocate(kMiB);
  REQUIRE(a != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(a) % 64 == 0);
  std::memset(a, 1, kMiB);
  cache.Free(a, kMiB);
  CHECK(cache.stats().cached_bytes == kMiB);
  // A smaller size of the same class gets the same block back.
  std::byte* b = cache.Allocate(kMiB - 4096);
  CHECK(b == a);
  CHECK(cache.stats().hits == 1);
  CHECK(cache.stats().cached_bytes == 0);
  // Another class does not.
  std::byte* c = cache.Allocate(2 * kMiB);
  CHECK(c != a);
  CHECK(cache.stats().misses == 2);
  cache.Free(b, kMiB - 4096);
  cache.Free(c, 2 * kMiB);
  CHECK(cache.stats().cached_bytes == 3 * kMiB);
  // Large blocks come from the huge-page allocation (2 MiB aligned).
  std::byte* big = cache.Allocate(Blob::kHugePageMinBytes);
  CHECK(reinterpret_cast<uintptr_t>(big) % (2u << 20) == 0);
  cache.Free(big, Blob::kHugePageMinBytes);
  cache.ReleaseCached();
  CHECK(cache.stats().cached_bytes == 0);
}

TEST_CASE("host block cache: small allocations stay with the C library and are never kept") {
  HostBlockCache cache(64 * kMiB, [] { return uint64_t{0}; });
  CHECK_FALSE(cache.Serves(HostBlockCache::kMinBytes - 1));
  CHECK(cache.Serves(HostBlockCache::kMinBytes));
  std::byte* p = cache.Allocate(4096);
  REQUIRE(p != nullptr);
  cache.Free(p, 4096);
  CHECK(cache.stats().cached_bytes == 0);
  CHECK(cache.stats().misses == 0);
  // NewHostBlob keeps such objects in one allocation with their Blob.
  BlobPtr small = NewHostBlob(&cache, 512, {512});
  REQUIRE(small);
  BlobPtr large = NewHostBlob(&cache, kMiB, {kMiB});
  REQUIRE(large);
  std::byte* at = large->data();
  large.reset();
  CHECK(cache.stats().cached_bytes == kMiB);
  BlobPtr again = NewHostBlob(&cache, kMiB, {kMiB});
  CHECK(again->data() == at);
}

TEST_CASE("host block cache: what is kept and what the tiers hold stay within the limit") {
  std::atomic<uint64_t> used{0};
  HostBlockCache cache(4 * kMiB, [&used] { return used.load(); });
  // A tier holding four blocks frees them. Each one is still in `used` when
  // it is freed (the Blob settles its account just after), as here, and all
  // four are kept: kept + held never passes 4 MiB.
  std::vector<std::byte*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(cache.Allocate(kMiB));
  used = 4 * kMiB;
  for (std::byte* p : blocks) {
    cache.Free(p, kMiB);
    used -= kMiB;
  }
  CHECK(cache.stats().cached_bytes == 4 * kMiB);
  CHECK(cache.stats().dropped == 0);

  // With 3 MiB held by other objects, blocks no tier counted (reads that were
  // not promoted) are kept only while kept + held <= 4 MiB before each one:
  // two of four, passing the limit by that one block at most.
  blocks.clear();
  for (int i = 0; i < 4; ++i) blocks.push_back(cache.Allocate(kMiB));
  CHECK(cache.stats().hits == 4);
  used = 3 * kMiB;
  for (std::byte* p : blocks) cache.Free(p, kMiB);
  CHECK(cache.stats().cached_bytes == 2 * kMiB);
  CHECK(cache.stats().dropped == 2);

  // An allocation of another class drops kept blocks of other sizes until
  // kept + held <= 4 MiB again.
  std::byte* other = cache.Allocate(2 * kMiB);
  CHECK(cache.stats().cached_bytes == kMiB);
  CHECK(cache.stats().dropped == 3);

  // Memory taken in from elsewhere (an adopted object) counts in `used`:
  // Trim gives back what no longer fits.
  cache.Free(other, 2 * kMiB);
  used = 2 * kMiB;
  cache.Trim();  // kept 1 MiB + 2 MiB + used 2 MiB > 4 MiB: the 2 MiB block goes first
  CHECK(cache.stats().cached_bytes == kMiB);
  used = 4 * kMiB;
  cache.Trim();
  CHECK(cache.stats().cached_bytes == 0);
  other = cache.Allocate(2 * kMiB);

  // Detached (the tiers are going away): nothing is kept and `used` is not
  // asked again.
  cache.Detach();
  CHECK(cache.stats().cached_bytes == 0);
  used = ~uint64_t{0} / 2;
  cache.Free(other, 2 * kMiB);
  std::byte* late = cache.Allocate(kMiB);
  cache.Free(late, kMiB);
  CHECK(cache.stats().cached_bytes == 0);
}

TEST_CASE("host block cache: concurrent allocations and frees keep every block distinct") {
  HostBlockCache cache(256 * kMiB, [] { return uint64_t{0}; });
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, &bad, t] {
      std::vector<std::pair<std::byte*, uint64_t>> mine;
      for (int i = 0; i < 400; ++i) {
        const uint64_t n = (64u << 10) * (1 + (i + t) % 5);
        std::byte* p = cache.Allocate(n);
        if (p == nullptr) {
          bad = true;
          return;
        }
        std::memset(p, t + 1, n);
        mine.emplace_back(p, n);
        if (mine.size() > 8) {
          auto [q, m] = mine.front();
          for (uint64_t k = 0; k < m; k += 4096) {
            if (q[k] != std::byte(t + 1)) bad = true;  // another thread wrote into this block
          }
          cache.Free(q, m);
          mine.erase(mine.begin());
        }
      }
      for (auto [q, m] : mine) cache.Free(q, m);
    });
  }
  for (auto& th : threads) th.join();
  CHECK_FALSE(bad.load());
  CHECK(cache.stats().hits > 0);
}
