// HostTier: objects in host memory, one Blob each (buffers concatenated).
// Get hits are zero-copy: a Handle shares the Blob.
//
// Memory comes from a HostAllocator: plain aligned malloc by default; the GPU
// build substitutes a page-locked pool (see gpu_tier.h) so DMA to and from
// the device runs at PCIe speed.
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

 protected:
  StatusOr<std::vector<Location>> StoreImpl(std::span<const ObjectView> objects) override;
  StatusOr<BlobPtr> LoadImpl(const Location& loc, std::string_view key) override;
  StatusOr<Location> AdoptImpl(BlobPtr blob, uint64_t reserved) override;
  void FreeImpl(Location& loc) override { loc.blob.reset(); }

 private:
  HostAllocator* allocator_;
};

}  // namespace spillway
