// EngineCore's GPU paths: classifying caller buffers, building gpu tiers and
// the pinned host pool, bringing objects to the device (Get(kDevice),
// Acquire, Prefetch), adopting caller allocations, AllocateDevice, and the
// device-memory pressure the mover acts on. In a build without CUDA these
// report NotSupported and device buffers are never detected.
#include <future>

#include "base/checked_math.h"
#include "base/units.h"
#include "engine/engine_core.h"
#include "engine/mover.h"
#include "base/cuda_runtime.h"
#include "tiers/pinned_pool.h"
#ifdef SPILLWAY_HAVE_CUDA
#include "tiers/gpu_tier.h"
#endif

namespace spillway::internal {

namespace {
#ifdef SPILLWAY_HAVE_CUDA
GpuTier* AsGpu(Tier& t) { return static_cast<GpuTier*>(&t); }
#endif
}  // namespace

Status EngineCore::OpenGpuSupport(Logger* logger) {
  uint64_t pinned_capacity = 0;
  uint64_t pin_at_open = 0;
  for (const TierConfig& tc : config_.tiers) {
    if (tc.kind != TierKind::kHost || !tc.pinned) continue;
    pinned_capacity = SaturatingAdd(pinned_capacity, tc.capacity_bytes);
    const auto fraction = static_cast<uint64_t>(tc.pin_at_open_fraction * static_cast<double>(tc.capacity_bytes));
    pin_at_open =
        SaturatingAdd(pin_at_open, std::min(tc.capacity_bytes, std::max(tc.pin_at_open_bytes, fraction)));
  }
  if (pinned_capacity == 0 || !cuda::BuiltWithCuda()) return Status::OK();
  auto devices = cuda::DeviceCount();
  if (!devices.ok() || *devices == 0) return Status::OK();  // no GPU: plain host memory
  PinnedPoolOptions po;
  po.capacity_bytes = pinned_capacity;
  po.initial_bytes = std::max(po.initial_bytes, pin_at_open);
  // Slabs are pinned by a background thread, so Open stays fast unless a
  // tier asks for pin_at_open: copies into memory not yet pinned run several
  // times slower (a spill burst right after Open outruns the grower, about
  // 2 GB/s), so a worker that spills at once pins at startup.
  auto pool = std::make_unique<PinnedHostAllocator>(po);
  if (pin_at_open > 0) {
    const Status st = pool->WaitForFree(pin_at_open, std::chrono::minutes(10));
    if (!st.ok()) {
      logger->Log(LogLevel::kWarning, "pin_at_open: " + FormatBytes(pin_at_open) + " not page-locked at open (" +
                                          st.ToString() + "); the rest is pinned in the background");
    }
  }
  host_alloc_ = std::move(pool);
  return Status::OK();
}

void EngineCore::CreateGpuTier(const TierConfig& tc, int index, Status* st) {
#ifdef SPILLWAY_HAVE_CUDA
  GpuTierOptions go;
  go.host_allocator = host_alloc_.get();
  auto tier = std::make_unique<GpuTier>(tc, index, go);
  *st = tier->Open();
  if (!st->ok()) {
    *st = st->WithContext("tier '" + tc.name + "'");
    return;
  }
  tiers_.push_back(std::move(tier));
#else
  (void)index;
  *st = Status::NotSupported("tier '" + tc.name + "': built without CUDA");
#endif
}

MemoryKind EngineCore::ClassifyBuffers(std::span<const std::span<const std::byte>> buffers, Where declared) const {
  if (declared == Where::kDevice) return MemoryKind::kDevice;
  if (declared == Where::kHost || FirstGpuTier() < 0) return MemoryKind::kHost;
  for (const auto& b : buffers) {
    if (b.empty()) continue;
    auto info = cuda::Classify(b.data());
    if (!info.ok()) return MemoryKind::kHost;
    if (info->kind == cuda::PointerKind::kDevice) return MemoryKind::kDevice;
    if (info->kind == cuda::PointerKind::kManaged) return MemoryKind::kManaged;
    return MemoryKind::kHost;
  }
  return MemoryKind::kHost;
}

bool EngineCore::CanAdoptHost(int t) const { return tiers_[t]->kind() == TierKind::kHost; }

StatusOr<BlobPtr> EngineCore::CopyDeviceToHost(const ObjectView& view) {
  const uint64_t raw = view.raw_size();
  std::vector<uint64_t> sizes;
  for (auto& b : view.buffers) sizes.push_back(b.size());
  BlobPtr blob = NewHostBlob(host_alloc_.get(), raw, std::move(sizes));
  if (!blob) return Status::NoSpace("out of host memory for " + std::to_string(raw) + " bytes");
  std::byte* p = blob->data();
  uint64_t off = 0;
  for (auto& b : view.buffers) {
    if (!b.empty()) SPILLWAY_RETURN_IF_ERROR(cuda::Memcpy(p + off, b.data(), b.size()));
    off += b.size();
  }
  return blob;
}

StatusOr<std::vector<BlobPtr>> EngineCore::LoadBatchToHost(int t, std::span<const Location> locs) {
#ifdef SPILLWAY_HAVE_CUDA
  if (tiers_[t]->kind() == TierKind::kGpu) return AsGpu(*tiers_[t])->LoadToHost(locs);
#endif
  std::vector<BlobPtr> out;
  for (const Location& l : locs) {
    auto b = tiers_[t]->Load(l, "");
    if (!b.ok()) return b.status();
    out.push_back(std::move(*b));
  }
  return out;
}

StatusOr<Handle> EngineCore::ToDevice(Entry* e, int t, uint64_t version, Location loc, std::string_view key) {
  const int g = FirstGpuTier();
  if (g < 0) {
    Unpin(e);
    Unref(e);
    return Status::NotSupported("no gpu tier: cannot return device memory");
  }
  const auto start = std::chrono::steady_clock::now();
  BlobPtr host;
  if (tiers_[t]->is_memory()) {
    host = std::move(loc.blob);
  } else {
    auto b = tiers_[t]->Load(loc, key);
    if (!b.ok()) {
      Unpin(e);
      Unref(e);
      return b.status();
    }
    host = std::move(*b);
  }
  std::vector<std::span<const std::byte>> spans;
  host->Spans(&spans);
  ObjectView view{key, spans};
  const uint64_t est = tiers_[g]->ReserveEstimate(view);
  if (!mover_->MakeRoom(g, est, Mover::RoomFor::kRead)) {
    Unpin(e);
    Unref(e);
    return Status::NoSpace("cannot make room for " + FormatBytes(est) + " on gpu tier '" + tiers_[g]->name() +
                           "' (" + FormatBytes(tiers_[g]->used_bytes()) + " of " +
                           FormatBytes(tiers_[g]->capacity_bytes()) + " used, " +
                           FormatBytes(pinned_bytes_[g].Load()) + " of it pinned by open handles; nothing " +
                           "could be demoted for a second)");
  }
  auto locs = tiers_[g]->Store(std::span<const ObjectView>(&view, 1), std::span<const uint64_t>(&est, 1));
  if (!locs.ok()) {
    tiers_[g]->Unreserve(est);
    Unpin(e);
    Unref(e);
    return locs.status();
  }
  Location dev = std::move((*locs)[0]);
  BlobPtr device_blob = dev.blob;
  Location old;
  bool committed = false;
  {
    auto& shard = index_.ShardFor(key);
    std::lock_guard<std::mutex> l(shard.mu);
    // A persistent tier's record is the object's durable copy: it is copied
    // to the device, never moved there.
    if (!persistent_file(t) && UnchangedSince(e, t, version)) {
      old = RelocatePinnedLocked(e, t, g, std::move(dev));
      committed = true;
    }
  }
  if (committed) {
    tiers_[t]->Free(old);
    const uint64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start).count();
    boundary(t, g).Record(1, e->raw_size, e->raw_size, ns);
    LogMove(key, e->raw_size, e->raw_size, t, g, ns / 1000, true);
    if (tiers_[g]->AboveHigh() && mover_) mover_->Wake();
  } else {
    tiers_[g]->Free(dev);  // raced: the handle keeps its own device copy until released
  }
  return Handle(std::move(device_blob), e, this);
}

Status EngineCore::PutDeviceAllocation(std::string_view key, void* device_ptr, std::vector<uint64_t> buffer_sizes,
                                       std::function<void(void*)> release) {
#ifdef SPILLWAY_HAVE_CUDA
  const int g = FirstGpuTier();
  if (g < 0) return Status::NotSupported("no gpu tier to adopt a device allocation");
  uint64_t size = 0;
  for (uint64_t n : buffer_sizes) size += n;
  BlobPtr blob = GpuTier::WrapDeviceAllocation(device_ptr, size, buffer_sizes, std::move(release));
  puts_.fetch_add(1, std::memory_order_relaxed);
  if (placement_->Admits(g, size, size) && mover_->MakeRoom(g, size)) {
    auto loc = tiers_[g]->Adopt(blob, size);
    if (loc.ok()) {
      Insert(key, size, g, std::move(*loc), next_sequence_.fetch_add(1, std::memory_order_relaxed));
      if (tiers_[g]->AboveHigh() && mover_) mover_->Wake();
      return Status::OK();
    }
    tiers_[g]->Unreserve(size);
  }
  // No room on the device: copy it down the chain; `release` runs when the
  // wrapping blob goes away at the end of this call.
  std::vector<std::span<const std::byte>> spans;
  blob->Spans(&spans);
  PutOptions po;
  po.memory = Where::kDevice;
  return Put(key, spans, po);
#else
  (void)key, (void)device_ptr, (void)buffer_sizes, (void)release;
  return Status::NotSupported("built without CUDA");
#endif
}

StatusOr<std::shared_ptr<void>> EngineCore::AllocateDevice(uint64_t bytes) {
#ifdef SPILLWAY_HAVE_CUDA
  const int g = FirstGpuTier();
  if (g < 0) return Status::NotSupported("no gpu tier");
  GpuTier* gpu = AsGpu(*tiers_[g]);
  auto blob = gpu->NewDeviceBlob(bytes, {bytes});
  if (!blob.ok() && blob.status().IsNoSpace()) {
    // Make room: return pool memory, demote what is needed, retry once.
    (void)gpu->TrimPool();
    Demote(g, bytes);
    (void)gpu->TrimPool();
    blob = gpu->NewDeviceBlob(bytes, {bytes});
  }
  if (!blob.ok()) return blob.status();
  BlobPtr b = std::move(*blob);
  void* p = b->data();
  return std::shared_ptr<void>(std::move(b), p);
#else
  (void)bytes;
  return Status::NotSupported("built without CUDA");
#endif
}

uint64_t EngineCore::DevicePressure(int t) {
#ifdef SPILLWAY_HAVE_CUDA
  Tier& tier = *tiers_[t];
  if (tier.kind() != TierKind::kGpu || tier.config().headroom_bytes == 0) return 0;
  GpuTier* gpu = AsGpu(tier);
  auto info = gpu->DeviceMemInfo();
  const uint64_t headroom = tier.config().headroom_bytes;
  if (!info.ok() || info->free_bytes >= headroom) return 0;
  (void)gpu->TrimPool();  // cached pool memory is the cheapest to give back
  info = gpu->DeviceMemInfo();
  if (!info.ok() || info->free_bytes >= headroom) return 0;
  return headroom - info->free_bytes;
#else
  (void)t;
  return 0;
#endif
}

}  // namespace spillway::internal
