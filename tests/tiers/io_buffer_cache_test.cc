// IoBufferCache: a file tier's shared I/O buffers are reused, at most `keep`
// (and `keep_bytes`) stay idle, Release frees them, and oversized requests
// are never kept. IoBuffer: aligned, and in 2 MiB-aligned mappings from
// kHugeIoBytes on.
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
    auto l = cache.Take(1 << 20);  // smaller: the same buffer (rounded up to 4 MiB)
    CHECK(l.get() == first);
    CHECK(cache.idle() == 0);
  }
  auto big = cache.Take(5 << 20);  // larger than the idle one (4 MiB): a new buffer
  CHECK(big.get() != first);
  CHECK(cache.idle() == 1);
}

TEST_CASE("IoBufferCache: a request takes the smallest idle buffer that holds it, leaving larger ones for larger requests") {
  IoBufferCache cache(4, 32 << 20);
  std::byte *b16 = nullptr, *b4 = nullptr, *b8 = nullptr;
  {
    auto l16 = cache.Take(16 << 20), l4 = cache.Take(4 << 20), l8 = cache.Take(8 << 20);
    b16 = l16.get(), b4 = l4.get(), b8 = l8.get();
    REQUIRE(b16 != nullptr);
    REQUIRE(b4 != nullptr);
    REQUIRE(b8 != nullptr);
  }  // given back in the order 8, 4, 16 (leases end in reverse order)
  CHECK(cache.idle() == 3);
  auto a = cache.Take(3 << 20);  // 4 MiB holds it: not the 16 or 8 MiB buffer
  CHECK(a.get() == b4);
  auto b = cache.Take(5 << 20);  // 8 MiB is the smallest left that holds it
  CHECK(b.get() == b8);
  auto c = cache.Take(16 << 20);  // and the 16 MiB buffer is still there
  CHECK(c.get() == b16);
  CHECK(cache.idle() == 0);
}

TEST_CASE("IoBufferCache: at most `keep` idle buffers, the larger kept, Release frees them all") {
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

TEST_CASE("IoBufferCache: idle buffers stay within keep_bytes, and a larger one replaces a smaller only within it") {
  IoBufferCache cache(8, 16 << 20, 6 << 20);
  {
    std::vector<IoBufferCache::Lease> held;
    for (int i = 0; i < 4; ++i) held.push_back(cache.Take(1 << 20));  // 2 MiB each
  }
  CHECK(cache.idle() == 3);  // 3 x 2 MiB: a fourth would pass 6 MiB
  {
    std::vector<IoBufferCache::Lease> held;
    for (int i = 0; i < 3; ++i) held.push_back(cache.Take(2 << 20));  // the three kept
    CHECK(cache.idle() == 0);
    held.push_back(cache.Take(4 << 20));  // a new 4 MiB one
  }
  // Back: 2 + 2 + 2 fill the 6 MiB; the 4 MiB one may replace a 2 MiB one
  // only if that stays within 6 MiB (4 + 2 + 2 = 8: it does not).
  CHECK(cache.idle() == 3);
  auto a = cache.Take(3 << 20);
  CHECK(cache.idle() == 3);  // none of the kept serves 3 MiB: a new one
}

TEST_CASE("IoBuffer: kIoAlign-aligned, 2 MiB aligned from kHugeIoBytes on, usable to its last byte") {
  for (uint64_t bytes : {uint64_t{1}, uint64_t{4096}, uint64_t{68} << 10, kHugeIoBytes - 4096, kHugeIoBytes,
                         kHugeIoBytes + 4096, uint64_t{9} << 20}) {
    IoBuffer b(bytes);
    REQUIRE(b);
    const auto at = reinterpret_cast<uintptr_t>(b.get());
    CHECK(at % kIoAlign == 0);
    if (bytes >= kHugeIoBytes) CHECK(at % kHugeIoBytes == 0);
    b.get()[0] = std::byte{1};
    b.get()[bytes - 1] = std::byte{2};
    IoBuffer moved = std::move(b);
    CHECK(!b);
    CHECK(moved.get()[bytes - 1] == std::byte{2});
  }
}
