// MemoryGovernor: keeps this process's resident memory under the limit of
// Engine::SetProcessMemoryLimit by having the mover demote out of the host
// tiers that yield to it (include/spillway/engine.h states the contract).
// It measures and decides; the Mover moves.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "tiers/tier.h"

namespace spillway::internal {

class Mover;

class MemoryGovernor {
 public:
  // The limit set, 0 when none: callable before Attach.
  uint64_t limit() const { return limit_.load(std::memory_order_relaxed); }
  // The resident bytes above the limit at the last measure (0 when none is
  // set).
  uint64_t excess() const { return excess_.load(std::memory_order_relaxed); }

  // Once, while the engine opens, before any call below: the chain (fastest
  // first), for each tier whether the pinned pool serves it, and the mover
  // that demotes. None is owned; all must outlive the governor.
  void Attach(std::vector<Tier*> chain, const std::vector<bool>& in_pinned_pool, Mover* mover);

  // Engine::SetProcessMemoryLimit.
  void SetLimit(uint64_t bytes);
  // Engine::RelieveMemory.
  bool Relieve(uint64_t incoming_bytes, bool wait);
  // The host tier t's share of MoveHost::Pressure: the resident bytes above
  // the limit, at most what the tier holds; 0 for a tier that does not
  // yield.
  uint64_t Pressure(int t);

 private:
  // The yielding host tiers' TierCounters::admitted_raw_bytes and
  // freed_raw_bytes, summed.
  struct HostTurnover {
    uint64_t admitted = 0, freed = 0;
  };
  // Whether tier i demotes for process memory: a host tier over one that
  // stores bytes, outside the pinned pool.
  bool Yields(size_t i) const { return yields_[i]; }
  // This process's resident bytes. While they are above `limit`: at most
  // once a second, measured again after releasing cached memory and
  // trimming the heap; in between, at most once a tick, after trimming the
  // heap when FreedInHeap is 1 MiB or more. Records the excess over the
  // limit set, for Stats.
  uint64_t ResidentBytes(uint64_t limit);
  // Trims the heap and takes the snapshot FreedInHeap counts from.
  void TrimFreedHeap();
  // An estimate of the objects the yielding host tiers freed since the last
  // trim that still sit in the heap, the resident set being `rss`.
  uint64_t FreedInHeap(uint64_t rss) const;
  HostTurnover YieldingTurnover() const;
  // Frees what the tiers keep only to go faster (Tier::ReleaseCachedMemory:
  // idle I/O buffers, the host block cache's blocks) and hands freed heap
  // memory back to the kernel.
  void ReleaseIdleMemory();

  std::vector<Tier*> chain_;
  std::vector<bool> yields_;
  Mover* mover_ = nullptr;
  // The limit set, and the excess last measured.
  std::atomic<uint64_t> limit_{0}, excess_{0};
  // When the heap was last trimmed with (ReleaseIdleMemory) and without
  // (TrimFreedHeap) the tiers' cached memory, steady_clock nanoseconds.
  std::atomic<int64_t> last_heap_trim_ns_{0}, last_freed_trim_ns_{0};
  // YieldingTurnover and the resident set at the last TrimFreedHeap.
  std::atomic<uint64_t> admitted_at_trim_{0}, freed_at_trim_{0}, resident_at_trim_{0};
};

}  // namespace spillway::internal
