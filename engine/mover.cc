// Mover: batches in flight per boundary, completion-driven restarts, and
// the waits of callers that need room. See mover.h.
#include "engine/mover.h"

#include <algorithm>
#include <chrono>

#include "base/scheduler.h"
#include "engine/demoter.h"

namespace spillway::internal {
namespace {
uint64_t ElapsedNanos(std::chrono::steady_clock::time_point since) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - since).count());
}
}  // namespace

Mover::Mover(MoveHost* host, Demoter* demoter, Scheduler* scheduler)
    : host_(host),
      demoter_(demoter),
      scheduler_(scheduler),
      bounds_(host->num_tiers()),
      nudge_above_(std::make_unique<std::atomic<uint64_t>[]>(bounds_.size())) {
  for (size_t t = 0; t < bounds_.size(); ++t) nudge_above_[t].store(UINT64_MAX, std::memory_order_relaxed);
}

Mover::~Mover() { Stop(); }

void Mover::Start() {
  if (scheduler_ == nullptr || !scheduler_->background()) return;
  std::lock_guard<std::mutex> l(mu_);
  if (tick_.joinable()) return;
  tick_stop_ = false;
  tick_ = std::thread([this] { Tick(); });
}

void Mover::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    tick_stop_ = true;
  }
  tick_cv_.notify_all();
  cv_.notify_all();
  if (tick_.joinable()) tick_.join();
  if (scheduler_ != nullptr && !scheduler_->background()) scheduler_->RunPending();
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] {
    for (const Boundary& b : bounds_) {
      if (b.inflight_batches > 0) return false;
    }
    return true;
  });
  // Every materializer task has finished its batch; join the thread.
  std::unique_ptr<ThreadPool> materializer = std::move(materializer_);
  l.unlock();
  materializer.reset();
}

void Mover::Tick() {
  std::unique_lock<std::mutex> l(mu_);
  while (!tick_stop_) {
    tick_cv_.wait_for(l, std::chrono::milliseconds(100), [this] { return tick_stop_; });
    if (tick_stop_) break;
    l.unlock();
    const std::vector<uint64_t> pressure = MeasurePressure();
    l.lock();
    ApplyPressureLocked(pressure);
  }
}

std::vector<uint64_t> Mover::MeasurePressure() {
  std::vector<uint64_t> pressure(bounds_.size());
  for (size_t t = 0; t + 1 < bounds_.size(); ++t) pressure[t] = host_->Pressure(static_cast<int>(t));
  return pressure;
}

void Mover::ApplyPressureLocked(const std::vector<uint64_t>& pressure) {
  for (size_t t = 0; t + 1 < bounds_.size(); ++t) {
    bounds_[t].pressure_bytes = pressure[t];
    bounds_[t].stuck = false;
    KickLocked(static_cast<int>(t));
  }
}

void Mover::Remeasure() {
  if (scheduler_ == nullptr) return;
  const std::vector<uint64_t> pressure = MeasurePressure();
  std::lock_guard<std::mutex> l(mu_);
  ApplyPressureLocked(pressure);
}

void Mover::Wake() {
  if (scheduler_ == nullptr) return;
  std::lock_guard<std::mutex> l(mu_);
  RetryAllLocked();
}

void Mover::Nudge() {
  if (scheduler_ == nullptr) return;
  std::unique_lock<std::mutex> l(mu_, std::try_to_lock);
  if (l.owns_lock()) RetryAllLocked();
}

void Mover::RetryAllLocked() {
  for (size_t t = 0; t + 1 < bounds_.size(); ++t) {
    bounds_[t].stuck = false;
    KickLocked(static_cast<int>(t));
  }
}

void Mover::KickLocked(int t) {
  if (stopping_ || scheduler_ == nullptr || static_cast<size_t>(t) + 1 >= bounds_.size()) return;
  Boundary& b = bounds_[t];
  const Tier& from = host_->tier(t);
  const Tier& to = host_->tier(t + 1);
  const bool sustained = b.waited && std::chrono::steady_clock::now() - b.last_wait < DemotionPolicy::kSustainFor;
  const auto load_now = [&] {
    return BoundaryLoad{b.inflight_bytes, b.waiting_bytes, b.requested_bytes, b.pressure_bytes, sustained};
  };
  while (!b.stuck) {
    const BoundaryLoad load = load_now();
    if (b.inflight_batches >= policy_.MaxInflight(from, to, load)) break;
    const uint64_t want = policy_.Want(from, to, load);
    if (want == 0) break;
    // Picking under the lock makes the in-flight count exact (a 64 MiB
    // object picked for an 8 MiB batch counts 64 MiB), so concurrent
    // batches never move more than the policy asked for.
    DemotionBatchPtr batch = demoter_->Pick(t, std::min(want, policy_.BatchBytes(from, to)));
    if (!batch) {
      b.stuck = true;
      break;
    }
    const uint64_t picked = Demoter::PickedBytes(*batch);
    if (b.inflight_batches == 0) b.idle_ns += ElapsedNanos(b.idle_since);
    b.inflight_batches++;
    b.inflight_bytes += picked;
    b.batches_started++;
    b.max_inflight_seen = std::max(b.max_inflight_seen, b.inflight_batches);
    b.requested_bytes -= std::min(b.requested_bytes, picked);
    b.pressure_bytes -= std::min(b.pressure_bytes, picked);
    // std::function needs a copyable callable: the batch travels as a
    // shared_ptr with the aborting deleter.
    std::shared_ptr<DemotionBatch> shared(batch.release(), DemotionBatchDeleter());
    scheduler_->Submit([this, t, picked, shared]() mutable {
      RunBatch(t, picked, std::move(shared));
    });
  }
  // With every batch the boundary may run in flight, a nudge cannot start
  // one: the next completion kicks the boundary, and the Puts meanwhile
  // do not each take the mover's lock for nothing.
  const BoundaryLoad load = load_now();
  const bool full = b.inflight_batches >= policy_.MaxInflight(from, to, load);
  nudge_above_[t].store(full ? UINT64_MAX : policy_.NudgeAbove(from, to, load), std::memory_order_relaxed);
}

void Mover::NudgeIfDue(int t) {
  const Tier& tier = host_->tier(t);
  if (tier.AboveHigh() ||
      (static_cast<size_t>(t) + 1 < bounds_.size() &&
       tier.used_bytes() > nudge_above_[t].load(std::memory_order_relaxed))) {
    Nudge();
  }
}

void Mover::RunBatch(int t, uint64_t picked, std::shared_ptr<DemotionBatch> batch) {
  // Background batches never wait for room below: a batch that finds the
  // next tier full asks that boundary for room and ends, so no scheduler
  // thread waits for another.
  // A manual scheduler (tests) runs everything on its caller's thread, the
  // external moves included, so that stepping it stays deterministic.
  DemotionBatchPtr external = scheduler_->background() ? demoter_->SplitExternal(*batch) : nullptr;
  const Demoter::Result r = demoter_->Run(t, *batch, nullptr);
  batch.reset();  // the victims' references go before waiters look again
  if (external) {
    std::shared_ptr<DemotionBatch> ext(external.release(), DemotionBatchDeleter());
    std::lock_guard<std::mutex> l(mu_);
    if (!materializer_) materializer_ = std::make_unique<ThreadPool>(1);
    materializer_->Submit([this, t, picked, r, ext]() mutable {
      Demoter::Result all = r;
      bool stopping;
      {
        std::lock_guard<std::mutex> g(mu_);
        stopping = stopping_;
      }
      if (!stopping) {  // at Stop the batch is aborted instead (its deleter)
        const Demoter::Result e = demoter_->Run(t, *ext, nullptr);
        all.moved += e.moved;
        all.raced += e.raced;
        if (all.blocked < 0) {
          all.blocked = e.blocked;
          all.blocked_bytes = e.blocked_bytes;
        } else if (all.blocked == e.blocked) {
          all.blocked_bytes += e.blocked_bytes;
        }
      }
      ext.reset();
      FinishBatch(t, picked, all);
    });
    return;
  }
  FinishBatch(t, picked, r);
}

void Mover::FinishBatch(int t, uint64_t picked, const Demoter::Result& r) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Boundary& b = bounds_[t];
    b.inflight_batches--;
    if (b.inflight_batches == 0) b.idle_since = std::chrono::steady_clock::now();
    b.inflight_bytes -= picked;
    b.batches_done++;
    b.moved_bytes += r.moved;
    // Stuck: nothing could move. A batch whose every object was erased or
    // replaced while it was copied (a Dask worker's keys churn) moved
    // nothing too, but the next pick finds other objects: were it taken for
    // stuck, a Flush waiting on it would return with the tier still above
    // its high watermark and nothing moving.
    b.stuck = r.moved == 0 && r.raced == 0;
    if (r.blocked >= 0) {
      Boundary& below = bounds_[r.blocked];
      below.requested_bytes += r.blocked_bytes;
      below.stuck = false;
      KickLocked(r.blocked);
    }
    if (r.moved > 0) {
      // The tier below received bytes; the tier above may have been waiting
      // for room here.
      KickLocked(t + 1);
      if (t > 0 && bounds_[t - 1].stuck) {
        bounds_[t - 1].stuck = false;
        KickLocked(t - 1);
      }
    }
    KickLocked(t);
    // Under the lock: once it is released, Stop may return and the mover
    // be destroyed; nothing of it may be touched after that.
    cv_.notify_all();
  }
}

namespace {
// A caller waiting for room gives up only after this long without progress
// anywhere from its tier down: no batch completed that moved bytes, and no
// tier's usage changed. Pins are often held only for a moment (concurrent
// readers, promotions in flight) and the tiers below may be draining, so
// counting wake-ups is not enough: a burst of completions elsewhere used to
// exhaust the retries while the chain below was still making room.
constexpr auto kNoProgressWait = std::chrono::milliseconds(1000);
// While batches are in flight from its tier down, the caller waits for them
// this long instead: each one completes or fails, and either wakes it. On a
// loaded machine (CI's sanitizer stages, a disk shared with other work) one
// batch can take longer than kNoProgressWait, and a Put that gave up then
// went to the tier below although room was on its way (a test counting the
// host tier's allocations saw 62 of 64 Puts there). The bound still ends
// the wait if the disk stops answering.
constexpr auto kInflightWait = std::chrono::milliseconds(10000);
}  // namespace

bool Mover::InflightLocked(int t) const {
  for (size_t d = static_cast<size_t>(t); d < bounds_.size(); ++d) {
    if (bounds_[d].inflight_batches > 0) return true;
  }
  return false;
}

bool Mover::StalledLocked(int t, uint64_t* seen, std::chrono::steady_clock::time_point* progressed) const {
  const uint64_t now_sig = ProgressLocked(t);
  const auto now = std::chrono::steady_clock::now();
  if (now_sig != *seen) {
    *seen = now_sig;
    *progressed = now;
    return false;
  }
  return now - *progressed >= (InflightLocked(t) ? kInflightWait : kNoProgressWait);
}

uint64_t Mover::ProgressLocked(int t) const {
  // Any change in these means something moved or was freed from t down.
  uint64_t sig = 0;
  for (size_t d = static_cast<size_t>(t); d < bounds_.size(); ++d) {
    sig = sig * 1000003 + bounds_[d].moved_bytes + host_->tier(static_cast<int>(d)).used_bytes();
  }
  return sig;
}

bool Mover::MakeRoom(int t, uint64_t bytes, RoomFor purpose) {
  Tier& tier = host_->tier(t);
  if (tier.TryReserve(bytes)) {
    // This reservation took the tier past its high watermark: start the
    // demotion now, while the caller copies its object in, not after its
    // insert or at the next tick (below: the same for a caller that waited).
    // The copy can be long (a large object into memory the process has not
    // touched yet), and the write below starts that much sooner
    // (docs/performance.md, "Tuning constants").
    const uint64_t used = tier.used_bytes();
    if (used > tier.HighBytes() && used - std::min(used, bytes) <= tier.HighBytes()) Wake();
    return true;
  }
  if (bytes > tier.capacity_bytes() || static_cast<size_t>(t) + 1 >= bounds_.size()) return false;
  if (scheduler_ == nullptr || !scheduler_->background()) {
    // No background mover: demote on this thread what the reservation
    // needs (at least one batch), and in the tiers below as they fill.
    const Placement::MakeRoomFn below = [this](int d, uint64_t n) { return MakeRoom(d, n); };
    for (int attempt = 0; attempt < 4; ++attempt) {
      const uint64_t used = tier.used_bytes();
      const uint64_t need = used + bytes > tier.capacity_bytes() ? used + bytes - tier.capacity_bytes() : 0;
      const uint64_t moved = demoter_->Demote(t, policy_.SyncBytes(tier, host_->tier(t + 1), need), below);
      host_->CountSyncDemotion();
      if (tier.TryReserve(bytes)) return true;
      if (moved == 0) break;
    }
    return false;
  }
  const auto wait_start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> l(mu_);
  Boundary& b = bounds_[t];
  b.waiting_bytes += bytes;
  const bool sustains = purpose == RoomFor::kWrite;
  if (sustains) {
    b.waited = true;
    b.last_wait = wait_start;
  }
  b.stuck = false;
  KickLocked(t);
  bool ok = false;
  uint64_t seen = ProgressLocked(t);
  auto progressed = std::chrono::steady_clock::now();
  for (;;) {
    if (tier.TryReserve(bytes)) {
      ok = true;
      break;
    }
    if (stopping_) break;
    if (StalledLocked(t, &seen, &progressed)) break;  // nothing moved or was freed for a while
    // A stuck boundary (its last batch moved nothing) is re-tried: the pins
    // may be gone, or the tier below may have room by now.
    if (b.inflight_batches == 0) {
      b.stuck = false;
      KickLocked(t);
    }
    // Every completion notifies; the timeout covers room freed elsewhere
    // (an Erase, a Handle released).
    cv_.wait_for(l, std::chrono::milliseconds(20));
  }
  b.waiting_bytes -= bytes;
  if (sustains) b.last_wait = std::chrono::steady_clock::now();
  host_->CountBackpressureWait(ElapsedNanos(wait_start));
  // A caller that waited for room holds it now and is about to copy its
  // object in; the tier is usually past its high watermark again, and the
  // next demotion starts here rather than after the insert (the Put wakes
  // the mover again once its object is in).
  if (ok && tier.AboveHigh()) KickLocked(t);
  return ok;
}

bool Mover::ReserveForPromotion(int t, uint64_t bytes) {
  if (host_->tier(t).TryReserve(bytes)) return true;
  if (scheduler_ == nullptr) return MakeRoom(t, bytes);  // every demotion is a caller's here
  RequestRoom(t, bytes);
  return false;
}

void Mover::RequestRoom(int t, uint64_t bytes) {
  if (scheduler_ == nullptr || static_cast<size_t>(t) + 1 >= bounds_.size()) return;
  std::lock_guard<std::mutex> l(mu_);
  Boundary& b = bounds_[t];
  b.requested_bytes = std::max(b.requested_bytes, bytes);
  b.stuck = false;
  KickLocked(t);
}

bool Mover::Shed(int t, uint64_t bytes, bool wait) {
  if (bytes == 0) return true;
  if (static_cast<size_t>(t) + 1 >= bounds_.size()) return false;
  if (scheduler_ == nullptr || !scheduler_->background()) {
    uint64_t moved = 0;
    const Placement::MakeRoomFn below = [this](int d, uint64_t n) { return MakeRoom(d, n); };
    while (moved < bytes) {
      const uint64_t m = demoter_->Demote(t, bytes - moved, below);
      host_->CountSyncDemotion();
      if (m == 0) break;
      moved += m;
    }
    return moved >= bytes;
  }
  std::unique_lock<std::mutex> l(mu_);
  Boundary& b = bounds_[t];
  // Batches in flight were picked from this tier: what they move counts.
  const uint64_t goal = b.moved_bytes + bytes;
  b.pressure_bytes = std::max(b.pressure_bytes, bytes);
  b.stuck = false;
  KickLocked(t);
  if (!wait) return false;
  uint64_t seen = ProgressLocked(t);
  auto progressed = std::chrono::steady_clock::now();
  while (b.moved_bytes < goal && !stopping_) {
    if (b.inflight_batches == 0) {
      if (b.stuck) break;  // its last batch moved nothing: pinned, or no room below
      b.pressure_bytes = std::max(b.pressure_bytes, goal - b.moved_bytes);
      KickLocked(t);
      if (b.inflight_batches == 0) break;  // nothing left to pick
    }
    if (StalledLocked(t, &seen, &progressed)) break;
    cv_.wait_for(l, std::chrono::milliseconds(20));
  }
  return b.moved_bytes >= goal;
}

bool Mover::IdleLocked() {
  for (const Boundary& b : bounds_) {
    if (b.inflight_batches > 0) return false;
  }
  return true;
}

void Mover::WaitIdle() {
  std::vector<uint64_t> pressure = MeasurePressure();
  if (scheduler_ == nullptr) {
    // Caller's thread: pass over the chain until a pass moves nothing.
    const Placement::MakeRoomFn below = [this](int d, uint64_t n) { return MakeRoom(d, n); };
    for (;;) {
      uint64_t total = 0;
      for (size_t t = 0; t + 1 < bounds_.size(); ++t) {
        const Tier& from = host_->tier(t);
        BoundaryLoad load;
        load.pressure_bytes = pressure[t];
        pressure[t] = 0;
        uint64_t need = policy_.Want(from, host_->tier(t + 1), load);
        while (need > 0) {
          const uint64_t moved = demoter_->Demote(static_cast<int>(t), std::min(need, policy_.BatchBytes(from, host_->tier(t + 1))), below);
          if (moved == 0) break;
          total += moved;
          need = std::max(need > moved ? need - moved : 0, from.ExcessOverLow());
        }
      }
      if (total == 0) return;
    }
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    for (size_t t = 0; t + 1 < bounds_.size(); ++t) {
      bounds_[t].waited = false;  // the spill is over: only the watermarks start batches now
      bounds_[t].pressure_bytes = std::max(bounds_[t].pressure_bytes, pressure[t]);
      bounds_[t].stuck = false;
      KickLocked(static_cast<int>(t));
    }
  }
  if (!scheduler_->background()) {
    // Completions start the next batches on this thread too; a boundary
    // whose batch moved nothing stops (stuck) until the next Wake.
    scheduler_->RunPending();
    return;
  }
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return stopping_ || IdleLocked(); });
}

Mover::BoundaryState Mover::state(int t) {
  std::lock_guard<std::mutex> l(mu_);
  BoundaryState s = bounds_[t];
  if (s.inflight_batches == 0) s.idle_ns += ElapsedNanos(bounds_[t].idle_since);
  return s;
}

}  // namespace spillway::internal
