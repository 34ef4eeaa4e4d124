// GpuTier: objects in GPU memory, one device Blob each (buffers concatenated).
// Built only with CUDA (SPILLWAY_HAVE_CUDA); all CUDA calls go through
// base/cuda_runtime.h.
//
// Memory (TierConfig::memory):
//  - device: allocations from a stream-ordered pool (cudaMemPool) of the
//    configured device. Freed memory stays in the pool up to the tier's
//    capacity (GpuTierOptions::pool_release_bytes); TrimPool gives it back.
//  - managed: cudaMallocManaged, prefetched to the device when stored;
//    demotion is cudaMemPrefetchAsync to the host (Load returns the same
//    memory, now resident on the host, without a copy). For comparing with
//    CUDA's own eviction. A managed allocation is refused (NoSpace) when it
//    would not fit in the device's free memory.
//
// Data paths:
//  - Store (Tier::Store): copies each object's buffers into tier memory with
//    cudaMemcpyAsync. The buffers may be device, managed or host memory:
//    device buffers are a Put (device to device); host buffers are a promotion
//    or Get(Where::kDevice) (host to device, at PCIe speed from pinned memory).
//  - Adopt (Tier::Adopt): takes a caller's device allocation without copying;
//    wrap it with WrapDeviceAllocation, whose release callback runs when the
//    tier (and every Handle) lets go of it.
//  - Load (Tier::Load) and LoadToHost: copies objects to host memory for the
//    mover (gpu -> host). Objects of small_object_bytes or more are copied
//    with one or more large cudaMemcpyAsync each; smaller ones are gathered
//    on the device by one kernel into a staging buffer and cross PCIe as one
//    copy, into one host allocation cut into one Blob per object. Copies
//    alternate between two streams so gathering one batch overlaps copying
//    the previous one; up to `window` batches are in flight.
//  - LoadToHostStreaming hands each object over as soon as its copy is done,
//    so the next tier can encode and write while later copies run.
//
// Host memory for Load results comes from options.host_allocator: share the
// host tier's PinnedHostAllocator, and demote into the host tier with
// HostTier::Adopt (the blobs are unaccounted kHost blobs from that allocator),
// so gpu -> host spilling is one DMA and no memcpy.
//
// Ordering: buffers passed to Store or Adopt must be ready (the caller has
// synchronized the stream that produced them). Store, Load and LoadToHost
// return after their copies are complete.
//
// Thread-safety: after Open, every method may be called concurrently; each
// call takes its own copy context (two streams and two staging buffers) from
// a small pool. REQUIRES: the tier outlives every Blob it produced (device
// Blobs free themselves into its pool).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/cuda_runtime.h"
#include "tiers/host_tier.h"
#include "tiers/tier.h"

namespace spillway {

struct GpuTierOptions {
  // Host memory for objects copied to the host; not owned. Null: aligned
  // malloc (pageable: copies then run at a fraction of PCIe speed).
  HostAllocator* host_allocator = nullptr;
  // Largest single cudaMemcpyAsync of a large object.
  uint64_t chunk_bytes = 64ull << 20;
  // Objects smaller than this are gathered into staging batches on the device.
  uint64_t small_object_bytes = 1ull << 20;
  // Bytes per staging buffer (two per copy context, in device memory outside
  // the tier's capacity).
  uint64_t staging_bytes = 16ull << 20;
  // Copy groups (one large object, or one staging batch) in flight per call.
  uint32_t window = 8;
  // Freed device memory the pool keeps for reuse; 0 means the tier's capacity.
  uint64_t pool_release_bytes = 0;
};

class GpuTier : public Tier {
 public:
  GpuTier(TierConfig config, int index, GpuTierOptions options = {});
  // REQUIRES: no Blob of this tier is alive.
  ~GpuTier() override;

  // Makes the device's context, checks the capacity against the device's
  // memory and creates the pool and the first copy context. NotSupported
  // (with the reason) without a usable device; InvalidArgument when the
  // capacity exceeds the device's memory. Call once, before anything else.
  Status Open();

  bool Accepts(MemoryKind kind) const override { return kind != MemoryKind::kHost; }
  uint64_t ReserveEstimate(const ObjectView& object) const override { return object.raw_size(); }
  int device() const { return config().device; }
  bool managed() const { return config().memory == GpuMemory::kManaged; }
  const GpuTierOptions& options() const { return options_; }

  // A Blob over a caller's device allocation of `size` bytes, for Adopt
  // (zero-copy Put). `release(data)` runs once, when the last reference goes
  // (it may be null: the caller keeps ownership and must keep the memory
  // alive until the object is erased and unpinned). `buffer_sizes` split the
  // allocation into the object's buffers (they must sum to `size`).
  static BlobPtr WrapDeviceAllocation(void* data, uint64_t size, std::vector<uint64_t> buffer_sizes,
                                      std::function<void(void*)> release);

  // Device memory of `size` bytes from the tier's pool (managed memory in
  // managed mode), unaccounted: the caller fills it and stores it with Adopt
  // (the engine's AllocateDevice). NoSpace when the device is out of memory.
  StatusOr<BlobPtr> NewDeviceBlob(uint64_t size, std::vector<uint64_t> buffer_sizes);

  // Host copies of stored objects (locations of this tier), in order. The
  // blobs are unaccounted kHost blobs from options.host_allocator.
  StatusOr<std::vector<BlobPtr>> LoadToHost(std::span<const Location> locs);
  // As LoadToHost, but calls ready(i, blob) on this thread as soon as object
  // i is on the host (objects of one batch together; not necessarily in index
  // order). An error from `ready` stops the call and is returned after the
  // copies in flight are done.
  using ReadyFn = std::function<Status(size_t index, BlobPtr blob)>;
  Status LoadToHostStreaming(std::span<const Location> locs, const ReadyFn& ready);

  // Managed mode: migrates objects' pages (no-op in device mode).
  Status PrefetchToDevice(std::span<const Location> locs);
  Status PrefetchToHost(std::span<const Location> locs);

  // Which physical GPU the tier's device is (read at Open): its UUID and PCI
  // bus id survive CUDA_VISIBLE_DEVICES renumbering, so two workers that
  // each see "device 0" can be told apart.
  const cuda::DeviceIdentity& device_identity() const;
  // Verifies that a stored object lives on this tier's device: the device
  // the tier recorded for it when it allocated or adopted it, and the device
  // cudaPointerGetAttributes reports for its memory now, must both be the
  // tier's (compared by UUID). OK, or Internal naming the devices (a
  // location without a device object: InvalidArgument);
  // an object without memory (0 bytes) passes. `uuid`, when given, receives
  // the UUID of the device holding the memory.
  Status CheckObjectDevice(const Location& loc, std::string* uuid = nullptr) const;

  // The device's free and total memory (for the memory monitor).
  StatusOr<cuda::MemInfo> DeviceMemInfo() const;
  // Gives memory the pool holds but no object uses back to the device, so
  // other libraries can have it (call before demoting on low free memory).
  Status TrimPool();
  // Bytes the pool holds from the device (objects plus cached free memory).
  uint64_t pool_reserved_bytes() const;

  struct Impl;

 protected:
  StatusOr<std::vector<Location>> StoreImpl(std::span<const ObjectView> objects) override;
  StatusOr<BlobPtr> LoadImpl(const Location& loc, std::string_view key) override;
  StatusOr<Location> AdoptImpl(BlobPtr blob, uint64_t reserved) override;
  void FreeImpl(Location& loc) override { loc.blob.reset(); }

 private:
  Status LoadGroups(std::span<const Location> locs, const ReadyFn& ready);

  const GpuTierOptions options_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace spillway
