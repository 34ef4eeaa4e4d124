// IoBufferCache: a file tier's shared I/O buffers are reused, at most `keep`
// stay idle, Release frees them, and oversized requests are never kept.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "tiers/io_buffer_cache.h"

using namespace spillway;

TEST_CASE("IoBufferCache: a buffer given back serves the next request of its size or less") {
  IoBufferCache cache(2, 16 << 20);
  std::byte* first = nullptr;
  {
    auto l = cache.Take(3 << 20);
    REQUIRE(l.get() != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(l.get()) % kIoAlign == 0);
    first = l.get();
    l.get()[(3 << 20) - 1] = std::byte{7};  // the whole request is usable
  }
  CHECK(cache.idle() == 1);
  {
    auto l = cache.Take(1 << 20);  // smaller: the same buffer (rounded up to 3 MiB)
    CHECK(l.get() == first);
    CHECK(cache.idle() == 0);
  }
  auto big = cache.Take(4 << 20);  // larger than the idle one: a new buffer
  CHECK(big.get() != first);
  CHECK(cache.idle() == 1);
}

TEST_CASE("IoBufferCache: at most `keep` idle buffers, the larger kept; Release frees them all") {
  IoBufferCache cache(2, 16 << 20);
  {
    std::vector<IoBufferCache::Lease> held;
    for (uint64_t mib : {1, 2, 3, 4, 5}) held.push_back(cache.Take(mib << 20));
  }  // all five given back
  CHECK(cache.idle() == 2);
  // The two kept are the largest (4 and 5 MiB): both serve a 4 MiB request.
  auto a = cache.Take(4 << 20);
  auto b = cache.Take(4 << 20);
  CHECK(cache.idle() == 0);
  a.Reset();
  b.Reset();
  CHECK(cache.idle() == 2);
  cache.Release();
  CHECK(cache.idle() == 0);
}

TEST_CASE("IoBufferCache: requests above max_bytes are allocated and freed, never kept") {
  IoBufferCache cache(4, 1 << 20);
  {
    auto l = cache.Take(3 << 20);
    REQUIRE(l.get() != nullptr);
    l.get()[(3 << 20) - 1] = std::byte{1};
  }
  CHECK(cache.idle() == 0);
  IoBufferCache::Lease moved;
  {
    auto l = cache.Take(1 << 20);
    moved = std::move(l);  // a moved-from lease gives nothing back
  }
  CHECK(cache.idle() == 0);
  moved.Reset();
  CHECK(cache.idle() == 1);
}
