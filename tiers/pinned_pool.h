// PinnedHostAllocator: page-locked host memory for the host tier and for the
// GPU tier's device-to-host copies, so DMA runs at PCIe speed.
//
// Pinning is slow (about 0.4 to 0.5 s per GiB), so the pool is never grown on
// a caller's path: a background thread adds slabs (256 MiB by default) while
// the free pinned space is below a margin, up to the capacity. Construction
// only starts that thread, so opening an engine with a 64 GiB pinned host tier
// is instant. When the pool has no room yet, Allocate falls back to plain
// aligned malloc (pageable: correct, only slower to copy to and from a GPU),
// and the grower is woken.
//
// Inside slabs memory is handed out best-fit in 256-byte granules; freed
// ranges coalesce. Any granule-aligned sub-range of an allocation may be freed
// on its own (Free(p + k * kGranule, n)): the GPU tier copies a batch of small
// objects into one allocation and hands each object out as its own Blob.
//
// Without CUDA (or without a device) pinning fails once, the reason is kept
// in stats().last_error, pinned() turns false and every Allocate is a malloc.
//
// Thread-safety: every method may be called concurrently. One mutex guards
// the slab table and the free lists; no pinning or unpinning runs under it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "base/align.h"
#include "spillway/status.h"
#include "tiers/host_tier.h"

namespace spillway {

struct PinnedPoolOptions {
  // Page-locked bytes the pool may hold at most (the host tier's capacity).
  uint64_t capacity_bytes = 0;
  // Bytes pinned per slab. A request larger than a slab fails over to malloc
  // and makes the grower add one slab big enough for it next.
  uint64_t slab_bytes = 256ull << 20;
  // Grown in the background right after construction.
  uint64_t initial_bytes = 256ull << 20;
  // The grower keeps at least this many pinned bytes free (0: two slabs).
  uint64_t grow_ahead_bytes = 0;
  // Allocate falls back to aligned malloc when no pinned room is free;
  // false makes it return null instead.
  bool fallback_to_malloc = true;
  // kPinned: page-locked with cudaHostRegister. kPlain: ordinary memory in
  // slabs (the allocator without CUDA: tests, or pinned: false).
  enum class Backing : unsigned char { kPinned, kPlain };
  Backing backing = Backing::kPinned;
  // Device whose context the grower thread uses for registration.
  int device = 0;
};

struct PinnedPoolStats {
  uint64_t capacity_bytes = 0;
  uint64_t slab_bytes = 0;        // bytes held in slabs (page-locked when backing is kPinned)
  uint64_t slabs = 0;
  uint64_t free_bytes = 0;        // free bytes inside slabs
  uint64_t allocated_bytes = 0;   // bytes handed out from slabs (rounded to granules)
  uint64_t fallback_allocations = 0;  // Allocate calls served by malloc (cumulative)
  uint64_t fallback_bytes = 0;        // bytes of those (cumulative)
  double pin_seconds = 0;         // time spent pinning slabs (background)
  bool pinning_failed = false;
  std::string last_error;         // why pinning failed, when it did
};

class PinnedHostAllocator : public HostAllocator {
 public:
  static constexpr uint64_t kGranule = 256;
  // Bytes an allocation of `bytes` occupies in a slab.
  static constexpr uint64_t RoundUp(uint64_t bytes) {
    return bytes == 0 ? kGranule : AlignUp(bytes, kGranule);
  }

  // Starts the grower; returns at once.
  explicit PinnedHostAllocator(PinnedPoolOptions options);
  // REQUIRES: every allocation has been freed. Unpins and frees the slabs.
  ~PinnedHostAllocator() override;
  PinnedHostAllocator(const PinnedHostAllocator&) = delete;
  PinnedHostAllocator& operator=(const PinnedHostAllocator&) = delete;

  // Pinned memory when a slab has room, else malloc (fallback_to_malloc) or
  // null. Never waits for pinning. 64-byte aligned at least.
  std::byte* Allocate(uint64_t bytes) override;
  // Pinned memory or null; never falls back.
  std::byte* TryAllocatePinned(uint64_t bytes);
  // Returns `bytes` at `p` (from either source). `bytes` is the size asked for
  // (or any granule-aligned part of an allocation, see above).
  void Free(std::byte* p, uint64_t bytes) override;
  // True while page-locking works (false once it failed, or with kPlain).
  bool pinned() const override;
  // True when `p` lies in a slab.
  bool IsFromPool(const void* p) const;

  // Waits (up to `timeout`) until at least `free_bytes` pinned bytes are free,
  // growing in the background as needed. For benchmarks and warm-up; never
  // needed for correctness. NoSpace when the capacity does not allow it,
  // NotSupported when pinning failed, Busy on timeout.
  Status WaitForFree(uint64_t free_bytes, std::chrono::milliseconds timeout);

  PinnedPoolStats stats() const;
  const PinnedPoolOptions& options() const { return options_; }

 private:
  struct Slab {
    std::byte* base;
    uint64_t size;
  };
  void GrowLoop();
  // Bytes of the next slab to add, 0 when nothing is needed. REQUIRES: mu_.
  uint64_t NextSlabBytesLocked() const;
  StatusOr<std::byte*> MakeSlab(uint64_t bytes);
  void DropSlab(const Slab& s);
  void InsertFreeLocked(uintptr_t addr, uint64_t len);
  const Slab* SlabOfLocked(uintptr_t addr) const;

  const PinnedPoolOptions options_;
  const uint64_t grow_ahead_;

  mutable std::mutex mu_;
  std::condition_variable grow_cv_;  // wakes the grower
  std::condition_variable done_cv_;  // a slab was added or growth failed
  std::map<uintptr_t, Slab> slabs_;                     // by base address
  std::map<uintptr_t, uint64_t> free_by_addr_;          // free range start -> length
  std::set<std::pair<uint64_t, uintptr_t>> free_by_size_;  // (length, start)
  uint64_t total_ = 0;       // bytes in slabs
  uint64_t free_ = 0;        // free bytes in slabs
  uint64_t wanted_free_ = 0; // WaitForFree's target
  uint64_t big_request_ = 0; // largest request that found no room since the last slab
  uint64_t fallback_allocs_ = 0, fallback_bytes_ = 0;
  double pin_seconds_ = 0;
  bool failed_ = false;
  bool stop_ = false;
  std::string last_error_;
  std::thread grower_;
};

}  // namespace spillway
