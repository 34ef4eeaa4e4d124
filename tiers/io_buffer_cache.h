// Aligned I/O buffers for a file tier: AllocIoBuffer / IoBuffer (memory an
// O_DIRECT request may use), and IoBufferCache, the buffers a tier's threads
// encode slabs into and read records through, shared by the tier instead of
// kept per thread.
//
// A fresh 9 MiB slab buffer costs its page faults every time (about 2300),
// so buffers are reused; but a buffer kept by every thread that ever wrote
// or read stays resident for the process's life, memory a Dask worker's
// limit counts (docs/performance.md#tuning-constants-file-tier). The
// cache keeps at most `keep` idle buffers of at most `keep_bytes` together;
// Release() frees those too (under process memory pressure).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "base/align.h"
#include "spillway/file_io.h"
#include "tiers/blob.h"

namespace spillway {

// `bytes` (at least one kIoAlign block, rounded up to whole blocks) of
// kIoAlign-aligned memory for O_DIRECT requests; null when out of memory.
// Free with FreeIoBuffer, given the same `bytes`.
//
// From kHugeIoBytes on, a mapping of its own, 2 MiB aligned and marked for
// transparent huge pages (Blob::AllocateLargeHost): a direct request into
// or out of 2 MiB pages runs faster than the same request over 4 KiB pages,
// the cost being per page the request spans (docs/performance.md#tuning-constants-file-tier).
// Smaller buffers come from the C library (a 2 MiB page for
// a 4 KiB request would be mostly waste); the caches below round what they
// keep up to whole 2 MiB pages.
inline constexpr uint64_t kHugeIoBytes = 2ull << 20;
inline uint64_t IoBufferBytes(uint64_t bytes) {
  return AlignUp(std::max<uint64_t>(bytes, 1), kIoAlign);
}
inline std::byte* AllocIoBuffer(uint64_t bytes) {
  const uint64_t n = IoBufferBytes(bytes);
  if (n >= kHugeIoBytes) return Blob::AllocateLargeHost(n, /*huge_pages=*/true);
  return static_cast<std::byte*>(std::aligned_alloc(kIoAlign, n));
}
inline void FreeIoBuffer(std::byte* p, uint64_t bytes) {
  if (p == nullptr) return;
  const uint64_t n = IoBufferBytes(bytes);
  if (n >= kHugeIoBytes) {
    Blob::FreeLargeHost(p, n);
  } else {
    std::free(p);
  }
}

// An I/O buffer owned by one scope: IoBuffer(bytes), then get() (null when
// out of memory).
class IoBuffer {
 public:
  IoBuffer() = default;
  explicit IoBuffer(uint64_t bytes) : data_(AllocIoBuffer(bytes)), bytes_(bytes) {}
  IoBuffer(IoBuffer&& o) noexcept : data_(o.data_), bytes_(o.bytes_) { o.data_ = nullptr; }
  IoBuffer& operator=(IoBuffer&& o) noexcept {
    if (this != &o) {
      FreeIoBuffer(data_, bytes_);
      data_ = o.data_, bytes_ = o.bytes_;
      o.data_ = nullptr;
    }
    return *this;
  }
  IoBuffer(const IoBuffer&) = delete;
  IoBuffer& operator=(const IoBuffer&) = delete;
  ~IoBuffer() { FreeIoBuffer(data_, bytes_); }
  std::byte* get() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  std::byte* data_ = nullptr;
  uint64_t bytes_ = 0;
};

class IoBufferCache {
 public:
  // A buffer taken from the cache, given back when the lease ends.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : cache_(o.cache_), data_(o.data_), size_(o.size_) { o.data_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        Reset();
        cache_ = o.cache_, data_ = o.data_, size_ = o.size_;
        o.data_ = nullptr;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { Reset(); }
    std::byte* get() const { return data_; }
    void Reset() {
      if (data_ != nullptr) cache_->Give(data_, size_);
      data_ = nullptr;
    }

   private:
    friend class IoBufferCache;
    IoBufferCache* cache_ = nullptr;
    std::byte* data_ = nullptr;
    uint64_t size_ = 0;
  };

  // `keep`: idle buffers kept at most, `keep_bytes` their bytes at most;
  // `max_bytes`: larger requests are allocated and freed each time, never kept.
  IoBufferCache(size_t keep, uint64_t max_bytes, uint64_t keep_bytes = ~uint64_t{0})
      : keep_(keep), max_bytes_(max_bytes), keep_bytes_(keep_bytes) {}
  ~IoBufferCache() { Release(); }
  IoBufferCache(const IoBufferCache&) = delete;
  IoBufferCache& operator=(const IoBufferCache&) = delete;

  // At least `bytes`, kIoAlign-aligned (the smallest idle buffer large
  // enough, or a new one rounded up to whole 2 MiB pages, kHugeIoBytes); get()
  // is null when memory runs out. The smallest, so that a small request does
  // not take the large buffer a later large request needs: a new buffer's
  // first use pays its page faults, many times the read it serves.
  Lease Take(uint64_t bytes) {
    bytes = std::max<uint64_t>(bytes, 1);
    Lease l;
    l.cache_ = this;
    {
      std::lock_guard<std::mutex> g(mu_);
      size_t best = idle_.size();
      for (size_t i = 0; i < idle_.size(); ++i) {
        if (idle_[i].size >= bytes && (best == idle_.size() || idle_[i].size < idle_[best].size)) best = i;
      }
      if (best != idle_.size()) {
        l.data_ = idle_[best].data, l.size_ = idle_[best].size;
        idle_bytes_ -= idle_[best].size;
        idle_[best] = idle_.back();
        idle_.pop_back();
        return l;
      }
    }
    l.size_ = bytes <= max_bytes_ ? std::min(AlignUp(bytes, kHugeIoBytes), max_bytes_) : bytes;
    l.data_ = AllocIoBuffer(l.size_);
    return l;
  }

  // Frees every idle buffer (buffers in use come back as usual).
  void Release() {
    std::vector<Idle> drop;
    {
      std::lock_guard<std::mutex> g(mu_);
      drop.swap(idle_);
      idle_bytes_ = 0;
    }
    for (const Idle& b : drop) FreeIoBuffer(b.data, b.size);
  }

  size_t idle() const {
    std::lock_guard<std::mutex> g(mu_);
    return idle_.size();
  }

 private:
  struct Idle {
    std::byte* data;
    uint64_t size;
  };

  void Give(std::byte* data, uint64_t size) {
    if (size <= max_bytes_) {
      std::lock_guard<std::mutex> g(mu_);
      if (idle_.size() < keep_ && idle_bytes_ + size <= keep_bytes_) {
        idle_.push_back({data, size});
        idle_bytes_ += size;
        return;
      }
      // Full: keep the larger buffer (it serves more requests).
      auto smallest = std::min_element(idle_.begin(), idle_.end(),
                                       [](const Idle& a, const Idle& b) { return a.size < b.size; });
      if (smallest != idle_.end() && smallest->size < size && idle_bytes_ - smallest->size + size <= keep_bytes_) {
        idle_bytes_ += size - smallest->size;
        std::swap(smallest->data, data), std::swap(smallest->size, size);
      }
    }
    FreeIoBuffer(data, size);
  }

  const size_t keep_;
  const uint64_t max_bytes_, keep_bytes_;
  mutable std::mutex mu_;  // guards idle_ and idle_bytes_
  std::vector<Idle> idle_;
  uint64_t idle_bytes_ = 0;
};

}  // namespace spillway
