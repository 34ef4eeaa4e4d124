// Blob: the bytes of one object in memory (its buffers concatenated), shared
// by the tier that stores it and by every Handle that pins it.
//
// A Blob may be "accounted" in a memory tier: its destructor then returns its
// bytes to that tier, so memory pinned by a Handle after an Erase is still
// counted until the Handle lets go.
//
// Small host objects dominate the engine's per-object memory, so a Blob is
// kept to 48 bytes: a deleter and buffer sizes other than "one buffer of
// size() bytes" live in a separately allocated Extra, and NewInlineHost puts
// the shared_ptr control block, the Blob and the bytes in one allocation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "tiers/small_block_pool.h"

namespace spillway {

enum class MemoryKind : unsigned char { kHost, kDevice, kManaged };

class Blob;
// Called with the number of bytes when an accounted Blob is destroyed.
class BlobAccount {
 public:
  virtual ~BlobAccount() = default;
  virtual void OnBlobFreed(uint64_t bytes) = 0;
};

class Blob {
 public:
  // Frees `data`; default is FreeHost (memory from AllocateHost).
  using Deleter = std::function<void(std::byte*, uint64_t)>;
  // Objects up to this size get NewInlineHost's single allocation; their
  // bytes are 16-byte aligned (larger ones keep AllocateHost's 64).
  static constexpr uint64_t kInlineMaxBytes = 1024;

  Blob(std::byte* data, uint64_t size, std::vector<uint64_t> buffer_sizes, MemoryKind kind,
       Deleter deleter = nullptr)
      : data_(data), size_(size), num_buffers_(static_cast<uint32_t>(buffer_sizes.size())), kind_(kind) {
    const bool plain_sizes = buffer_sizes.empty() || (buffer_sizes.size() == 1 && buffer_sizes[0] == size);
    if (deleter || !plain_sizes) {
      extra_ = new Extra{std::move(deleter), {}, {}};
      if (!plain_sizes) extra_->buffer_sizes = std::move(buffer_sizes);
    }
  }
  ~Blob() {
    if (extra_ != nullptr && extra_->deleter) {
      extra_->deleter(data_, size_);
    } else if (owns_data_) {
      FreeHost(data_, size_);
    }
    delete extra_;
    if (account_) account_->OnBlobFreed(accounted_bytes_);
  }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Host memory for `size` bytes, 64-byte aligned; null when out of memory.
  // Up to SmallBlockPool::kMaxBytes from that pool (reused across threads
  // without the C library's arena lock), from kHugePageMinBytes a mapping of
  // its own, aligned_alloc between.
  static std::byte* AllocateHost(uint64_t size) {
    if (size >= kHugePageMinBytes) return AllocateLargeHost(size, ObjectHugePages().enabled);
    if (size <= SmallBlockPool::kMaxBytes) return SmallBlockPool::Allocate(size);
    size_t n = (size + 63) & ~size_t{63};
    return static_cast<std::byte*>(std::aligned_alloc(64, n));
  }
  // Frees what AllocateHost(size) returned, given the same size (null: nothing).
  static void FreeHost(std::byte* p, uint64_t size) {
    if (size >= kHugePageMinBytes) {
      FreeLargeHost(p, size);
    } else if (size <= SmallBlockPool::kMaxBytes) {
      SmallBlockPool::Free(p, size);
    } else {
      std::free(p);
    }
  }
  // From this size on, AllocateHost maps memory of its own, 2 MiB aligned and
  // (ObjectHugePages) marked for transparent huge pages (blob.cc): a fresh
  // buffer of 4 KiB pages takes a fault per page to fill, more than the copy
  // itself (docs/performance.md#tuning-constants-file-tier).
  static constexpr uint64_t kHugePageMinBytes = 4ull << 20;
  // Null when out of memory (or out of mappings: vm.max_map_count).
  // `huge_pages`: marked MADV_HUGEPAGE (objects: ObjectHugePages; I/O
  // buffers always).
  static std::byte* AllocateLargeHost(uint64_t size, bool huge_pages);
  static void FreeLargeHost(std::byte* p, uint64_t size);
  // Whether objects' large allocations get transparent huge pages, and why.
  // Not where the kernel hands free 2 MiB blocks back to a hypervisor (a
  // virtio balloon with free page reporting, VIRTIO_BALLOON_F_REPORTING):
  // a block free for 2 s or more is reported and discarded, and touching it
  // again costs the host's fault of all of it, many times what 4 KiB pages
  // cost (docs/performance.md#tuning-constants-file-tier). Elsewhere they do.
  // SPILLWAY_HUGE_PAGES=always|never overrides; decided once per process.
  struct HugePagePolicy {
    bool enabled = true;
    std::string reason;
  };
  static const HugePagePolicy& ObjectHugePages();
  // A host Blob of `size` (<= kInlineMaxBytes) uninitialised bytes sharing one
  // allocation with its control block; null when out of memory.
  static std::shared_ptr<Blob> NewInlineHost(uint64_t size, std::vector<uint64_t> buffer_sizes);

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  size_t num_buffers() const { return num_buffers_; }
  std::vector<uint64_t> buffer_sizes() const {
    if (extra_ != nullptr && !extra_->buffer_sizes.empty()) return extra_->buffer_sizes;
    return num_buffers_ == 0 ? std::vector<uint64_t>{} : std::vector<uint64_t>{size_};
  }
  std::span<const std::byte> buffer(size_t i) const {
    if (extra_ == nullptr || extra_->buffer_sizes.empty()) return {data_, static_cast<size_t>(size_)};
    const std::vector<uint64_t>& sizes = extra_->buffer_sizes;
    uint64_t off = 0;
    for (size_t j = 0; j < i; ++j) off += sizes[j];
    return {data_ + off, static_cast<size_t>(sizes[i])};
  }
  // Fills `out` with one span per buffer.
  void Spans(std::vector<std::span<const std::byte>>* out) const {
    out->clear();
    if (extra_ == nullptr || extra_->buffer_sizes.empty()) {
      if (num_buffers_ == 1) out->emplace_back(data_, static_cast<size_t>(size_));
      return;
    }
    uint64_t off = 0;
    for (uint64_t n : extra_->buffer_sizes) {
      out->emplace_back(data_ + off, static_cast<size_t>(n));
      off += n;
    }
  }

  // Opaque state of the layer above riding on the Blob (the engine's external
  // objects, Engine::PutExternal: a Blob of no buffers standing for a live
  // object). Set once, before the Blob is shared; dropped with the Blob.
  void SetAttachment(std::shared_ptr<void> attachment) {
    if (extra_ == nullptr) extra_ = new Extra{};
    extra_->attachment = std::move(attachment);
  }
  const std::shared_ptr<void>* attachment() const {
    return extra_ != nullptr && extra_->attachment ? &extra_->attachment : nullptr;
  }

  // REQUIRES: not yet accounted. `account` must outlive the Blob.
  void SetAccount(BlobAccount* account, uint64_t bytes) {
    account_ = account;
    accounted_bytes_ = bytes;
  }
  bool accounted() const { return account_ != nullptr; }
  // The CUDA device (this process's ordinal) whose memory holds the bytes,
  // recorded by the gpu tier that allocated or adopted them; -1 for host
  // memory and for device memory no tier has recorded yet. The ordinal is
  // fixed within a process; cuda::GetDeviceIdentity maps it to the device's
  // UUID, which GpuTier::CheckObjectDevice compares, so memory of one device
  // is never taken for another's.
  int device() const { return device_; }
  void set_device(int device) { device_ = static_cast<int16_t>(device); }

 private:
  // What most blobs do without: a custom deleter, or buffer sizes other than
  // one buffer of size() bytes (then buffer_sizes is non-empty).
  struct Extra {
    Deleter deleter;
    std::vector<uint64_t> buffer_sizes;
    std::shared_ptr<void> attachment;
  };
  template <typename T>
  struct TailAllocator;
  // NewInlineHost -> TailAllocator: the bytes to add, and where they went.
  // One per thread, shared by every rebinding of the allocator.
  struct InlineRequest {
    size_t extra = 0;
    std::byte* tail = nullptr;
  };
  static InlineRequest& inline_request() {
    thread_local InlineRequest r;
    return r;
  }

  std::byte* data_;
  uint64_t size_;
  BlobAccount* account_ = nullptr;
  uint64_t accounted_bytes_ = 0;
  Extra* extra_ = nullptr;
  uint32_t num_buffers_;
  MemoryKind kind_;
  bool owns_data_ = true;  // false: the bytes live in the Blob's own allocation
  int16_t device_ = -1;    // in the padding: the Blob stays 48 bytes
};

using BlobPtr = std::shared_ptr<Blob>;

// allocate_shared's allocator for NewInlineHost: it over-allocates the control
// block by the object's bytes and reports where they start. State passes
// through a thread_local (inline_request) so the allocator is empty and adds
// nothing to the control block; deallocation needs no state.
template <typename T>
struct Blob::TailAllocator {
  using value_type = T;
  static constexpr size_t kAlign = 16;

  TailAllocator() = default;
  template <typename U>
  TailAllocator(const TailAllocator<U>&) {}
  T* allocate(size_t n) {
    const size_t head = (n * sizeof(T) + kAlign - 1) & ~(kAlign - 1);
    InlineRequest& r = inline_request();
    auto* p = static_cast<std::byte*>(std::malloc(head + r.extra));
    if (p == nullptr) throw std::bad_alloc();
    r.tail = p + head;
    return reinterpret_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  bool operator==(const TailAllocator<U>&) const { return true; }
};

inline std::shared_ptr<Blob> Blob::NewInlineHost(uint64_t size, std::vector<uint64_t> buffer_sizes) {
  InlineRequest& r = inline_request();
  r.extra = static_cast<size_t>(size);
  r.tail = nullptr;
  std::shared_ptr<Blob> b;
  try {
    b = std::allocate_shared<Blob>(TailAllocator<Blob>(), nullptr, size, std::move(buffer_sizes), MemoryKind::kHost);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
  b->data_ = r.tail;
  b->owns_data_ = false;
  return b;
}

}  // namespace spillway
