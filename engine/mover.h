// Mover: keeps tiers under their high watermark by running demotion batches
// (Demoter) in the background, several per boundary at once, so the tier
// below always has the next batch queued while one commits. How much moves
// and in what pieces is the DemotionPolicy's; which objects, the
// EvictionPolicy's; the move itself, the Demoter's. Batches run on an
// injected Scheduler, so a test can step them by hand.
//
// Pipelining: each boundary (tier t -> below) has up to MaxInflight batches
// in flight. A batch's completion, on its own task, settles the counters,
// wakes callers waiting for room and starts the next batch of its boundary
// and of the boundary below (whose tier just received bytes). Boundaries
// run independently, so gpu -> host overlaps host -> file.
//
// External objects (Engine::PutExternal): a batch's moves of them
// (Demoter::SplitExternal) run on the mover's one materializer thread, which
// calls their Materialize (Python's GIL) and stores and commits them; the
// batch counts as in flight until they are done (so WaitIdle, Flush and Stop
// wait for them, and the policy does not pick their bytes twice), but no
// scheduler thread waits for the GIL: the batch's other moves, other batches
// and other boundaries go on.
//
// Backpressure: a caller that finds a tier full waits (WaitForRoom) only
// until its own reservation fits, re-trying after every batch completion,
// never for a whole pass. Without a background scheduler the caller demotes
// what it needs on its own thread (counted as a sync demotion).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/demoter.h"
#include "engine/demotion_policy.h"
#include "engine/move_host.h"
#include "base/thread_pool.h"

namespace spillway {
class Scheduler;
}

namespace spillway::internal {

class Mover {
 public:
  // `scheduler` may be null (no background work: every demotion runs on a
  // caller's thread). None is owned; each must outlive the mover.
  Mover(MoveHost* host, Demoter* demoter, Scheduler* scheduler);
  ~Mover();  // Stop()

  // Starts the periodic tick (every 100 ms: device headroom, tiers filled by
  // promotions) when the scheduler runs in the background.
  void Start();
  // Starts no new batch, stops the tick and waits for the batches in flight
  // (a manual scheduler's queued batches are run here).
  void Stop();
  // Starts batches wherever the policy wants some (cheap when none does).
  void Wake();
  // Wake for a caller that has just put bytes into a tier above its high
  // watermark, which happens on every Put while a spill runs: the same,
  // except that it never waits for the mover's lock. A thread holding it is
  // starting batches or is about to (a batch's completion, the tick, a
  // waiting caller); if it does not cover this caller's bytes, the next
  // Put's nudge, the next completion or the tick (100 ms) does. Waiting
  // here put every small Put behind another thread's pick of a whole batch
  // (2,048 victims for 4 KiB objects).
  void Nudge();
  // Nudge for a caller that has just put bytes into tier t, when the
  // policy has a batch to start: the tier is above its high watermark, or
  // a sustained spill (DemotionPolicy::Want) has a whole batch above its
  // floor. Cheap otherwise (two loads).
  void NudgeIfDue(int t);
  // Measures every boundary's pressure now (MoveHost::Pressure), as the
  // next tick would, and starts batches for it: what the last measure asked
  // for and no batch has picked yet is dropped, not served. For a changed
  // process memory limit.
  void Remeasure();

  // Reserves `bytes` in tier t, making room if needed: true when reserved.
  // Background: waits for the mover until the reservation fits, or gives up
  // after a second in which nothing moved or was freed from tier t down (all
  // pinned, nothing below has room), ten seconds while batches from tier t
  // down are still running. Otherwise demotes on the caller's thread. Never
  // waits for a whole batch to be re-started: every completion re-tries the
  // reservation.
  // A read's wait (a Prefetch, a promotion to a gpu tier) leaves the
  // boundary as it was; a write's makes it sustained for
  // DemotionPolicy::kSustainFor (a spill is going on).
  enum class RoomFor { kWrite, kRead };
  bool MakeRoom(int t, uint64_t bytes, RoomFor purpose = RoomFor::kWrite);
  // Reserves `bytes` in tier t for a promotion if it has room now. With a
  // scheduler, never demotes: a full tier gets a RequestRoom and the read is
  // served unpromoted. Without one (background_mover off) every demotion
  // runs on a caller's thread, so this one does too (MakeRoom).
  bool ReserveForPromotion(int t, uint64_t bytes);
  // Asks for `bytes` of free room in tier t ahead of need (promotion,
  // a boundary above that found t full) and returns at once.
  void RequestRoom(int t, uint64_t bytes);
  // Moves `bytes` out of tier t, beyond its watermarks. With `wait`, waits
  // until batches from it have moved that much (the batches already in
  // flight count), or it has nothing more that can move, or nothing moved
  // for the waits of MakeRoom, and returns whether that much moved; the
  // caller's thread only waits: the batches run on the scheduler (without a
  // background one, on this thread). Without `wait`, starts the batches and
  // returns false at once (a background scheduler; none: as with `wait`).
  // For EngineCore::RelieveMemory.
  bool Shed(int t, uint64_t bytes, bool wait);

  // WaitIdle contract: returns once no batch is queued or running and no
  // tier is above its high watermark, or every boundary still above it has
  // just completed a batch that moved nothing (its objects are pinned or
  // the tiers below are full). Every move started before the call has
  // committed or aborted when it returns. With a manual scheduler, the
  // queued batches run on the caller's thread; with none, the caller runs
  // the batches itself. A sustained spill (DemotionPolicy::Want) ends here:
  // batches in flight finish, and no new one starts below the watermarks
  // until a writer waits for room again.
  void WaitIdle();

  // For tests and stats: one boundary's state.
  struct BoundaryState {
    int inflight_batches = 0;
    uint64_t inflight_bytes = 0;
    uint64_t waiting_bytes = 0;
    uint64_t requested_bytes = 0;
    uint64_t batches_started = 0;
    uint64_t batches_done = 0;
    int max_inflight_seen = 0;
    bool stuck = false;  // the last batch moved nothing; retried on Wake or the tick
    // Nanoseconds since the mover was made with no batch of this boundary
    // queued or running (TierStats::demotion_idle_ns).
    uint64_t idle_ns = 0;
  };
  BoundaryState state(int t);

 private:
  struct Boundary : BoundaryState {
    uint64_t pressure_bytes = 0;
    uint64_t moved_bytes = 0;  // by all completed batches
    // When inflight_batches last became 0 (idle_ns counts up to it).
    std::chrono::steady_clock::time_point idle_since = std::chrono::steady_clock::now();
    // When a writer last waited for room in this tier (MakeRoom, at the
    // start and the end of its wait): the boundary is sustained for
    // DemotionPolicy::kSustainFor after it.
    bool waited = false;
    std::chrono::steady_clock::time_point last_wait;
  };
  // REQUIRES: mu_. A value that changes whenever bytes move or are freed in
  // tier t or below (MakeRoom's measure of progress).
  uint64_t ProgressLocked(int t) const;
  // REQUIRES: mu_. Whether a batch of boundary t or one below is running.
  bool InflightLocked(int t) const;
  // REQUIRES: mu_. For a caller waiting on tier t (MakeRoom, Shed): true
  // once nothing moved or was freed from t down for kNoProgressWait, or
  // kInflightWait while batches from t down are running. `seen` and
  // `progressed` are the caller's last ProgressLocked value and its time.
  bool StalledLocked(int t, uint64_t* seen, std::chrono::steady_clock::time_point* progressed) const;
  // REQUIRES: mu_. Starts batches of boundary t while the policy wants some.
  void KickLocked(int t);
  // REQUIRES: mu_. Clears every boundary's stuck mark and kicks it (Wake, Nudge).
  void RetryAllLocked();
  // MoveHost::Pressure for every boundary; outside mu_ (asking the
  // driver for free device memory).
  std::vector<uint64_t> MeasurePressure();
  // REQUIRES: mu_. Sets the boundaries' pressure to `pressure` and kicks them.
  void ApplyPressureLocked(const std::vector<uint64_t>& pressure);
  void RunBatch(int t, uint64_t picked, std::shared_ptr<DemotionBatch> batch);
  // A batch's bookkeeping once all its moves committed or aborted.
  void FinishBatch(int t, uint64_t picked, const Demoter::Result& r);
  bool IdleLocked();
  void Tick();

  MoveHost* host_;
  Demoter* demoter_;
  Scheduler* scheduler_;
  DemotionPolicy policy_;
  std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;  // a batch finished (room, idleness) or stop
  std::vector<Boundary> bounds_;
  // Per tier, DemotionPolicy::NudgeAbove as of its boundary's last kick
  // (UINT64_MAX: only the high watermark nudges). Read without mu_ by
  // NudgeIfDue.
  std::unique_ptr<std::atomic<uint64_t>[]> nudge_above_;
  bool stopping_ = false;
  bool tick_stop_ = false;
  std::condition_variable tick_cv_;
  std::thread tick_;
  // The materializer thread (external objects), started with the first one.
  std::unique_ptr<ThreadPool> materializer_;
};

}  // namespace spillway::internal
