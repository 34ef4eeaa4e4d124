// SmallBlockPool: per-thread magazines over a process-wide depot (see the header).
#include "tiers/small_block_pool.h"

#include <pthread.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace spillway {
namespace {

// 16 classes of 64-byte steps up to 1 KiB, then 8 per power of two up to 64 KiB.
constexpr int kFineClasses = 16;
constexpr int kClasses = kFineClasses + 6 * 8;
// A magazine holds at most this many bytes of its class (at least 2 blocks, at most kSlots).
constexpr uint64_t kMagazineBytes = 128u << 10;
constexpr int kSlots = 32;

int ClassIndex(uint64_t cls) {
  if (cls <= 1024) return static_cast<int>(cls / 64) - 1;
  const int p = std::bit_width(cls - 1);  // 2^(p-1) < cls <= 2^p, p in 11..16
  const uint64_t step = uint64_t{1} << (p - 4);
  return kFineClasses + (p - 11) * 8 + static_cast<int>((cls - (uint64_t{1} << (p - 1))) / step) - 1;
}

int Capacity(uint64_t cls) { return static_cast<int>(std::clamp<uint64_t>(kMagazineBytes / cls, 2, kSlots)); }

std::byte* NewBlock(uint64_t cls) { return static_cast<std::byte*>(std::aligned_alloc(64, cls)); }

struct Depot {
  std::mutex mu;
  std::array<std::vector<std::byte*>, kClasses> free;  // guarded by mu
  uint64_t bytes = 0;                                  // guarded by mu
  std::atomic<uint64_t> refills{0}, flushes{0};
  std::atomic<bool> keeping{true};
};

Depot& TheDepot() {
  // Never destroyed: blocks may be freed during static destruction.
  static Depot* const d = [] {
    auto* depot = new Depot;
    // A fork() while another thread holds the depot's mutex would leave it
    // locked in the child forever.
    pthread_atfork([] { TheDepot().mu.lock(); }, [] { TheDepot().mu.unlock(); }, [] { TheDepot().mu.unlock(); });
    return depot;
  }();
  return *d;
}

// Moves blocks into the depot while it has room; returns what did not fit.
// REQUIRES: d.mu held.
void PutLocked(Depot& d, int idx, uint64_t cls, std::byte* const* blocks, int n, std::vector<std::byte*>* rejected) {
  for (int i = 0; i < n; ++i) {
    if (d.keeping.load(std::memory_order_relaxed) && d.bytes + cls <= SmallBlockPool::kDepotMaxBytes) {
      d.free[idx].push_back(blocks[i]);
      d.bytes += cls;
    } else {
      rejected->push_back(blocks[i]);
    }
  }
}

struct Magazine {
  std::array<std::byte*, kSlots> slot;
  int n = 0;
};

struct ThreadCache {
  std::array<Magazine, kClasses> mag;
  uint64_t bytes = 0;

  ~ThreadCache() {
    Depot& d = TheDepot();
    std::vector<std::byte*> rejected;
    {
      std::lock_guard<std::mutex> l(d.mu);
      for (int i = 0; i < kClasses; ++i) {
        if (mag[i].n == 0) continue;
        PutLocked(d, i, ClassOf(i), mag[i].slot.data(), mag[i].n, &rejected);
        mag[i].n = 0;
      }
    }
    for (std::byte* p : rejected) std::free(p);
    bytes = 0;
  }

  static uint64_t ClassOf(int idx) {
    if (idx < kFineClasses) return static_cast<uint64_t>(idx + 1) * 64;
    const int k = idx - kFineClasses;
    const int p = 11 + k / 8;
    return (uint64_t{1} << (p - 1)) + static_cast<uint64_t>(k % 8 + 1) * (uint64_t{1} << (p - 4));
  }
};

thread_local ThreadCache t_cache;

}  // namespace

uint64_t SmallBlockPool::ClassBytes(uint64_t bytes) {
  if (bytes <= 1024) return std::max<uint64_t>(64, (bytes + 63) & ~uint64_t{63});
  const int p = std::bit_width(bytes - 1);
  const uint64_t step = uint64_t{1} << (p - 4);
  return (bytes + step - 1) & ~(step - 1);
}

std::byte* SmallBlockPool::Allocate(uint64_t bytes) {
  const uint64_t cls = ClassBytes(bytes);
  if constexpr (!kPooling) return NewBlock(cls);
  const int idx = ClassIndex(cls);
  ThreadCache& tc = t_cache;
  Magazine& m = tc.mag[idx];
  if (m.n > 0) {
    tc.bytes -= cls;
    return m.slot[--m.n];
  }
  // Refill half a magazine from the depot: one lock for several objects.
  Depot& d = TheDepot();
  std::byte* out = nullptr;
  {
    std::lock_guard<std::mutex> l(d.mu);
    std::vector<std::byte*>& list = d.free[idx];
    if (!list.empty()) {
      out = list.back();
      list.pop_back();
      d.bytes -= cls;
      const int take = std::min<int>(Capacity(cls) / 2, static_cast<int>(list.size()));
      for (int i = 0; i < take && tc.bytes + cls <= kThreadMaxBytes; ++i) {
        m.slot[m.n++] = list.back();
        list.pop_back();
        d.bytes -= cls;
        tc.bytes += cls;
      }
      d.refills.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return out != nullptr ? out : NewBlock(cls);
}

void SmallBlockPool::Free(std::byte* p, uint64_t bytes) {
  if (p == nullptr) return;
  const uint64_t cls = ClassBytes(bytes);
  Depot& d = TheDepot();
  if (!kPooling || !d.keeping.load(std::memory_order_relaxed)) {
    std::free(p);
    return;
  }
  const int idx = ClassIndex(cls);
  ThreadCache& tc = t_cache;
  Magazine& m = tc.mag[idx];
  const int cap = Capacity(cls);
  if (m.n < cap && tc.bytes + cls <= kThreadMaxBytes) {
    m.slot[m.n++] = p;
    tc.bytes += cls;
    return;
  }
  // Full (or the thread holds its share): half the magazine and this block to the depot.
  const int give = std::min(m.n, cap / 2);
  std::vector<std::byte*> rejected;
  {
    std::lock_guard<std::mutex> l(d.mu);
    PutLocked(d, idx, cls, m.slot.data() + (m.n - give), give, &rejected);
    PutLocked(d, idx, cls, &p, 1, &rejected);
  }
  m.n -= give;
  tc.bytes -= static_cast<uint64_t>(give) * cls;
  d.flushes.fetch_add(1, std::memory_order_relaxed);
  for (std::byte* q : rejected) std::free(q);
}

void SmallBlockPool::SetKeeping(bool keep) {
  Depot& d = TheDepot();
  d.keeping.store(keep, std::memory_order_relaxed);
  if (keep) return;
  std::array<std::vector<std::byte*>, kClasses> all;
  {
    std::lock_guard<std::mutex> l(d.mu);
    all.swap(d.free);
    d.bytes = 0;
  }
  for (auto& list : all) {
    for (std::byte* p : list) std::free(p);
  }
  ThreadCache& tc = t_cache;
  for (Magazine& m : tc.mag) {
    while (m.n > 0) std::free(m.slot[--m.n]);
  }
  tc.bytes = 0;
}

bool SmallBlockPool::keeping() { return TheDepot().keeping.load(std::memory_order_relaxed); }

SmallBlockPoolStats SmallBlockPool::Stats() {
  Depot& d = TheDepot();
  SmallBlockPoolStats s;
  {
    std::lock_guard<std::mutex> l(d.mu);
    s.depot_bytes = d.bytes;
  }
  s.thread_bytes = t_cache.bytes;
  s.depot_refills = d.refills.load(std::memory_order_relaxed);
  s.depot_flushes = d.flushes.load(std::memory_order_relaxed);
  return s;
}

}  // namespace spillway
