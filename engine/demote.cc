// EngineCore::Demote: the mechanism that moves victims one tier down.
//
// Protocol (no lock is held during I/O):
//  1. the policy picks LRU victims (marked picked, so a concurrent Demote of
//     the same tier, e.g. the mover's and a caller's, takes others and both
//     batches stay full); under each entry's shard lock the entry is
//     marked `moving` if it is unpinned and still in this tier;
//  2. its bytes are read (memory tiers: no copy) and stored in the first tier
//     below with room, as one batch so small objects share large writes;
//  3. under the shard lock again the new location is committed only if the
//     entry was not pinned, erased or replaced meanwhile; otherwise the new
//     copy is dropped. The object therefore always has a readable copy, and a
//     failed move leaves it where it was.
#include <chrono>

#include "engine/engine_core.h"

namespace spillway::internal {
namespace {

constexpr size_t kMaxBatchObjects = 16384;

struct Move {
  Entry* e;
  uint32_t version;
  Location src;
  BlobPtr blob;  // source bytes as host memory
  std::vector<std::span<const std::byte>> spans;
  uint64_t estimate = 0;  // bytes reserved in the destination
  int dest = -1;
  Location dst;
  bool ok = false;
};

}  // namespace

void EngineCore::LogMove(std::string_view key, uint64_t raw, uint64_t stored, int from, int to,
                         uint64_t micros, bool ok) {
  if (!event_log_) return;
  event_log_->Record({key, raw, stored, tiers_[from]->name(), tiers_[to]->name(),
                      CodecKindName(config_.tiers[to].codec.kind), to > from, micros, ok});
}

uint64_t EngineCore::Demote(int t, uint64_t bytes) {
  if (static_cast<size_t>(t) + 1 >= tiers_.size() || bytes == 0) return 0;
  const DemoteScope in_flight(*this);  // Flush waits for it (durability, engine_core.h)
  const auto start = std::chrono::steady_clock::now();
  std::vector<Entry*> victims;
  policy_->PickVictims(t, bytes, kMaxBatchObjects, &victims);
  if (victims.empty()) return 0;

  std::vector<Move> moves;
  moves.reserve(victims.size());
  for (Entry* e : victims) {
    auto& shard = index_.ShardFor(e->key());
    std::lock_guard<std::mutex> l(shard.mu);
    if (e->erased || e->moving || e->tier != t || e->pins() != 0) continue;
    e->moving = true;
    moves.push_back(Move{e, e->version, e->loc.Get(e->raw_size), nullptr, {}, 0, -1, {}, false});
  }

  // Read the sources: a gpu tier gathers small objects and copies them to
  // pinned host memory in one batch; other tiers read one by one.
  if (tiers_[t]->kind() == TierKind::kGpu && !moves.empty()) {
    std::vector<Location> srcs;
    for (Move& m : moves) srcs.push_back(m.src);
    auto blobs = LoadBatchToHost(t, srcs);
    if (blobs.ok()) {
      for (size_t i = 0; i < moves.size(); ++i) {
        moves[i].blob = std::move((*blobs)[i]);
        moves[i].blob->Spans(&moves[i].spans);
      }
    } else {
      boundary(t, t + 1).failures.fetch_add(moves.size(), std::memory_order_relaxed);
    }
  }
  for (Move& m : moves) {
    if (m.blob || tiers_[t]->kind() == TierKind::kGpu) continue;
    auto blob = tiers_[t]->Load(m.src, m.e->key());
    if (!blob.ok()) {
      boundary(t, t + 1).failures.fetch_add(1, std::memory_order_relaxed);
      LogMove(m.e->key(), m.e->raw_size, 0, t, t + 1, 0, false);
      continue;
    }
    m.blob = std::move(*blob);
    m.blob->Spans(&m.spans);
  }

  // Reserve room below, tier by tier, demoting there first if needed.
  for (Move& m : moves) {
    if (!m.blob) continue;
    ObjectView v{m.e->key(), m.spans};
    for (size_t d = t + 1; d < tiers_.size(); ++d) {
      if (!tiers_[d]->Accepts(MemoryKind::kHost)) continue;
      const uint64_t est = tiers_[d]->ReserveEstimate(v);
      if (est > tiers_[d]->capacity_bytes()) continue;
      if (ReserveWithBackpressure(static_cast<int>(d), est)) {
        m.estimate = est;
        m.dest = static_cast<int>(d);
        break;
      }
    }
  }

  // Store each destination's objects as one batch. A destination that runs
  // out of space (ENOSPC) passes its batch on to the tier below it.
  for (size_t d = t + 1; d < tiers_.size(); ++d) {
    std::vector<ObjectView> views;
    std::vector<Move*> batch;
    for (Move& m : moves) {
      if (m.dest != static_cast<int>(d)) continue;
      views.push_back(ObjectView{m.e->key(), m.spans, m.e->sequence});  // a copy keeps the version's number
      batch.push_back(&m);
    }
    if (batch.empty()) continue;
    if (tiers_[t]->kind() == TierKind::kGpu && CanAdoptHost(static_cast<int>(d))) {
      // The batch already sits in fresh host memory: the host tier adopts it.
      for (Move* m : batch) {
        auto loc = tiers_[d]->Adopt(m->blob, m->estimate);
        if (loc.ok()) {
          m->dst = std::move(*loc);
          m->ok = true;
        } else {
          tiers_[d]->Unreserve(m->estimate);
          boundary(t, static_cast<int>(d)).failures.fetch_add(1, std::memory_order_relaxed);
        }
      }
      continue;
    }
    auto locs = tiers_[d]->Store(views);
    if (!locs.ok()) {
      for (Move* m : batch) tiers_[d]->Unreserve(m->estimate);
      boundary(t, static_cast<int>(d)).failures.fetch_add(batch.size(), std::memory_order_relaxed);
      for (Move* m : batch) LogMove(m->e->key(), m->e->raw_size, 0, t, static_cast<int>(d), 0, false);
      if (locs.status().IsNoSpace()) {
        for (Move* m : batch) {
          m->dest = -1;
          for (size_t n = d + 1; n < tiers_.size(); ++n) {
            ObjectView v{m->e->key(), m->spans};
            const uint64_t est = tiers_[n]->ReserveEstimate(v);
            if (tiers_[n]->Accepts(MemoryKind::kHost) && est <= tiers_[n]->capacity_bytes() &&
                ReserveWithBackpressure(static_cast<int>(n), est)) {
              m->estimate = est;
              m->dest = static_cast<int>(n);
              boundary(t, static_cast<int>(n)).retries.fetch_add(1, std::memory_order_relaxed);
              break;
            }
          }
        }
      }
      continue;  // anything not re-routed stays where it is; the mover retries later
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->dst = std::move((*locs)[i]);
      batch[i]->ok = true;
    }
  }

  // Commit or abort each move.
  const uint64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - start).count();
  uint64_t moved = 0;
  std::vector<uint64_t> per_dest_objs(tiers_.size()), per_dest_raw(tiers_.size()),
      per_dest_stored(tiers_.size());
  for (Move& m : moves) {
    Entry* e = m.e;
    Location old;
    bool committed = false;
    const uint64_t stored = m.dst.stored_bytes;
    {
      auto& shard = index_.ShardFor(e->key());
      std::lock_guard<std::mutex> l(shard.mu);
      e->moving = false;
      if (m.ok && !e->erased && e->version == m.version && e->pins() == 0) {
        old = e->loc.Take(e->raw_size);
        e->loc.Set(std::move(m.dst));
        SetTierLocked(e, t, m.dest);
        committed = true;
      }
    }
    if (committed) {
      tiers_[t]->Free(old);
      moved += e->raw_size;
      per_dest_objs[m.dest]++;
      per_dest_raw[m.dest] += e->raw_size;
      per_dest_stored[m.dest] += stored;
      LogMove(e->key(), e->raw_size, stored, t, m.dest, ns / 1000, true);
    } else if (m.ok) {
      tiers_[m.dest]->Free(m.dst);  // raced with a pin, erase or overwrite
    }
  }
  for (size_t d = t + 1; d < tiers_.size(); ++d) {
    if (per_dest_objs[d]) boundary(t, static_cast<int>(d)).Record(per_dest_objs[d], per_dest_raw[d], per_dest_stored[d], ns);
  }
  for (Entry* e : victims) {
    EvictionPolicy::Unpick(e);
    Unref(e);
  }
  return moved;
}

}  // namespace spillway::internal
