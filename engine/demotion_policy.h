// DemotionPolicy: decides how many bytes leave a tier and when, and in what
// pieces (CacheLib's FreeThresholdStrategy). Pure decisions over a tier's
// state: it moves nothing (the Mover and Demoter act) and picks no victims
// (EvictionPolicy does: which objects, least recently used first).
#pragma once

#include <chrono>
#include <cstdint>

#include "tiers/tier.h"

namespace spillway::internal {

// What is already under way at one boundary (tier t -> the tiers below).
struct BoundaryLoad {
  uint64_t inflight_bytes = 0;  // raw bytes of batches started and not yet finished
  uint64_t waiting_bytes = 0;   // bytes callers wait to reserve in the tier (backpressure)
  uint64_t requested_bytes = 0; // room asked for ahead of need (promotions, a boundary above)
  uint64_t pressure_bytes = 0;  // device memory taken outside the engine (gpu headroom)
  // A writer (a Put, not a read's promotion) waited for room in the tier
  // within the last kSustainFor: a spill is going on (DemotionPolicy::Want).
  bool sustained = false;
};

class DemotionPolicy {
 public:
  // Raw bytes to start moving out of `from` (into `to` first) now: nothing until the tier is
  // above its high watermark (or someone waits or asks for room); then down
  // to the low watermark and at least MinBatchBytes where the tier holds
  // that much (so the tier below receives large writes, not one small batch
  // per watermark crossing), plus what waiters need beyond the free space,
  // less what batches in flight will free anyway.
  // The fill it judges is the projected one, used plus what waiters are
  // about to reserve, so the next batch starts while a caller copies its
  // object in, not after. While callers wait (the tier below is the
  // bottleneck), at least MaxInflight batches are wanted, so the disk queue
  // stays full until nobody waits, but no more than WaitingBatchBytes
  // beyond what the waiters need: in a small tier, MaxInflight batches
  // would be the whole tier, and one waiting caller would empty it.
  // While a spill goes on (load.sustained), batches also start whenever
  // the part of the tier not already moving holds a whole batch above
  // SustainedFloorBytes: the pipeline stays full between watermark
  // crossings instead of draining to the low watermark and idling while
  // the caller refills the band up to high: with a disk faster than one Put
  // thread, that gap left the disk idle for part of a small-object spill
  // (docs/performance.md, "Tuning constants").
  uint64_t Want(const Tier& from, const Tier& to, const BoundaryLoad& load) const;
  // Raw bytes per batch from `from` to `to` (the first tier below): one
  // batch into a file tier fills one write slab (8 MiB: io.block_bytes
  // requests at the tier's queue depth); memory destinations take larger
  // batches (gathered device copies). Never more than capacity / 8, so
  // several batches fit between the watermarks. An object larger than a
  // batch is a batch of its own.
  uint64_t BatchBytes(const Tier& from, const Tier& to) const;
  // Batches in flight at once per boundary: enough that one is on the disk
  // while another is encoded and a third commits (4 x 8 x 1 MiB requests is
  // fio's QD32); 2 into memory tiers (copies, no queue to keep full).
  int MaxInflight(const Tier& to) const;
  // MaxInflight for what `load` asks of `from` now: one batch when only
  // pressure asks (the process memory limit, a gpu tier's headroom: the tier
  // is below its high watermark and nobody waits or asks for room). Each
  // batch into a file tier writes through a slab buffer of its own (10 MiB
  // for an 8 MiB batch), resident memory the limit counts: eight at once
  // for a small excess raised the resident set by more than they moved,
  // and the next measure demoted for that (docs/performance.md, "Tuning
  // constants").
  int MaxInflight(const Tier& from, const Tier& to, const BoundaryLoad& load) const;
  // min(64 MiB, capacity / 4): the least a watermark crossing demotes.
  static uint64_t MinBatchBytes(const Tier& tier);
  // min(64 MiB, capacity / 2): what stays in flight, at least, while
  // callers wait for room. Half a small tier (below 256 MiB), not a
  // quarter: a quarter kept too little in flight to keep the disk busy
  // (docs/performance.md, "Tuning constants").
  static uint64_t WaitingBatchBytes(const Tier& tier);
  // low - WaitingBatchBytes: how far a sustained spill empties the tier
  // (a quarter of a tier below 256 MiB, 64 MiB below low above it). The
  // cost: a spill that stops leaves the tier this low, not at low.
  static uint64_t SustainedFloorBytes(const Tier& tier);
  // For a caller that has just put bytes into `from`: the used bytes above
  // which Want has a batch to start although the tier is below its high
  // watermark (a sustained spill); no limit (UINT64_MAX) otherwise.
  uint64_t NudgeAbove(const Tier& from, const Tier& to, const BoundaryLoad& load) const;
  // How long after a caller's wait for room a boundary counts as sustained.
  static constexpr std::chrono::milliseconds kSustainFor{1000};
  // Raw bytes a caller demotes on its own thread (engines without a
  // background scheduler) to reserve `need` bytes: what it needs, and at
  // least one batch, so the tier below still receives large writes.
  uint64_t SyncBytes(const Tier& from, const Tier& to, uint64_t need) const;
  // Batches in flight into a file tier (MaxInflight); a thread scheduler
  // with this many threads per boundary can run every boundary's batches at
  // once. 8 with the file tier's 2 MiB streamed pieces
  // (docs/performance.md, "Tuning constants").
  static constexpr int kMaxInflightPerBoundary = 8;
};

}  // namespace spillway::internal
