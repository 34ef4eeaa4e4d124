// HostBlockCache: the host tiers' memory when no page-locked pool serves them
// (no GPU, or a build without CUDA). A freed block of kMinBytes or more is
// kept for the next allocation of its size class instead of going back to
// the C library, which returns large blocks to the kernel: the next block of
// that size then takes a page fault per 4 KiB page, each zeroing its page,
// seconds of system time per spill of a few GiB (docs/performance.md#tuning-constants-file-tier).
//
// The cache never makes the host tiers' footprint larger than their
// capacity: a freed block is kept only while the blocks kept plus the bytes
// the tiers hold (`used`, read at the time) stay within `limit_bytes`; an
// allocation that finds no block of its class, and an object a tier adopts
// (memory from elsewhere: Trim), drop kept blocks until that holds again.
// ReleaseCached() drops them all. The engine calls it, and keeps nothing
// from then on, in a process that sets a memory limit
// (Engine::SetProcessMemoryLimit, as a Dask worker's store does).
//
// Size classes: a size is rounded up to a multiple of an eighth of its power
// of two (at least 4 KiB), so a block serves any size up to 12.5% smaller,
// and a run of equal sizes (a Dask array's chunks, a benchmark's objects)
// reuses its blocks exactly. Blocks of Blob::kHugePageMinBytes and more come
// from Blob::AllocateLargeHost (transparent huge pages), others are 64-byte
// aligned.
//
// Not for the GPU tier: it frees parts of one allocation (PinnedHostAllocator
// supports that, this does not).
//
// Thread-safety: every method may be called concurrently; one mutex guards
// the free lists. No allocation or free of memory runs under it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "tiers/host_tier.h"

namespace spillway {

struct HostBlockCacheStats {
  uint64_t cached_bytes = 0;  // kept for reuse now
  uint64_t hits = 0;          // allocations served by a kept block (total)
  uint64_t misses = 0;        // allocations of kMinBytes or more that found none (total)
  uint64_t dropped = 0;       // freed blocks not kept, or kept ones dropped (total)
};

class HostBlockCache final : public HostAllocator {
 public:
  // Smaller allocations stay with the C library, which keeps them in its heap.
  static constexpr uint64_t kMinBytes = 64u << 10;

  // `used` returns the bytes the tiers served by this cache hold (their
  // reservations included); it must stay callable until Detach().
  HostBlockCache(uint64_t limit_bytes, std::function<uint64_t()> used);
  ~HostBlockCache() override;
  HostBlockCache(const HostBlockCache&) = delete;
  HostBlockCache& operator=(const HostBlockCache&) = delete;

  // The bytes a block for `bytes` occupies (kMinBytes and more).
  static uint64_t ClassBytes(uint64_t bytes);

  bool Serves(uint64_t bytes) const override { return bytes >= kMinBytes; }
  std::byte* Allocate(uint64_t bytes) override;
  void Free(std::byte* p, uint64_t bytes) override;
  void ReleaseCached() override;
  // Drops kept blocks until kept + used <= limit (the tiers took in memory
  // this cache did not hand out: adopted objects).
  void Trim() override;
  // From now on nothing is kept and `used` is not called again (the tiers
  // are going away); the kept blocks are freed.
  void Detach();

  HostBlockCacheStats stats() const;

 private:
  static std::byte* AllocateBlock(uint64_t class_bytes);
  static void FreeBlock(std::byte* p, uint64_t class_bytes);  // what AllocateBlock returned
  struct Block {
    std::byte* p;
    uint64_t class_bytes;
  };
  // Removes kept blocks (largest classes first, never `keep_class`) until
  // cached_ + used <= limit; returns them for freeing outside the lock.
  // REQUIRES: mu_.
  std::vector<Block> TrimLocked(uint64_t used, uint64_t keep_class);

  const uint64_t limit_;
  std::function<uint64_t()> used_;
  mutable std::mutex mu_;
  std::map<uint64_t, std::vector<std::byte*>> free_;  // class bytes -> kept blocks
  uint64_t cached_ = 0;
  uint64_t hits_ = 0, misses_ = 0, dropped_ = 0;
  bool detached_ = false;
};

}  // namespace spillway
