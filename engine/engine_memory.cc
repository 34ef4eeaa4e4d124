// EngineCore::SetProcessMemoryLimit / MemoryPressure: a host tier that yields
// to the process's resident memory (include/spillway/engine.h).
//
// The mover's tick (engine/mover.cc) asks Pressure(t) every 100 ms; a host
// tier's share is this process's resident memory above the limit, at most
// what the tier holds. The mover demotes that much beyond the watermarks
// (DemotionPolicy::Want: BoundaryLoad::pressure_bytes), less what is already
// in flight, so it does not demote twice for memory still being released.
#include <algorithm>
#include <chrono>

#include "base/process_memory.h"
#include "engine/engine_core.h"
#include "engine/mover.h"

namespace spillway::internal {

namespace {
// Freed heap memory is handed back at most this often while above the
// limit: malloc_trim walks the heap.
constexpr auto kTrimInterval = std::chrono::seconds(1);
}  // namespace

void EngineCore::SetProcessMemoryLimit(uint64_t bytes) {
  process_memory_limit_.store(bytes, std::memory_order_relaxed);
  if (bytes == 0) process_memory_excess_.store(0, std::memory_order_relaxed);
  if (bytes != 0 && host_cache_) host_cache_->ReleaseCached();  // and keeps none from now on
  if (bytes != 0 && mover_) mover_->Wake();
}

uint64_t EngineCore::MemoryPressure(int t) {
  const uint64_t limit = process_memory_limit_.load(std::memory_order_relaxed);
  if (limit == 0) return 0;
  const size_t i = static_cast<size_t>(t);
  Tier& tier = *tiers_[i];
  // Only a host tier over one that stores bytes: demoting into another
  // memory tier would leave the bytes in this process.
  if (tier.kind() != TierKind::kHost || i + 1 >= tiers_.size() || tiers_[i + 1]->is_memory()) return 0;
  uint64_t rss = ProcessResidentBytes();
  if (rss > limit) {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
    int64_t last = last_heap_trim_ns_.load(std::memory_order_relaxed);
    if (now - last >= std::chrono::duration_cast<std::chrono::nanoseconds>(kTrimInterval).count() &&
        last_heap_trim_ns_.compare_exchange_strong(last, now, std::memory_order_relaxed)) {
      // What earlier demotions freed may still sit in the allocator, and
      // the file tiers keep idle I/O buffers for reuse.
      for (auto& each : tiers_) each->ReleaseCachedMemory();
      TrimProcessHeap();
      rss = ProcessResidentBytes();
    }
  }
  const uint64_t excess = rss > limit ? rss - limit : 0;
  process_memory_excess_.store(excess, std::memory_order_relaxed);
  return std::min(excess, tier.used_bytes());
}

}  // namespace spillway::internal
