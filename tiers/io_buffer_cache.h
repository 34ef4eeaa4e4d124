// Aligned I/O buffers for a file tier: AllocIoBuffer / IoBuffer (memory an
// O_DIRECT request may use), and IoBufferCache, the buffers a tier's threads
// encode slabs into and read records through, shared by the tier instead of
// kept per thread.
//
// A fresh 9 MiB slab buffer costs its page faults every time (about 2300),
// so buffers are reused; but a buffer kept by every thread that ever wrote
// or read stays resident for the process's life: 12 writer threads and each
// reading thread's 16 MiB ring came to 66 MiB left resident with no object
// stored (measured, session 6), memory a Dask worker's limit counts. The
// cache keeps at most `keep` idle buffers; Release() frees those too (under
// process memory pressure).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <vector>

#include "spillway/file_io.h"

namespace spillway {

// `bytes` (at least one kIoAlign block, rounded up to whole blocks) of
// kIoAlign-aligned memory; null when out of memory. Free with std::free.
inline std::byte* AllocIoBuffer(uint64_t bytes) {
  const uint64_t n = (std::max<uint64_t>(bytes, 1) + kIoAlign - 1) / kIoAlign * kIoAlign;
  return static_cast<std::byte*>(std::aligned_alloc(kIoAlign, n));
}
struct IoBufferFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using IoBuffer = std::unique_ptr<std::byte, IoBufferFree>;

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

  // `keep`: idle buffers kept at most; `max_bytes`: larger requests are
  // allocated and freed each time, never kept.
  IoBufferCache(size_t keep, uint64_t max_bytes) : keep_(keep), max_bytes_(max_bytes) {}
  ~IoBufferCache() { Release(); }
  IoBufferCache(const IoBufferCache&) = delete;
  IoBufferCache& operator=(const IoBufferCache&) = delete;

  // At least `bytes`, kIoAlign-aligned (an idle buffer large enough, or a
  // new one rounded up to 1 MiB); get() is null when memory runs out.
  Lease Take(uint64_t bytes) {
    Lease l;
    l.cache_ = this;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (size_t i = 0; i < idle_.size(); ++i) {
        if (idle_[i].size >= bytes) {
          l.data_ = idle_[i].data, l.size_ = idle_[i].size;
          idle_[i] = idle_.back();
          idle_.pop_back();
          return l;
        }
      }
    }
    l.size_ = bytes <= max_bytes_ ? std::min(RoundUp(bytes, 1ull << 20), max_bytes_) : bytes;
    l.data_ = AllocIoBuffer(l.size_);
    return l;
  }

  // Frees every idle buffer (buffers in use come back as usual).
  void Release() {
    std::vector<Idle> drop;
    {
      std::lock_guard<std::mutex> g(mu_);
      drop.swap(idle_);
    }
    for (const Idle& b : drop) std::free(b.data);
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
  static uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

  void Give(std::byte* data, uint64_t size) {
    if (size <= max_bytes_) {
      std::lock_guard<std::mutex> g(mu_);
      if (idle_.size() < keep_) {
        idle_.push_back({data, size});
        return;
      }
      // Full: keep the larger buffer (it serves more requests).
      auto smallest = std::min_element(idle_.begin(), idle_.end(),
                                       [](const Idle& a, const Idle& b) { return a.size < b.size; });
      if (smallest != idle_.end() && smallest->size < size) std::swap(smallest->data, data), std::swap(smallest->size, size);
    }
    std::free(data);
  }

  const size_t keep_;
  const uint64_t max_bytes_;
  mutable std::mutex mu_;  // guards idle_
  std::vector<Idle> idle_;
};

}  // namespace spillway
