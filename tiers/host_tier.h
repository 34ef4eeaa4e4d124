// HostTier: objects in host memory, one Blob each (buffers concatenated).
// Get hits are zero-copy: a Handle shares the Blob.
//
// Memory comes from a HostAllocator: the engine passes a page-locked pool
// (pinned_pool.h) where CUDA and a GPU are present, so DMA to and from the
// device runs at PCIe speed, and otherwise a HostBlockCache
// (host_block_cache.h) that keeps freed blocks for reuse; null is plain
// aligned malloc.
#pragma once

#include <memory>

#include "tiers/tier.h"

namespace spillway {

class HostAllocator {
 public:
  virtual ~HostAllocator() = default;
  // Null when out of memory.
  virtual std::byte* Allocate(uint64_t bytes) = 0;
  virtual void Free(std::byte* p, uint64_t bytes) = 0;
  virtual bool pinned() const { return false; }
  // False: NewHostBlob serves an allocation of `bytes` itself (small objects
  // then share one allocation with their Blob).
  virtual bool Serves(uint64_t /*bytes*/) const { return true; }
  // Gives back memory kept for reuse (the process is above its memory limit).
  virtual void ReleaseCached() {}
  // A tier took in memory from elsewhere (an adopted object): gives back
  // what is kept for reuse beyond the room that leaves.
  virtual void Trim() {}
};

// A host Blob of `size` bytes from `allocator` (aligned malloc when null),
// not yet accounted in any tier; null when out of memory.
BlobPtr NewHostBlob(HostAllocator* allocator, uint64_t size, std::vector<uint64_t> buffer_sizes);

class HostTier : public Tier {
 public:
  // `allocator` may be null (aligned malloc); it must outlive the tier.
  HostTier(TierConfig config, int index, HostAllocator* allocator = nullptr);

  bool Accepts(MemoryKind kind) const override { return kind != MemoryKind::kDevice; }
  uint64_t ReserveEstimate(const ObjectView& object) const override { return object.raw_size(); }
  HostAllocator* allocator() const { return allocator_; }
  // A Blob of `size` bytes from this tier's allocator, not yet accounted.
  BlobPtr NewBlob(uint64_t size, std::vector<uint64_t> buffer_sizes);
  void ReleaseCachedMemory() override {
    if (allocator_ != nullptr) allocator_->ReleaseCached();
  }

 protected:
  StatusOr<std::vector<Location>> StoreImpl(std::span<const ObjectView> objects) override;
  StatusOr<BlobPtr> LoadImpl(const Location& loc, std::string_view key) override;
  StatusOr<Location> AdoptImpl(BlobPtr blob, uint64_t reserved) override;
  void FreeImpl(Location& loc) override { loc.blob.reset(); }

 private:
  HostAllocator* allocator_;
};

}  // namespace spillway
