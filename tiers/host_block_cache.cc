// HostBlockCache: size-classed free lists of host blocks, bounded by the host
// tiers' capacity. See host_block_cache.h.
#include "tiers/host_block_cache.h"

#include <algorithm>
#include <bit>
#include <cstdlib>

#include "base/align.h"
#include "tiers/blob.h"

namespace spillway {

HostBlockCache::HostBlockCache(uint64_t limit_bytes, std::function<uint64_t()> used)
    : limit_(limit_bytes), used_(std::move(used)) {}

HostBlockCache::~HostBlockCache() { Detach(); }

uint64_t HostBlockCache::ClassBytes(uint64_t bytes) {
  constexpr uint64_t kPage = 4096;
  const uint64_t top = std::bit_floor(bytes);
  const uint64_t step = std::max(kPage, top / 8);
  return AlignUp(bytes, step);
}

std::byte* HostBlockCache::AllocateBlock(uint64_t class_bytes) {
  if (class_bytes >= Blob::kHugePageMinBytes) {
    return Blob::AllocateLargeHost(class_bytes, Blob::ObjectHugePages().enabled);
  }
  return static_cast<std::byte*>(std::aligned_alloc(64, class_bytes));
}

void HostBlockCache::FreeBlock(std::byte* p, uint64_t class_bytes) {
  if (class_bytes >= Blob::kHugePageMinBytes) {
    Blob::FreeLargeHost(p, class_bytes);
  } else {
    std::free(p);
  }
}

std::byte* HostBlockCache::Allocate(uint64_t bytes) {
  if (!Serves(bytes)) return Blob::AllocateHost(bytes);
  const uint64_t cls = ClassBytes(bytes);
  std::vector<Block> drop;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      std::byte* p = it->second.back();
      it->second.pop_back();
      cached_ -= cls;
      ++hits_;
      return p;
    }
    ++misses_;
    // New memory is about to be touched: what is kept of other sizes makes
    // room first where the tiers' footprint would pass the limit.
    if (cached_ > 0 && !detached_) drop = TrimLocked(used_(), cls);
  }
  for (const Block& b : drop) FreeBlock(b.p, b.class_bytes);
  return AllocateBlock(cls);
}

void HostBlockCache::Free(std::byte* p, uint64_t bytes) {
  if (p == nullptr) return;
  if (!Serves(bytes)) {
    Blob::FreeHost(p, bytes);
    return;
  }
  const uint64_t cls = ClassBytes(bytes);
  {
    std::lock_guard<std::mutex> l(mu_);
    // A block freed by a tier is still in its used bytes (the Blob settles
    // its account right after freeing its memory), so keeping it replaces
    // its share of `used`: cached_ + cls + (used - cls) <= limit. A block
    // no tier counted (a read not promoted) may overshoot by itself.
    if (!detached_ && cached_ + used_() <= limit_) {
      free_[cls].push_back(p);
      cached_ += cls;
      return;
    }
    ++dropped_;
  }
  FreeBlock(p, cls);
}

std::vector<HostBlockCache::Block> HostBlockCache::TrimLocked(uint64_t used, uint64_t keep_class) {
  std::vector<Block> out;
  for (auto it = free_.rbegin(); it != free_.rend() && cached_ + used > limit_; ++it) {
    if (it->first == keep_class) continue;
    while (!it->second.empty() && cached_ + used > limit_) {
      out.push_back({it->second.back(), it->first});
      it->second.pop_back();
      cached_ -= it->first;
      ++dropped_;
    }
  }
  return out;
}

void HostBlockCache::Trim() {
  std::vector<Block> drop;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (cached_ == 0 || detached_) return;
    drop = TrimLocked(used_(), 0);
  }
  for (const Block& b : drop) FreeBlock(b.p, b.class_bytes);
}

void HostBlockCache::ReleaseCached() {
  std::map<uint64_t, std::vector<std::byte*>> all;
  {
    std::lock_guard<std::mutex> l(mu_);
    all.swap(free_);
    for (const auto& [cls, blocks] : all) dropped_ += blocks.size();
    cached_ = 0;
  }
  for (const auto& [cls, blocks] : all) {
    for (std::byte* p : blocks) FreeBlock(p, cls);
  }
}

void HostBlockCache::Detach() {
  {
    std::lock_guard<std::mutex> l(mu_);
    detached_ = true;
  }
  ReleaseCached();
}

HostBlockCacheStats HostBlockCache::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return {cached_, hits_, misses_, dropped_};
}

}  // namespace spillway
