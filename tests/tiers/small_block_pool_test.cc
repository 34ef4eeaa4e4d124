// SmallBlockPool (tiers/small_block_pool.h): size classes, reuse of freed
// blocks on the same and on other threads, the bounds on what is kept, and
// keeping nothing once told to. Under AddressSanitizer the pool is off
// (every block comes from the C library), and the reuse checks are skipped
// with that reason.
#include <doctest/doctest.h>

#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "tiers/blob.h"
#include "tiers/small_block_pool.h"

using namespace spillway;

namespace {

constexpr bool kPoolOn = SmallBlockPool::kPooling;

// The pool is process-wide: each case starts keeping, with an empty depot.
struct Fresh {
  Fresh() {
    SmallBlockPool::SetKeeping(false);
    SmallBlockPool::SetKeeping(true);
  }
};

}  // namespace

TEST_CASE("small block pool: a class holds its size, within an eighth, in 64-byte steps up to 1 KiB") {
  CHECK(SmallBlockPool::ClassBytes(0) == 64);
  CHECK(SmallBlockPool::ClassBytes(1) == 64);
  CHECK(SmallBlockPool::ClassBytes(65) == 128);
  CHECK(SmallBlockPool::ClassBytes(1024) == 1024);
  CHECK(SmallBlockPool::ClassBytes(1025) == 1152);
  CHECK(SmallBlockPool::ClassBytes(4096) == 4096);
  CHECK(SmallBlockPool::ClassBytes(4097) == 4608);
  CHECK(SmallBlockPool::ClassBytes(SmallBlockPool::kMaxBytes) == SmallBlockPool::kMaxBytes);
  std::set<uint64_t> classes;
  for (uint64_t n = 1; n <= SmallBlockPool::kMaxBytes; n += 7) {
    const uint64_t c = SmallBlockPool::ClassBytes(n);
    CAPTURE(n);
    REQUIRE(c >= n);
    CHECK(c % 64 == 0);
    CHECK(c - n <= std::max<uint64_t>(63, n / 8));
    classes.insert(c);
  }
  CHECK(classes.size() == 64);  // 16 up to 1 KiB, 8 per power of two to 64 KiB
}

TEST_CASE("small block pool: blocks are 64-byte aligned and usable to their size") {
  Fresh fresh;
  std::vector<std::pair<std::byte*, uint64_t>> blocks;
  for (uint64_t n : {uint64_t{1}, uint64_t{700}, uint64_t{4096}, uint64_t{5000}, uint64_t{65536}}) {
    std::byte* p = SmallBlockPool::Allocate(n);
    REQUIRE(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
    std::memset(p, 0x5a, SmallBlockPool::ClassBytes(n));
    blocks.emplace_back(p, n);
  }
  for (auto [p, n] : blocks) SmallBlockPool::Free(p, n);
  SmallBlockPool::Free(nullptr, 4096);  // ignored
}

TEST_CASE("small block pool: a freed block serves the next allocation of its class") {
  if (!kPoolOn) {
    MESSAGE("skipped: the pool is off under AddressSanitizer (blocks come from the C library)");
    return;
  }
  Fresh fresh;
  std::byte* a = SmallBlockPool::Allocate(4096);
  SmallBlockPool::Free(a, 4096);
  CHECK(SmallBlockPool::Stats().thread_bytes == 4096);
  CHECK(SmallBlockPool::Allocate(4000) == a);  // same class (4096)
  CHECK(SmallBlockPool::Stats().thread_bytes == 0);
  SmallBlockPool::Free(a, 4000);
}

TEST_CASE("small block pool: blocks freed on one thread serve allocations on another through the depot") {
  if (!kPoolOn) {
    MESSAGE("skipped: the pool is off under AddressSanitizer (blocks come from the C library)");
    return;
  }
  Fresh fresh;
  constexpr int kN = 256;
  std::vector<std::byte*> made(kN);
  for (auto& p : made) p = SmallBlockPool::Allocate(4096);
  // Another thread frees them (as the mover frees what a Put allocated); its
  // magazine's overflow and, at its exit, the rest go to the depot.
  std::thread([&] {
    for (std::byte* p : made) SmallBlockPool::Free(p, 4096);
  }).join();
  const SmallBlockPoolStats s = SmallBlockPool::Stats();
  CHECK(s.depot_bytes == uint64_t{kN} * 4096);
  CHECK(s.depot_flushes > 0);
  std::set<std::byte*> freed(made.begin(), made.end());
  int reused = 0;
  for (int i = 0; i < kN; ++i) {
    std::byte* p = SmallBlockPool::Allocate(4096);
    reused += freed.count(p) ? 1 : 0;
    made[i] = p;
  }
  CHECK(reused == kN);
  CHECK(SmallBlockPool::Stats().depot_refills > s.depot_refills);
  for (std::byte* p : made) SmallBlockPool::Free(p, 4096);
}

TEST_CASE("small block pool: what is kept stays within the depot's and the thread's bounds") {
  if (!kPoolOn) {
    MESSAGE("skipped: the pool is off under AddressSanitizer (blocks come from the C library)");
    return;
  }
  Fresh fresh;
  const uint64_t n = (SmallBlockPool::kDepotMaxBytes + 4 * SmallBlockPool::kThreadMaxBytes) / 65536;
  std::vector<std::byte*> made(n);
  for (auto& p : made) p = SmallBlockPool::Allocate(65536);
  std::thread([&] {
    for (std::byte* p : made) {
      SmallBlockPool::Free(p, 65536);
      CHECK(SmallBlockPool::Stats().thread_bytes <= SmallBlockPool::kThreadMaxBytes);
    }
  }).join();
  CHECK(SmallBlockPool::Stats().depot_bytes <= SmallBlockPool::kDepotMaxBytes);
  CHECK(SmallBlockPool::Stats().depot_bytes >= SmallBlockPool::kDepotMaxBytes - 65536);
}

TEST_CASE("small block pool: once told not to keep, the depot is emptied and frees go to the C library") {
  if (!kPoolOn) {
    MESSAGE("skipped: the pool is off under AddressSanitizer (blocks come from the C library)");
    return;
  }
  Fresh fresh;
  std::vector<std::byte*> made(64);
  for (auto& p : made) p = SmallBlockPool::Allocate(8192);
  std::thread([&] {
    for (std::byte* p : made) SmallBlockPool::Free(p, 8192);
  }).join();
  REQUIRE(SmallBlockPool::Stats().depot_bytes > 0);
  SmallBlockPool::SetKeeping(false);
  CHECK_FALSE(SmallBlockPool::keeping());
  CHECK(SmallBlockPool::Stats().depot_bytes == 0);
  std::byte* p = SmallBlockPool::Allocate(8192);
  SmallBlockPool::Free(p, 8192);
  CHECK(SmallBlockPool::Stats().thread_bytes == 0);
  SmallBlockPool::SetKeeping(true);
}

TEST_CASE("small block pool: blobs of small host objects allocated on one thread and freed on many") {
  Fresh fresh;
  // What a spill does: the caller allocates, mover threads free, at once.
  std::vector<std::thread> freers;
  std::vector<std::vector<std::byte*>> handed(4);
  for (int round = 0; round < 20; ++round) {
    for (int t = 0; t < 4; ++t) {
      for (int i = 0; i < 100; ++i) {
        std::byte* p = Blob::AllocateHost(4096 + static_cast<uint64_t>(i % 3) * 1000);
        REQUIRE(p != nullptr);
        std::memset(p, t, 4096);
        handed[t].push_back(p);
      }
    }
    for (int t = 0; t < 4; ++t) {
      freers.emplace_back([list = std::move(handed[t])] {
        for (size_t i = 0; i < list.size(); ++i) Blob::FreeHost(list[i], 4096 + static_cast<uint64_t>(i % 3) * 1000);
      });
      handed[t].clear();
    }
    for (auto& th : freers) th.join();
    freers.clear();
  }
  CHECK(SmallBlockPool::Stats().depot_bytes <= SmallBlockPool::kDepotMaxBytes);
}
