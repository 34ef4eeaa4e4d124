// PinnedHostAllocator: slabs pinned in the background, best-fit inside them.
#include "tiers/pinned_pool.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iterator>

#include "base/align.h"
#include "base/cuda_runtime.h"

namespace spillway {
namespace {

constexpr uint64_t kHugePage = 2ull << 20;

}  // namespace

PinnedHostAllocator::PinnedHostAllocator(PinnedPoolOptions options)
    : options_(std::move(options)),
      grow_ahead_(options_.grow_ahead_bytes ? options_.grow_ahead_bytes : 2 * options_.slab_bytes) {
  if (options_.capacity_bytes > 0 && options_.slab_bytes > 0) {
    grower_ = std::thread([this] { GrowLoop(); });
  }
}

PinnedHostAllocator::~PinnedHostAllocator() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  grow_cv_.notify_all();
  if (grower_.joinable()) grower_.join();
  for (auto& [addr, slab] : slabs_) DropSlab(slab);
}

bool PinnedHostAllocator::pinned() const {
  if (options_.backing != PinnedPoolOptions::Backing::kPinned) return false;
  std::lock_guard<std::mutex> l(mu_);
  return !failed_;
}

uint64_t PinnedHostAllocator::NextSlabBytesLocked() const {
  if (failed_ || stop_ || total_ >= options_.capacity_bytes) return 0;
  const bool need = total_ < options_.initial_bytes || free_ < grow_ahead_ || big_request_ > 0 ||
                    (wanted_free_ > 0 && free_ < wanted_free_);
  if (!need) return 0;
  uint64_t size = options_.slab_bytes;
  if (big_request_ > size) size = AlignUp(big_request_, kHugePage);
  if (wanted_free_ > free_) size = std::max(size, std::min<uint64_t>(wanted_free_ - free_, 4 * options_.slab_bytes));
  return std::min(size, options_.capacity_bytes - total_);
}

StatusOr<std::byte*> PinnedHostAllocator::MakeSlab(uint64_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return Status::FromErrno(errno, "mmap of a " + std::to_string(bytes) + "-byte host slab");
#ifdef MADV_HUGEPAGE
  madvise(p, bytes, MADV_HUGEPAGE);  // fewer pages to pin; a hint only
#endif
  if (options_.backing == PinnedPoolOptions::Backing::kPinned) {
    Status st = cuda::HostRegister(p, bytes);
    if (!st.ok()) {
      munmap(p, bytes);
      return st;
    }
  }
  return static_cast<std::byte*>(p);
}

void PinnedHostAllocator::DropSlab(const Slab& s) {
  if (options_.backing == PinnedPoolOptions::Backing::kPinned) (void)cuda::HostUnregister(s.base);
  munmap(s.base, s.size);
}

void PinnedHostAllocator::GrowLoop() {
  std::unique_lock<std::mutex> l(mu_);
  if (options_.backing == PinnedPoolOptions::Backing::kPinned) {
    l.unlock();
    Status st = cuda::CheckDevice(options_.device);  // the context registration needs
    l.lock();
    if (!st.ok()) {
      failed_ = true;
      last_error_ = "page-locking unavailable: " + st.ToString();
      done_cv_.notify_all();
    }
  }
  while (!stop_) {
    const uint64_t want = NextSlabBytesLocked();
    if (want == 0) {
      grow_cv_.wait(l);
      continue;
    }
    const uint64_t big = big_request_;
    l.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    auto slab = MakeSlab(want);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    l.lock();
    if (big_request_ == big) big_request_ = 0;
    if (!slab.ok()) {
      failed_ = true;
      last_error_ = slab.status().ToString();
      done_cv_.notify_all();
      continue;
    }
    pin_seconds_ += secs;
    std::byte* base = *slab;
    const uintptr_t a = reinterpret_cast<uintptr_t>(base);
    slabs_.emplace(a, Slab{base, want});
    total_ += want;
    InsertFreeLocked(a, want);
    done_cv_.notify_all();
  }
}

const PinnedHostAllocator::Slab* PinnedHostAllocator::SlabOfLocked(uintptr_t addr) const {
  auto it = slabs_.upper_bound(addr);
  if (it == slabs_.begin()) return nullptr;
  --it;
  const Slab& s = it->second;
  return addr < it->first + s.size ? &s : nullptr;
}

// Adds [addr, addr+len) to the free lists, merging with free neighbours in
// the same slab.
void PinnedHostAllocator::InsertFreeLocked(uintptr_t addr, uint64_t len) {
  const Slab* slab = SlabOfLocked(addr);
  const uintptr_t lo = reinterpret_cast<uintptr_t>(slab->base);
  const uintptr_t hi = lo + slab->size;
  free_ += len;
  auto next = free_by_addr_.lower_bound(addr);
  if (next != free_by_addr_.end() && next->first == addr + len && next->first < hi) {
    len += next->second;
    free_by_size_.erase({next->second, next->first});
    next = free_by_addr_.erase(next);
  }
  if (next != free_by_addr_.begin()) {
    auto prev = std::prev(next);
    if (prev->first >= lo && prev->first + prev->second == addr) {
      free_by_size_.erase({prev->second, prev->first});
      addr = prev->first;
      len += prev->second;
      free_by_addr_.erase(prev);
    }
  }
  free_by_addr_.emplace(addr, len);
  free_by_size_.emplace(len, addr);
}

std::byte* PinnedHostAllocator::TryAllocatePinned(uint64_t bytes) {
  const uint64_t n = RoundUp(bytes);
  bool wake = false;
  std::byte* out = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = free_by_size_.lower_bound({n, 0});
    if (it == free_by_size_.end()) {
      big_request_ = std::max(big_request_, n);  // no range fits: the next slab must
      wake = !failed_;
    } else {
      const uint64_t len = it->first;
      const uintptr_t a = it->second;
      free_by_size_.erase(it);
      free_by_addr_.erase(a);
      if (len > n) {
        free_by_addr_.emplace(a + n, len - n);
        free_by_size_.emplace(len - n, a + n);
      }
      free_ -= n;
      out = reinterpret_cast<std::byte*>(a);
      wake = free_ < grow_ahead_ && total_ < options_.capacity_bytes && !failed_;
    }
  }
  if (wake) grow_cv_.notify_one();
  return out;
}

std::byte* PinnedHostAllocator::Allocate(uint64_t bytes) {
  if (std::byte* p = TryAllocatePinned(bytes)) return p;
  if (!options_.fallback_to_malloc) return nullptr;
  const size_t n = (std::max<uint64_t>(bytes, 1) + 63) & ~uint64_t{63};
  auto* p = static_cast<std::byte*>(std::aligned_alloc(64, n));
  if (p) {
    std::lock_guard<std::mutex> l(mu_);
    fallback_allocs_++;
    fallback_bytes_ += bytes;
  }
  return p;
}

void PinnedHostAllocator::Free(std::byte* p, uint64_t bytes) {
  if (p == nullptr) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  {
    std::lock_guard<std::mutex> l(mu_);
    if (SlabOfLocked(a) != nullptr) {
      InsertFreeLocked(a, RoundUp(bytes));
      return;
    }
  }
  std::free(p);
}

bool PinnedHostAllocator::IsFromPool(const void* p) const {
  std::lock_guard<std::mutex> l(mu_);
  return SlabOfLocked(reinterpret_cast<uintptr_t>(p)) != nullptr;
}

Status PinnedHostAllocator::WaitForFree(uint64_t free_bytes, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> l(mu_);
  if (free_bytes > options_.capacity_bytes) {
    return Status::NoSpace("pinned pool capacity is " + std::to_string(options_.capacity_bytes) + " bytes");
  }
  wanted_free_ = std::max(wanted_free_, free_bytes);
  grow_cv_.notify_one();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Counts free bytes in total, not the largest free range: callers warm up
  // for many allocations.
  while (free_ < free_bytes && !failed_ && total_ < options_.capacity_bytes) {
    if (done_cv_.wait_until(l, deadline) == std::cv_status::timeout) break;
  }
  wanted_free_ = 0;
  if (free_ >= free_bytes) return Status::OK();
  if (failed_) return Status::NotSupported(last_error_);
  if (total_ >= options_.capacity_bytes) return Status::NoSpace("pinned pool is at its capacity");
  return Status::Busy("pinned pool still growing");
}

PinnedPoolStats PinnedHostAllocator::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  PinnedPoolStats s;
  s.capacity_bytes = options_.capacity_bytes;
  s.slab_bytes = total_;
  s.slabs = slabs_.size();
  s.free_bytes = free_;
  s.allocated_bytes = total_ - free_;
  s.fallback_allocations = fallback_allocs_;
  s.fallback_bytes = fallback_bytes_;
  s.pin_seconds = pin_seconds_;
  s.pinning_failed = failed_;
  s.last_error = last_error_;
  return s;
}

}  // namespace spillway
