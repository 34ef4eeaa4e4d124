// MemoryGovernor: a host tier that yields to the process's resident memory
// (include/spillway/engine.h: SetProcessMemoryLimit, RelieveMemory).
//
// The mover's tick (engine/mover.cc) asks Pressure(t) every 100 ms; a host
// tier's share is this process's resident memory above the limit, at most
// what the tier holds. The mover demotes that much beyond the watermarks
// (DemotionPolicy::Want: BoundaryLoad::pressure_bytes), less what is already
// in flight, so it does not demote twice for memory still being released.
//
// Objects a host tier frees go back to the C library's heap, where they
// stay resident until the heap is trimmed; releasing cached memory (and
// trimming) at most once a second, each 100 ms tick saw the same excess
// again and demoted it again (tests/engine/process_memory_test.cc checks
// that a small excess is demoted once). So while above the limit, when objects freed since the last trim may
// still be in the heap (FreedInHeap), the heap is trimmed first, at most
// once a tick. The I/O buffers a demotion writes through count as what they
// are, resident memory: the first demotion under a limit moves the excess
// and the buffer's size (kept for the next one).
//
// That tick lags: between two ticks a Dask task reads its inputs back and
// builds its output, and the resident set peaked above that of Dask's own
// store (docs/performance.md, "Tuning constants"). RelieveMemory is the synchronous
// check Dask's SpillBuffer makes in __setitem__: the store calls it after a
// value arrives and before it reads one back, and it waits for the mover
// (Mover::Shed) until the process fits again, or (wait false) only starts
// the demotions at once. The waiting thread never demotes or writes itself
// while a background scheduler runs.
#include "engine/memory_governor.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "base/process_memory.h"
#include "engine/mover.h"
#include "tiers/small_block_pool.h"

namespace spillway::internal {

namespace {
// Freed heap memory is handed back at most this often while above the
// limit: malloc_trim walks the heap.
constexpr auto kTrimInterval = std::chrono::seconds(1);
// In between, the heap alone is trimmed when at least kFreedTrimBytes of
// objects freed since the last trim may still sit in it, at most every
// kFreedTrimInterval (the mover's tick).
constexpr uint64_t kFreedTrimBytes = 1ull << 20;
constexpr auto kFreedTrimInterval = std::chrono::milliseconds(100);

// True for one caller once `interval` has passed since `*last_ns` (which it
// then sets to `now_ns`): the others see it moved, or lose the exchange.
bool TakeTurn(std::atomic<int64_t>* last_ns, int64_t now_ns, std::chrono::nanoseconds interval) {
  int64_t last = last_ns->load(std::memory_order_relaxed);
  return now_ns - last >= interval.count() && last_ns->compare_exchange_strong(last, now_ns, std::memory_order_relaxed);
}
}  // namespace

void MemoryGovernor::Attach(std::vector<Tier*> chain, const std::vector<bool>& in_pinned_pool, Mover* mover) {
  chain_ = std::move(chain);
  mover_ = mover;
  yields_.assign(chain_.size(), false);
  for (size_t i = 0; i < chain_.size(); ++i) {
    // Only a host tier over one that stores bytes: demoting into another
    // memory tier would leave the bytes in this process. Nor a host tier in
    // the pinned pool: its slabs stay pinned (and resident) whatever they
    // hold, so demoting from it frees nothing.
    yields_[i] = chain_[i]->kind() == TierKind::kHost && !in_pinned_pool[i] && i + 1 < chain_.size() &&
                 !chain_[i + 1]->is_memory();
  }
}

void MemoryGovernor::SetLimit(uint64_t bytes) {
  limit_.store(bytes, std::memory_order_relaxed);
  if (bytes == 0) {
    excess_.store(0, std::memory_order_relaxed);
    return;
  }
  // The host block cache keeps nothing from now on (its budget reads the
  // limit: engine_open.cc), nor does the process-wide pool of small blocks:
  // a process with a memory limit (a Dask worker) is judged by its resident
  // set.
  SmallBlockPool::SetKeeping(false);
  // What is kept now goes now (the host tiers' blocks among it), so that the
  // resident set the caller measures next is what the tiers hold, not idle
  // I/O buffers that the first check above the limit would free instead of
  // demoting.
  ReleaseIdleMemory();
  // What the last measure under the old limit asked for goes with it.
  if (mover_) mover_->Remeasure();
}

void MemoryGovernor::ReleaseIdleMemory() {
  for (Tier* each : chain_) each->ReleaseCachedMemory();
  TrimFreedHeap();
}

MemoryGovernor::HostTurnover MemoryGovernor::YieldingTurnover() const {
  HostTurnover t;
  for (size_t i = 0; i < chain_.size(); ++i) {
    if (!Yields(i)) continue;
    t.admitted += chain_[i]->counters().admitted_raw_bytes.load(std::memory_order_relaxed);
    t.freed += chain_[i]->counters().freed_raw_bytes.load(std::memory_order_relaxed);
  }
  return t;
}

uint64_t MemoryGovernor::ResidentBytes(uint64_t limit) {
  uint64_t rss = ProcessResidentBytes();
  if (rss > limit) {
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now().time_since_epoch()).count();
    if (TakeTurn(&last_heap_trim_ns_, now, kTrimInterval)) {
      // What earlier demotions freed may still sit in the allocator, and
      // the file tiers keep idle I/O buffers for reuse. Not at every check:
      // freed at once, the buffers came back at the next demotion on top of
      // a host tier that had refilled to the limit, and the peak resident
      // set rose (kTrimInterval in docs/performance.md, "Tuning constants").
      ReleaseIdleMemory();
      rss = ProcessResidentBytes();
    } else if (FreedInHeap(rss) >= kFreedTrimBytes) {
      // Objects freed since the last trim may be what keeps the process
      // above the limit: hand them back before demoting more for them.
      if (TakeTurn(&last_freed_trim_ns_, now, kFreedTrimInterval)) {
        TrimFreedHeap();
        rss = ProcessResidentBytes();
      }
    }
  }
  const uint64_t configured = limit_.load(std::memory_order_relaxed);
  excess_.store(configured != 0 && rss > configured ? rss - configured : 0, std::memory_order_relaxed);
  return rss;
}

void MemoryGovernor::TrimFreedHeap() {
  // Taken before the trim: what is freed during it counts as still in the
  // heap, so the next check trims again rather than demoting for it.
  const HostTurnover turnover = YieldingTurnover();
  admitted_at_trim_.store(turnover.admitted, std::memory_order_relaxed);
  freed_at_trim_.store(turnover.freed, std::memory_order_relaxed);
  TrimProcessHeap();
  resident_at_trim_.store(ProcessResidentBytes(), std::memory_order_relaxed);
}

uint64_t MemoryGovernor::FreedInHeap(uint64_t rss) const {
  // Freed since the last trim, less what the resident set fell by since
  // (memory unmapped at once: large allocations, the engine's own of 4 MiB
  // and more, adopted arrays their owner freed) and less what objects
  // admitted since took (the heap's freed memory is what new objects reuse
  // first). An estimate: memory outside the tiers that came or went
  // meanwhile moves it; it only decides when to trim.
  const HostTurnover turnover = YieldingTurnover();
  const uint64_t freed = turnover.freed - std::min(turnover.freed, freed_at_trim_.load(std::memory_order_relaxed));
  const uint64_t admitted =
      turnover.admitted - std::min(turnover.admitted, admitted_at_trim_.load(std::memory_order_relaxed));
  const uint64_t resident_then = resident_at_trim_.load(std::memory_order_relaxed);
  const uint64_t fell = resident_then > rss ? resident_then - rss : 0;
  const uint64_t taken = fell + admitted;
  return freed > taken ? freed - taken : 0;
}

uint64_t MemoryGovernor::Pressure(int t) {
  const uint64_t limit = limit_.load(std::memory_order_relaxed);
  if (limit == 0 || !Yields(static_cast<size_t>(t))) return 0;
  const uint64_t rss = ResidentBytes(limit);
  return rss > limit ? std::min(rss - limit, chain_[t]->used_bytes()) : 0;
}

bool MemoryGovernor::Relieve(uint64_t incoming_bytes, bool wait) {
  const uint64_t limit = limit_.load(std::memory_order_relaxed);
  if (limit == 0) return true;
  // What must go for `incoming_bytes` to fit: the resident set above
  // limit - incoming_bytes (the limit is the whole room when the incoming
  // bytes alone exceed it).
  const uint64_t room = limit > incoming_bytes ? limit - incoming_bytes : 0;
  for (size_t i = 0; i < chain_.size(); ++i) {
    if (!Yields(i)) continue;
    const uint64_t rss = ResidentBytes(room);
    if (rss <= room) return true;
    const uint64_t shed = std::min(rss - room, chain_[i]->used_bytes());
    if (shed > 0) mover_->Shed(static_cast<int>(i), shed, wait);
    if (!wait) return false;  // the next tier's share would count this one's again
  }
  return ResidentBytes(room) <= room;
}

}  // namespace spillway::internal
