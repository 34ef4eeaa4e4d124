// GpuTier: device objects in a stream-ordered pool (or managed memory), and
// the batched, pipelined copies that move them to and from the host.
#include "tiers/gpu_tier.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "tiers/pinned_pool.h"

namespace spillway {
namespace {

// Two streams and their staging buffers: what one call uses to copy.
struct CopyContext {
  cuda::Stream stream[2];
  void* staging[2] = {nullptr, nullptr};  // device memory, staging_bytes each
  std::vector<cuda::Event> events;        // one per group in flight
  CopyContext() = default;
  CopyContext(const CopyContext&) = delete;
  CopyContext& operator=(const CopyContext&) = delete;
  ~CopyContext() {
    for (void* p : staging) cuda::Free(p);
  }
  Status SyncAll() const {
    Status a = stream[0].valid() ? stream[0].Synchronize() : Status::OK();
    Status b = stream[1].valid() ? stream[1].Synchronize() : Status::OK();
    return a.ok() ? b : a;
  }
};

// One managed allocation, shared by the tier's Blob and the host-side Blobs
// that alias it after a demotion.
struct ManagedAllocation {
  explicit ManagedAllocation(void* mem) : p(mem) {}
  ManagedAllocation(const ManagedAllocation&) = delete;
  ManagedAllocation& operator=(const ManagedAllocation&) = delete;
  ~ManagedAllocation() { cuda::Free(p); }
  void* p;
};

// What one copy group moves: one large object, one staging batch of small
// ones, or one managed object.
struct Group {
  enum class Kind : unsigned char { kLarge, kSmall, kManaged } kind;
  std::vector<size_t> idx;
  uint64_t bytes = 0;  // kSmall: bytes of the batch layout (granule-rounded)
};

}  // namespace

struct GpuTier::Impl {
  int device = 0;
  cuda::DeviceIdentity identity;  // of `device`, read at Open
  bool managed = false;
  GpuTierOptions opt;
  PinnedHostAllocator* pinned = nullptr;  // opt.host_allocator when it is a pool
  cuda::DevicePool pool;
  cuda::Stream free_stream;  // where Blob deleters free into the pool

  std::mutex mu;  // guards idle and managed_owners
  std::vector<std::unique_ptr<CopyContext>> idle;
  std::unordered_map<uintptr_t, std::weak_ptr<ManagedAllocation>> managed_owners;

  ~Impl() {
    idle.clear();
    if (free_stream.valid()) (void)free_stream.Synchronize();
  }

  StatusOr<std::unique_ptr<CopyContext>> NewContext() {
    auto c = std::make_unique<CopyContext>();
    for (int k = 0; k < 2; ++k) {
      auto s = cuda::Stream::Create(device);
      if (!s.ok()) return s.status();
      c->stream[k] = std::move(*s);
      if (!managed) {
        auto p = cuda::Malloc(device, opt.staging_bytes);
        if (!p.ok()) return p.status().WithContext("allocating a staging buffer");
        c->staging[k] = *p;
      }
    }
    return c;
  }

  StatusOr<std::unique_ptr<CopyContext>> Take() {
    {
      std::lock_guard<std::mutex> l(mu);
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    return NewContext();
  }

  void Give(std::unique_ptr<CopyContext> c) {
    std::lock_guard<std::mutex> l(mu);
    idle.push_back(std::move(c));
  }

  // Unaccounted device (or managed) memory, usable on `s` in stream order.
  StatusOr<BlobPtr> NewDevice(uint64_t size, std::vector<uint64_t> sizes, const cuda::Stream& s) {
    if (managed) {
      auto p = cuda::MallocManaged(device, size);
      if (!p.ok()) return p.status();
      auto owner = std::make_shared<ManagedAllocation>(*p);
      {
        std::lock_guard<std::mutex> l(mu);
        managed_owners[reinterpret_cast<uintptr_t>(*p)] = owner;
      }
      auto blob = std::make_shared<Blob>(static_cast<std::byte*>(*p), size, std::move(sizes), MemoryKind::kManaged,
                                         [this, owner](std::byte* d, uint64_t) {
                                           std::lock_guard<std::mutex> l(mu);
                                           managed_owners.erase(reinterpret_cast<uintptr_t>(d));
                                         });
      blob->set_device(device);
      return blob;
    }
    auto p = pool.AllocAsync(size, s);
    if (!p.ok()) return p.status();
    auto blob = std::make_shared<Blob>(static_cast<std::byte*>(*p), size, std::move(sizes), MemoryKind::kDevice,
                                       [this](std::byte* d, uint64_t) { (void)pool.FreeAsync(d, free_stream); });
    blob->set_device(device);
    return blob;
  }

  // Unaccounted host memory from the configured allocator; null when out of memory.
  BlobPtr NewHost(uint64_t size, std::vector<uint64_t> sizes) {
    HostAllocator* a = opt.host_allocator;
    std::byte* p = a ? a->Allocate(size) : Blob::AllocateHost(size);
    if (p == nullptr) return nullptr;
    Blob::Deleter del;
    if (a) del = [a](std::byte* d, uint64_t n) { a->Free(d, n); };
    return std::make_shared<Blob>(p, size, std::move(sizes), MemoryKind::kHost, std::move(del));
  }

  std::shared_ptr<ManagedAllocation> OwnerOf(const std::byte* p) {
    std::lock_guard<std::mutex> l(mu);
    auto it = managed_owners.find(reinterpret_cast<uintptr_t>(p));
    return it == managed_owners.end() ? nullptr : it->second.lock();
  }
};

namespace {

// Returns a copy context to the tier's pool when the call ends.
class Lease {
 public:
  Lease(GpuTier::Impl* impl, std::unique_ptr<CopyContext> c) : impl_(impl), c_(std::move(c)) {}
  ~Lease() {
    if (c_) impl_->Give(std::move(c_));
  }
  CopyContext& operator*() { return *c_; }

 private:
  GpuTier::Impl* impl_;
  std::unique_ptr<CopyContext> c_;
};

}  // namespace

GpuTier::GpuTier(TierConfig config, int index, GpuTierOptions options)
    : Tier(std::move(config), index), options_(options), impl_(std::make_unique<Impl>()) {
  impl_->opt = options_;
  impl_->opt.staging_bytes = std::max<uint64_t>(impl_->opt.staging_bytes, 1ull << 20);
  impl_->opt.small_object_bytes = std::min(impl_->opt.small_object_bytes, impl_->opt.staging_bytes);
  impl_->opt.chunk_bytes = std::max<uint64_t>(impl_->opt.chunk_bytes, 1ull << 20);
  impl_->opt.window = std::max<uint32_t>(impl_->opt.window, 2);
  impl_->device = Tier::config().device;
  impl_->managed = managed();
  impl_->pinned = dynamic_cast<PinnedHostAllocator*>(options_.host_allocator);
}

GpuTier::~GpuTier() = default;

Status GpuTier::Open() {
  const std::string what = "gpu tier '" + name() + "'";
  SPILLWAY_RETURN_IF_ERROR(cuda::CheckDevice(device()).WithContext(what));
  auto total = cuda::DeviceTotalBytes(device());
  if (!total.ok()) return total.status().WithContext(what);
  auto identity = cuda::GetDeviceIdentity(device());
  if (!identity.ok()) return identity.status().WithContext(what);
  impl_->identity = std::move(*identity);
  if (capacity_bytes() > *total) {
    return Status::InvalidArgument(what + ": capacity " + std::to_string(capacity_bytes()) +
                                   " bytes exceeds device " + std::to_string(device()) + "'s " +
                                   std::to_string(*total) + " bytes");
  }
  if (managed()) {
    auto info = cuda::GetMemInfo(device());
    if (!info.ok()) return info.status().WithContext(what);
    if (capacity_bytes() > info->free_bytes) {
      return Status::InvalidArgument(what + ": managed capacity " + std::to_string(capacity_bytes()) +
                                     " bytes exceeds the device's free memory (" +
                                     std::to_string(info->free_bytes) +
                                     " bytes); managed memory is never over-subscribed");
    }
  } else {
    const uint64_t keep = options_.pool_release_bytes ? options_.pool_release_bytes : capacity_bytes();
    auto pool = cuda::DevicePool::Create(device(), keep);
    if (!pool.ok()) return pool.status().WithContext(what);
    impl_->pool = std::move(*pool);
  }
  auto fs = cuda::Stream::Create(device());
  if (!fs.ok()) return fs.status().WithContext(what);
  impl_->free_stream = std::move(*fs);
  auto ctx = impl_->NewContext();
  if (!ctx.ok()) return ctx.status().WithContext(what);
  impl_->Give(std::move(*ctx));
  // JIT the gather kernel now rather than on the first spill. Failure is not
  // fatal: small objects are then copied one DMA each.
  (void)cuda::CopyKernelStatus();
  return Status::OK();
}

BlobPtr GpuTier::WrapDeviceAllocation(void* data, uint64_t size, std::vector<uint64_t> buffer_sizes,
                                      std::function<void(void*)> release) {
  return std::make_shared<Blob>(static_cast<std::byte*>(data), size, std::move(buffer_sizes), MemoryKind::kDevice,
                                [release = std::move(release)](std::byte* p, uint64_t) {
                                  if (release) release(p);
                                });
}

StatusOr<BlobPtr> GpuTier::NewDeviceBlob(uint64_t size, std::vector<uint64_t> buffer_sizes) {
  auto blob = impl_->NewDevice(size, std::move(buffer_sizes), impl_->free_stream);
  if (!blob.ok()) return blob.status().WithContext("gpu tier '" + name() + "'");
  if (!managed()) SPILLWAY_RETURN_IF_ERROR(impl_->free_stream.Synchronize());
  return blob;
}

StatusOr<std::vector<Location>> GpuTier::StoreImpl(std::span<const ObjectView> objects) {
  auto taken = impl_->Take();
  if (!taken.ok()) return taken.status().WithContext("gpu tier '" + name() + "'");
  Lease lease(impl_.get(), std::move(*taken));
  CopyContext& c = *lease;
  const uint64_t chunk = impl_->opt.chunk_bytes;

  std::vector<BlobPtr> blobs;
  blobs.reserve(objects.size());
  Status st;
  // A caller's device buffer may still be receiving a copy queued on the
  // legacy default stream (a cudaMemcpy from pageable memory returns before
  // its DMA lands): order our reads after it, on both copy streams.
  for (const cuda::Stream& s : c.stream) {
    if (st.ok()) st = cuda::StreamWaitLegacyDefault(s);
  }
  for (size_t i = 0; i < objects.size() && st.ok(); ++i) {
    const ObjectView& obj = objects[i];
    const cuda::Stream& s = c.stream[i % 2];
    std::vector<uint64_t> sizes;
    sizes.reserve(obj.buffers.size());
    for (auto& b : obj.buffers) sizes.push_back(b.size());
    const uint64_t size = obj.raw_size();
    auto blob = impl_->NewDevice(size, std::move(sizes), s);
    if (!blob.ok()) {
      st = blob.status();
      break;
    }
    std::byte* dst = (*blob)->data();
    if (managed()) st = cuda::PrefetchAsync(dst, size, device(), s);  // populate on the device
    for (auto& b : obj.buffers) {
      for (uint64_t off = 0; off < b.size() && st.ok(); off += chunk) {
        st = cuda::MemcpyAsync(dst + off, b.data() + off, std::min<uint64_t>(chunk, b.size() - off), s);
      }
      dst += b.size();
    }
    blobs.push_back(std::move(*blob));
  }
  Status sync = c.SyncAll();
  if (st.ok()) st = sync;
  if (!st.ok()) return st.WithContext("gpu tier '" + name() + "': storing " + std::to_string(objects.size()) + " objects");

  std::vector<Location> locs(objects.size());
  for (size_t i = 0; i < objects.size(); ++i) {
    const uint64_t size = blobs[i]->size();
    blobs[i]->SetAccount(this, size);
    locs[i].blob = std::move(blobs[i]);
    locs[i].stored_bytes = size;
  }
  return locs;
}

StatusOr<Location> GpuTier::AdoptImpl(BlobPtr blob, uint64_t reserved) {
  const std::string what = "gpu tier '" + name() + "'";
  if (blob->accounted()) return Status::InvalidArgument(what + ": blob is already stored in a tier");
  if (blob->kind() == MemoryKind::kHost) {
    return Status::InvalidArgument(what + ": cannot adopt host memory; Store copies it to the device");
  }
  if (blob->size() > 0) {
    auto info = cuda::Classify(blob->data());
    if (!info.ok()) return info.status().WithContext(what);
    const bool device_ok = info->kind == cuda::PointerKind::kDevice && info->device == device();
    if (!device_ok && info->kind != cuda::PointerKind::kManaged) {
      return Status::InvalidArgument(what + ": adopted memory is " + cuda::PointerKindName(info->kind) +
                                     " memory (device " + std::to_string(info->device) + "), not device " +
                                     std::to_string(device()) + "'s");
    }
    blob->set_device(info->device);  // managed memory: the device it was allocated for
  }
  blob->SetAccount(this, reserved);
  Location loc;
  loc.stored_bytes = reserved;
  loc.blob = std::move(blob);
  return loc;
}

StatusOr<BlobPtr> GpuTier::LoadImpl(const Location& loc, std::string_view) {
  BlobPtr out;
  Status st = LoadGroups(std::span<const Location>(&loc, 1), [&out](size_t, BlobPtr b) {
    out = std::move(b);
    return Status::OK();
  });
  if (!st.ok()) return st;
  return out;
}

StatusOr<std::vector<BlobPtr>> GpuTier::LoadToHost(std::span<const Location> locs) {
  std::vector<BlobPtr> out(locs.size());
  Status st = LoadToHostStreaming(locs, [&out](size_t i, BlobPtr b) {
    out[i] = std::move(b);
    return Status::OK();
  });
  if (!st.ok()) return st;
  return out;
}

Status GpuTier::LoadToHostStreaming(std::span<const Location> locs, const ReadyFn& ready) {
  return LoadGroups(locs, [&](size_t i, BlobPtr b) {
    counters_.reads.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_read.fetch_add(locs[i].stored_bytes, std::memory_order_relaxed);
    return ready(i, std::move(b));
  });
}

Status GpuTier::LoadGroups(std::span<const Location> locs, const ReadyFn& ready) {
  const std::string what = "gpu tier '" + name() + "': copying to the host";
  const GpuTierOptions& opt = impl_->opt;
  constexpr uint64_t kNone = ~uint64_t{0};

  // Plan: large objects alone, small ones packed into staging batches.
  std::vector<Group> groups;
  size_t open_small = kNone;
  for (size_t i = 0; i < locs.size(); ++i) {
    const Blob* b = locs[i].blob.get();
    if (b == nullptr || b->kind() == MemoryKind::kHost) {
      return Status::InvalidArgument(what + ": location " + std::to_string(i) + " holds no device object");
    }
    const uint64_t size = b->size();
    if (b->kind() == MemoryKind::kManaged && impl_->OwnerOf(b->data()) != nullptr) {
      groups.push_back(Group{Group::Kind::kManaged, {i}, size});
    } else if (size < opt.small_object_bytes && !managed()) {
      const uint64_t n = PinnedHostAllocator::RoundUp(size);
      if (open_small == kNone || groups[open_small].bytes + n > opt.staging_bytes) {
        open_small = groups.size();
        groups.push_back(Group{Group::Kind::kSmall, {}, 0});
      }
      groups[open_small].idx.push_back(i);
      groups[open_small].bytes += n;
    } else {
      groups.push_back(Group{Group::Kind::kLarge, {i}, size});
    }
  }
  if (groups.empty()) return Status::OK();

  auto taken = impl_->Take();
  if (!taken.ok()) return taken.status().WithContext(what);
  Lease lease(impl_.get(), std::move(*taken));
  CopyContext& c = *lease;
  const size_t window = std::min<size_t>(opt.window, groups.size());
  while (c.events.size() < window) {
    auto e = cuda::Event::Create(device());
    if (!e.ok()) return e.status().WithContext(what);
    c.events.push_back(std::move(*e));
  }

  using Results = std::vector<std::pair<size_t, BlobPtr>>;
  std::vector<Results> slots(window);

  auto issue_large = [&](const Group& g, const cuda::Stream& s, Results& out) -> Status {
    const size_t i = g.idx[0];
    const Blob& src = *locs[i].blob;
    BlobPtr dst = impl_->NewHost(src.size(), src.buffer_sizes());
    if (!dst) return Status::NoSpace("out of host memory for " + std::to_string(src.size()) + " bytes");
    for (uint64_t off = 0; off < src.size(); off += opt.chunk_bytes) {
      SPILLWAY_RETURN_IF_ERROR(
          cuda::MemcpyAsync(dst->data() + off, src.data() + off, std::min(opt.chunk_bytes, src.size() - off), s));
    }
    out.emplace_back(i, std::move(dst));
    return Status::OK();
  };

  auto issue_small = [&](const Group& g, const cuda::Stream& s, void* staging, Results& out) -> Status {
    // One host allocation for the whole batch. From the pinned pool every
    // object's granule-aligned range is freed on its own; otherwise the
    // objects share the allocation until the last of them is freed.
    std::byte* base = impl_->pinned ? impl_->pinned->TryAllocatePinned(g.bytes) : nullptr;
    const bool split = base != nullptr;
    std::shared_ptr<std::byte> shared;
    if (!split) {
      HostAllocator* a = opt.host_allocator;
      const uint64_t n = g.bytes;
      base = a ? a->Allocate(n) : Blob::AllocateHost(n);
      if (base == nullptr) return Status::NoSpace("out of host memory for " + std::to_string(n) + " bytes");
      shared = std::shared_ptr<std::byte>(base, [a, n](std::byte* p) {
        if (a) {
          a->Free(p, n);
        } else {
          Blob::FreeHost(p, n);
        }
      });
    }
    PinnedHostAllocator* pool = impl_->pinned;
    std::vector<cuda::CopyPiece> pieces;
    pieces.reserve(g.idx.size());
    auto* stage = static_cast<std::byte*>(staging);
    uint64_t off = 0;
    for (size_t i : g.idx) {
      const Blob& src = *locs[i].blob;
      if (src.size() > 0) pieces.push_back(cuda::CopyPiece{src.data(), stage + off, src.size()});
      Blob::Deleter del;
      if (split) {
        del = [pool](std::byte* p, uint64_t n) { pool->Free(p, n); };
      } else {
        del = [shared](std::byte*, uint64_t) {};
      }
      out.emplace_back(i, std::make_shared<Blob>(base + off, src.size(), src.buffer_sizes(), MemoryKind::kHost,
                                                 std::move(del)));
      off += PinnedHostAllocator::RoundUp(src.size());
    }
    SPILLWAY_RETURN_IF_ERROR(cuda::CopyPiecesAsync(pieces, s));
    return cuda::MemcpyAsync(base, stage, off, s);
  };

  auto issue_managed = [&](const Group& g, const cuda::Stream& s, Results& out) -> Status {
    const size_t i = g.idx[0];
    const Blob& src = *locs[i].blob;
    auto owner = impl_->OwnerOf(src.data());
    if (!owner) return issue_large(g, s, out);  // freed meanwhile? copy instead
    SPILLWAY_RETURN_IF_ERROR(cuda::PrefetchAsync(src.data(), src.size(), cuda::kHostLocation, s));
    out.emplace_back(i, std::make_shared<Blob>(src.data(), src.size(), src.buffer_sizes(), MemoryKind::kHost,
                                               [owner](std::byte*, uint64_t) {}));
    return Status::OK();
  };

  Status st;
  size_t issued = 0, done = 0;
  while (done < groups.size()) {
    while (issued < groups.size() && issued - done < window) {
      const Group& g = groups[issued];
      const cuda::Stream& s = c.stream[issued % 2];
      Results& out = slots[issued % window];
      switch (g.kind) {
        case Group::Kind::kLarge: st = issue_large(g, s, out); break;
        case Group::Kind::kSmall: st = issue_small(g, s, c.staging[issued % 2], out); break;
        case Group::Kind::kManaged: st = issue_managed(g, s, out); break;
      }
      if (st.ok()) st = c.events[issued % window].Record(s);
      if (!st.ok()) break;
      ++issued;
    }
    if (!st.ok()) break;
    st = c.events[done % window].Synchronize();
    if (!st.ok()) break;
    Results& out = slots[done % window];
    for (auto& [i, blob] : out) {
      if (st.ok()) st = ready(i, std::move(blob));
    }
    out.clear();
    if (!st.ok()) break;
    ++done;
  }
  if (!st.ok()) {
    (void)c.SyncAll();  // no DMA may still target host memory freed below
    slots.clear();
    return st.WithContext(what);
  }
  return Status::OK();
}

Status GpuTier::PrefetchToDevice(std::span<const Location> locs) {
  if (!managed()) return Status::OK();
  auto taken = impl_->Take();
  if (!taken.ok()) return taken.status();
  Lease lease(impl_.get(), std::move(*taken));
  CopyContext& c = *lease;
  Status st;
  for (size_t i = 0; i < locs.size() && st.ok(); ++i) {
    const Blob* b = locs[i].blob.get();
    if (b && b->kind() == MemoryKind::kManaged) st = cuda::PrefetchAsync(b->data(), b->size(), device(), c.stream[i % 2]);
  }
  Status sync = c.SyncAll();
  return st.ok() ? sync : st;
}

Status GpuTier::PrefetchToHost(std::span<const Location> locs) {
  if (!managed()) return Status::OK();
  auto taken = impl_->Take();
  if (!taken.ok()) return taken.status();
  Lease lease(impl_.get(), std::move(*taken));
  CopyContext& c = *lease;
  Status st;
  for (size_t i = 0; i < locs.size() && st.ok(); ++i) {
    const Blob* b = locs[i].blob.get();
    if (b && b->kind() == MemoryKind::kManaged) {
      st = cuda::PrefetchAsync(b->data(), b->size(), cuda::kHostLocation, c.stream[i % 2]);
    }
  }
  Status sync = c.SyncAll();
  return st.ok() ? sync : st;
}

const cuda::DeviceIdentity& GpuTier::device_identity() const { return impl_->identity; }

Status GpuTier::CheckObjectDevice(const Location& loc, std::string* uuid) const {
  const Blob* b = loc.blob.get();
  const cuda::DeviceIdentity& mine = impl_->identity;
  const std::string what = "gpu tier '" + name() + "' on " + cuda::DescribeDevice(mine);
  if (b == nullptr) return Status::InvalidArgument(what + ": the location holds no object");
  if (b->size() == 0) {
    if (uuid) *uuid = mine.uuid;
    return Status::OK();
  }
  if (b->kind() == MemoryKind::kHost) return Status::InvalidArgument(what + ": the object is in host memory");
  if (b->device() < 0) return Status::Internal(what + ": the object's device was never recorded");
  auto recorded = cuda::GetDeviceIdentity(b->device());
  if (!recorded.ok()) return recorded.status().WithContext(what + ": the object's recorded device");
  auto info = cuda::Classify(b->data());
  if (!info.ok()) return info.status().WithContext(what);
  if (info->kind != cuda::PointerKind::kDevice && info->kind != cuda::PointerKind::kManaged) {
    return Status::Internal(what + ": the object's memory is " + cuda::PointerKindName(info->kind) +
                                      " memory, not device memory");
  }
  auto actual = cuda::GetDeviceIdentity(info->device);
  if (!actual.ok()) return actual.status().WithContext(what + ": the device holding the object");
  if (uuid) *uuid = actual->uuid;
  if (!(*recorded == mine)) {
    return Status::Internal(what + ": the object was recorded on " + cuda::DescribeDevice(*recorded));
  }
  if (!(*actual == mine)) {
    return Status::Internal(what + ": the object's memory is on " + cuda::DescribeDevice(*actual));
  }
  return Status::OK();
}

StatusOr<cuda::MemInfo> GpuTier::DeviceMemInfo() const { return cuda::GetMemInfo(device()); }

Status GpuTier::TrimPool() {
  if (!impl_->pool.valid()) return Status::OK();
  SPILLWAY_RETURN_IF_ERROR(impl_->free_stream.Synchronize());
  return impl_->pool.TrimTo(0);
}

uint64_t GpuTier::pool_reserved_bytes() const { return impl_->pool.valid() ? impl_->pool.reserved_bytes() : 0; }

}  // namespace spillway
