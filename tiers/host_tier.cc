// HostTier: copying objects into engine-owned host memory.
#include "tiers/host_tier.h"

#include <cstring>

namespace spillway {

HostTier::HostTier(TierConfig config, int index, HostAllocator* allocator)
    : Tier(std::move(config), index), allocator_(allocator) {}

BlobPtr NewHostBlob(HostAllocator* allocator, uint64_t size, std::vector<uint64_t> buffer_sizes) {
  if (allocator == nullptr || !allocator->Serves(size)) {
    // Small objects: one allocation for control block, Blob and bytes.
    if (size <= Blob::kInlineMaxBytes) return Blob::NewInlineHost(size, std::move(buffer_sizes));
    std::byte* p = Blob::AllocateHost(size);
    if (p == nullptr) return nullptr;
    return std::make_shared<Blob>(p, size, std::move(buffer_sizes), MemoryKind::kHost);
  }
  std::byte* p = allocator->Allocate(size);
  if (p == nullptr) return nullptr;
  return std::make_shared<Blob>(p, size, std::move(buffer_sizes), MemoryKind::kHost,
                                [allocator](std::byte* d, uint64_t n) { allocator->Free(d, n); });
}

BlobPtr HostTier::NewBlob(uint64_t size, std::vector<uint64_t> buffer_sizes) {
  return NewHostBlob(allocator_, size, std::move(buffer_sizes));
}

StatusOr<std::vector<Location>> HostTier::StoreImpl(std::span<const ObjectView> objects) {
  std::vector<Location> locs;
  locs.reserve(objects.size());
  for (const ObjectView& obj : objects) {
    const uint64_t size = obj.raw_size();
    std::vector<uint64_t> sizes;
    sizes.reserve(obj.buffers.size());
    for (auto& b : obj.buffers) sizes.push_back(b.size());
    BlobPtr blob = NewBlob(size, std::move(sizes));
    if (!blob) {
      return Status::NoSpace("host tier '" + name() + "': out of memory allocating " +
                             std::to_string(size) + " bytes");
    }
    std::byte* dst = blob->data();
    for (auto& b : obj.buffers) {
      if (!b.empty()) std::memcpy(dst, b.data(), b.size());
      dst += b.size();
    }
    blob->SetAccount(this, size);
    Location loc;
    loc.blob = std::move(blob);
    loc.stored_bytes = size;
    locs.push_back(std::move(loc));
  }
  return locs;
}

StatusOr<BlobPtr> HostTier::LoadImpl(const Location& loc, std::string_view) { return loc.blob; }

StatusOr<Location> HostTier::AdoptImpl(BlobPtr blob, uint64_t reserved) {
  if (blob->accounted() || blob->kind() != MemoryKind::kHost) {
    return Status::InvalidArgument("host tier '" + name() + "': blob cannot be adopted");
  }
  blob->SetAccount(this, reserved);
  // Memory the allocator did not hand out now counts in this tier: what it
  // keeps for reuse shrinks to match (HostBlockCache's bound).
  if (allocator_ != nullptr) allocator_->Trim();
  Location loc;
  loc.stored_bytes = reserved;
  loc.blob = std::move(blob);
  return loc;
}

}  // namespace spillway
