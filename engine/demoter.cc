// Demoter: pick, place, read, store, commit (see demoter.h).
#include "engine/demoter.h"

#include <chrono>
#include <unordered_set>

#include "engine/external_slot.h"
#include "spillway/file_io.h"

namespace spillway::internal {
namespace {
constexpr size_t kMaxBatchObjects = 16384;
}  // namespace

struct DemotionMove {
  Entry* e;
  uint32_t version;
  Location src;
  BlobPtr blob;  // source bytes as host memory
  std::vector<std::span<const std::byte>> spans;
  uint64_t estimate = 0;  // bytes reserved in `dest`, computed once
  int dest = -1;
  Location dst;
  bool ok = false;
  // The entry's clean copy is in tier `dest`: the move only re-points the
  // entry there (nothing read or written).
  bool clean = false;
  // An external object (PutExternal): Run materializes it into `spans`,
  // kept alive by `owner`, and commits them as a new entry.
  ExternalSlot* external = nullptr;
  bool materialized = false;
  std::shared_ptr<void> owner;
};

struct DemotionBatch {
  MoveHost* host = nullptr;
  std::vector<Entry*> victims;  // picked (a reference each), moving or not
  std::vector<DemotionMove> moves;  // the victims marked moving
  uint64_t picked_bytes = 0;
  std::chrono::steady_clock::time_point start;
};

void DemotionBatchDeleter::operator()(DemotionBatch* batch) const {
  if (batch == nullptr) return;
  for (DemotionMove& m : batch->moves) {
    if (batch->victims.empty()) break;  // ran: committed or aborted already
    auto& shard = batch->host->index().ShardFor(m.e->key());
    std::lock_guard<std::mutex> l(shard.mu);
    m.e->moving = false;
  }
  batch->moves.clear();  // source blobs go before the entries' references
  for (Entry* e : batch->victims) {
    EvictionPolicy::Unpick(e);
    batch->host->Unref(e);
  }
  delete batch;
}

Demoter::Demoter(MoveHost* host, const Placement* placement) : host_(host), placement_(placement) {}

Demoter::~Demoter() = default;

uint64_t Demoter::PickedBytes(const DemotionBatch& batch) { return batch.picked_bytes; }

DemotionBatchPtr Demoter::Pick(int t, uint64_t bytes) {
  if (static_cast<size_t>(t) + 1 >= host_->num_tiers() || bytes == 0) return nullptr;
  DemotionBatchPtr batch(new DemotionBatch);
  batch->host = host_;
  batch->start = std::chrono::steady_clock::now();
  host_->policy().PickVictims(t, bytes, kMaxBatchObjects, &batch->victims, /*any_clean=*/host_->HasCleanCopies());
  // One allocation: grown by doubling, a batch of 2,048 small objects
  // copied its moves eleven times and touched twice the memory.
  batch->moves.reserve(batch->victims.size());
  for (Entry* e : batch->victims) {
    auto& shard = host_->index().ShardFor(e->key());
    std::lock_guard<std::mutex> l(shard.mu);
    if (e->erased || e->moving || e->tier != t || e->pins() != 0) continue;
    ExternalSlot* external = e->loc.has_blob() ? ExternalSlotOf(e->loc.blob().get()) : nullptr;
    if (external != nullptr && external->failed.load(std::memory_order_relaxed)) {
      EvictionPolicy::Touch(e);  // cannot become bytes: the next picks look past it
      continue;
    }
    e->moving = true;
    batch->moves.push_back(
        DemotionMove{e, e->version, e->loc.Get(e->raw_size), nullptr, {}, 0, -1, {}, false, false, external, false, {}});
    if (e->clean_tier > t) {
      DemotionMove& m = batch->moves.back();
      m.clean = true;
      m.dest = e->clean_tier;
      m.ok = true;
    }
    batch->picked_bytes += e->raw_size;
  }
  if (batch->moves.empty()) return nullptr;  // the deleter drops the picks
  return batch;
}

DemotionBatchPtr Demoter::SplitExternal(DemotionBatch& batch) {
  std::unordered_set<Entry*> external;
  for (const DemotionMove& m : batch.moves) {
    if (m.external != nullptr) external.insert(m.e);
  }
  if (external.empty()) return nullptr;
  DemotionBatchPtr ext(new DemotionBatch);
  ext->host = host_;
  ext->start = batch.start;
  std::vector<DemotionMove> rest;
  for (DemotionMove& m : batch.moves) {
    if (m.external != nullptr) {
      ext->picked_bytes += m.e->raw_size;
      ext->moves.push_back(std::move(m));
    } else {
      rest.push_back(std::move(m));
    }
  }
  batch.moves = std::move(rest);
  batch.picked_bytes -= ext->picked_bytes;
  // The picks and references of those entries go with them.
  std::vector<Entry*> victims;
  for (Entry* e : batch.victims) (external.count(e) ? ext->victims : victims).push_back(e);
  batch.victims = std::move(victims);
  return ext;
}

uint64_t Demoter::Demote(int t, uint64_t bytes, const Placement::MakeRoomFn& make_room) {
  auto batch = Pick(t, bytes);
  if (!batch) return 0;
  return Run(t, *batch, make_room).moved;
}

Demoter::Result Demoter::Run(int t, DemotionBatch& batch, const Placement::MakeRoomFn& make_room) {
  const DemoteScope in_flight(*host_);  // Flush waits for it (durability, move_host.h)
  const bool memory_source = host_->tier(t).is_memory();
  Result result;
  // A file source is read first: its buffer sizes, which placing needs, are
  // in the record.
  if (!memory_source) LoadFileSources(t, batch);
  MaterializeExternal(t, batch);
  PlaceBelow(t, batch, make_room, &result);
  if (memory_source) LoadMemorySources(t, batch);
  for (size_t d = t + 1; d < host_->num_tiers(); ++d) StoreInto(t, static_cast<int>(d), batch, make_room);
  CommitAll(t, batch, &result);
  for (Entry* e : batch.victims) {
    EvictionPolicy::Unpick(e);
    host_->Unref(e);
  }
  batch.victims.clear();
  return result;
}

void Demoter::LoadFileSources(int t, DemotionBatch& batch) {
  Tier& source = host_->tier(t);
  for (Move& m : batch.moves) {
    auto blob = source.Load(m.src, m.e->key());
    if (!blob.ok()) {
      host_->boundary(t, t + 1).failures.fetch_add(1, std::memory_order_relaxed);
      host_->LogMove(m.e->key(), m.e->raw_size, 0, t, t + 1, 0, false, blob.status().ToString());
      continue;
    }
    m.blob = std::move(*blob);
    m.blob->Spans(&m.spans);
  }
}

void Demoter::MaterializeExternal(int t, DemotionBatch& batch) {
  // External objects become bytes now, on this thread, no lock held: the
  // background mover runs their moves on its materializer thread
  // (Mover::RunBatch), so only they wait for the caller's Materialize (the
  // Python module's takes the GIL). One that fails stays in memory, marked
  // so that it is not picked again.
  std::shared_ptr<void> scope;  // the first external object's MaterializeScope, for them all
  bool scoped = false;
  for (Move& m : batch.moves) {
    if (m.external == nullptr) continue;
    if (!scoped) {
      scope = m.external->object->MaterializeScope();
      scoped = true;
    }
    auto bytes = m.external->object->Materialize();
    if (!bytes.ok()) {
      m.external->failed.store(true, std::memory_order_relaxed);
      host_->boundary(t, t + 1).failures.fetch_add(1, std::memory_order_relaxed);
      host_->LogMove(m.e->key(), m.e->raw_size, 0, t, t + 1, 0, false, bytes.status().ToString());
      host_->logger()->Log(LogLevel::kWarning, "an external object of " + std::to_string(m.e->raw_size) +
                                                   " bytes cannot become bytes; it stays in tier '" +
                                                   host_->tier(t).name() + "': " + bytes.status().ToString());
      continue;
    }
    m.spans = std::move(bytes->buffers);
    m.owner = std::move(bytes->owner);
    m.materialized = true;
  }
}

void Demoter::PlaceBelow(int t, DemotionBatch& batch, const Placement::MakeRoomFn& make_room, Result* result) {
  // Every object is placed before any copy: one without room stays put at
  // no cost. Memory sources: the sizes come from the blob (device pointers
  // are not dereferenced), an external object's from its materialized bytes.
  const bool memory_source = host_->tier(t).is_memory();
  for (Move& m : batch.moves) {
    if (m.clean) continue;  // placed already: its clean copy
    std::vector<std::span<const std::byte>> sizes;
    const bool own_spans = !memory_source || m.external != nullptr;
    if (m.external != nullptr) {
      if (!m.materialized) continue;
    } else if (memory_source) {
      m.src.blob->Spans(&sizes);
    } else if (!m.blob) {
      continue;
    }
    ObjectView v{m.e->key(), own_spans ? std::span<const std::span<const std::byte>>(m.spans)
                                       : std::span<const std::span<const std::byte>>(sizes)};
    Placement::Choice c = placement_->ReserveBelow(t, v, make_room);
    if (c.tier >= 0) {
      m.dest = c.tier;
      m.estimate = c.estimate;
    } else if (c.blocked >= 0) {
      if (result->blocked < 0 || result->blocked == c.blocked) {
        result->blocked = c.blocked;
        result->blocked_bytes += c.blocked_bytes;
      }
    }
  }
}

void Demoter::LoadMemorySources(int t, DemotionBatch& batch) {
  // A gpu tier gathers the placed objects and copies them to pinned host
  // memory in one batch; a host tier hands out its own blob.
  Tier& source = host_->tier(t);
  std::vector<Move*> placed;
  for (Move& m : batch.moves) {
    if (m.dest >= 0 && !m.clean) placed.push_back(&m);
  }
  if (source.kind() == TierKind::kGpu && !placed.empty()) {
    std::vector<Location> srcs;
    for (Move* m : placed) srcs.push_back(m->src);
    auto blobs = host_->LoadBatchToHost(t, srcs);
    if (blobs.ok()) {
      for (size_t i = 0; i < placed.size(); ++i) {
        placed[i]->blob = std::move((*blobs)[i]);
        placed[i]->blob->Spans(&placed[i]->spans);
      }
    } else {
      host_->boundary(t, t + 1).failures.fetch_add(placed.size(), std::memory_order_relaxed);
    }
  } else {
    for (Move* m : placed) {
      if (m->external != nullptr) {  // its bytes are in m->spans already
        m->blob = m->src.blob;
        continue;
      }
      auto blob = source.Load(m->src, m->e->key());
      if (!blob.ok()) {
        host_->boundary(t, t + 1).failures.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      m->blob = std::move(*blob);
      m->blob->Spans(&m->spans);
    }
  }
  for (Move* m : placed) {
    if (!m->blob) {  // unreadable: give the reservation back
      host_->tier(m->dest).Unreserve(m->estimate);
      m->dest = -1;
    }
  }
}

void Demoter::StoreInto(int t, int d, DemotionBatch& batch, const Placement::MakeRoomFn& make_room) {
  // The objects placed in tier d go as one batch.
  Tier& dest = host_->tier(d);
  std::vector<ObjectView> views;
  std::vector<uint64_t> estimates;
  std::vector<Move*> group;
  for (Move& m : batch.moves) {
    if (m.dest != d || m.clean) continue;
    views.push_back(ObjectView{m.e->key(), m.spans, m.e->sequence});  // a copy keeps the version's number
    estimates.push_back(m.estimate);
    group.push_back(&m);
  }
  if (group.empty()) return;
  if (host_->tier(t).kind() == TierKind::kGpu && host_->CanAdoptHost(d)) {
    // The batch already sits in fresh host memory: the host tier adopts it.
    for (Move* m : group) {
      auto loc = dest.Adopt(m->blob, m->estimate);
      if (loc.ok()) {
        m->dst = std::move(*loc);
        m->ok = true;
      } else {
        dest.Unreserve(m->estimate);
        host_->boundary(t, d).failures.fetch_add(1, std::memory_order_relaxed);
      }
    }
    return;
  }
  auto locs = dest.Store(views, estimates);
  if (!locs.ok()) {
    PassOnBelow(t, d, group, locs.status(), make_room);
    return;
  }
  for (size_t i = 0; i < group.size(); ++i) {
    group[i]->dst = std::move((*locs)[i]);
    group[i]->ok = true;
  }
}

void Demoter::PassOnBelow(int t, int d, const std::vector<Move*>& group, const Status& error,
                          const Placement::MakeRoomFn& make_room) {
  // A destination out of space (ENOSPC) passes its objects on to the tiers
  // below it; after any other error they stay where they are and the mover
  // retries later.
  Tier& dest = host_->tier(d);
  for (Move* m : group) dest.Unreserve(m->estimate);
  host_->boundary(t, d).failures.fetch_add(group.size(), std::memory_order_relaxed);
  const std::string why = error.ToString();
  for (Move* m : group) host_->LogMove(m->e->key(), m->e->raw_size, 0, t, d, 0, false, why);
  for (Move* m : group) {
    m->dest = -1;
    if (!error.IsNoSpace()) continue;
    Placement::Choice c = placement_->ReserveBelow(d, ObjectView{m->e->key(), m->spans, m->e->sequence}, make_room);
    if (c.tier < 0) continue;
    m->dest = c.tier;
    m->estimate = c.estimate;
    host_->boundary(t, c.tier).retries.fetch_add(1, std::memory_order_relaxed);
  }
}

void Demoter::CommitAll(int t, DemotionBatch& batch, Result* result) {
  const size_t n = host_->num_tiers();
  const uint64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now() - batch.start).count();
  std::vector<uint64_t> objs(n), raw(n), stored(n);
  for (Move& m : batch.moves) {
    Entry* e = m.e;
    uint64_t st = m.dst.stored_bytes;
    const uint64_t raw_below = m.external != nullptr ? m.dst.raw_bytes : e->raw_size;
    Location old;
    Entry* replaced = nullptr;  // an external object's entry, superseded by its bytes'
    const bool committed = CommitIfUnchanged(t, m, raw_below, &old, &replaced);
    if (committed && m.clean) host_->CountCleanDemotion();
    if (committed) {
      if (replaced != nullptr) {
        host_->Unref(replaced);  // the index's reference
      } else {
        host_->tier(t).Free(old);
      }
      result->moved += e->raw_size;
      if (m.clean) {
        // Nothing was written: the boundary's bytes and rates count writes
        // only; clean_demotions counts these.
        host_->tier(m.dest).ServeFromCopy(e->raw_size);
        st = 0;
      } else {
        objs[m.dest]++;
        raw[m.dest] += raw_below;
        stored[m.dest] += st;
      }
      host_->LogMove(e->key(), raw_below, st, t, m.dest, ns / 1000, true);
    } else if (m.ok) {
      if (!m.clean) host_->tier(m.dest).Free(m.dst);  // raced with a pin, erase or overwrite
      ++result->raced;
    }
    // The source bytes go now, not when the batch is destroyed: a memory
    // tier's room returns with its blob's last reference.
    m.blob.reset();
    m.spans.clear();
    m.owner.reset();
    m.src = Location();
  }
  for (size_t d = t + 1; d < n; ++d) {
    if (objs[d]) host_->boundary(t, static_cast<int>(d)).Record(objs[d], raw[d], stored[d], ns);
  }
}

bool Demoter::CommitIfUnchanged(int t, Move& m, uint64_t raw_below, Location* old, Entry** replaced) {
  Entry* e = m.e;
  const uint64_t hash = ObjectIndex::Hash(e->key());
  auto& shard = host_->index().ShardForHash(hash);
  std::lock_guard<std::mutex> l(shard.mu);
  e->moving = false;
  if (!m.ok || e->erased || e->version != m.version || e->pins() != 0 || (m.clean && e->clean_tier != m.dest)) {
    return false;
  }
  if (m.external != nullptr) {
    // The entry's raw size is the caller's accounted size, which its bytes
    // do not have (and Entry::raw_size never changes): the bytes become a
    // new entry of the same version (sequence), replacing it in the index.
    // The old entry, and with it the live object, goes with its last
    // reference (this batch's, dropped by Run).
    Entry* n = Entry::Create(e->key(), raw_below);
    n->tier = static_cast<int8_t>(m.dest);
    n->sequence = e->sequence;
    n->pin_state.store(static_cast<uint64_t>(m.dest) << Entry::kPinTierShift, std::memory_order_relaxed);
    n->loc.Set(std::move(m.dst));
    *replaced = shard.Replace(n, hash);  // e: it is indexed (not erased)
    (*replaced)->erased = true;
    host_->policy().Remove(*replaced);
    host_->policy().Insert(n, m.dest);
  } else if (m.clean) {
    *old = e->loc.Take(e->raw_size);
    auto it = shard.clean_copies.find(e);
    e->loc.Set(std::move(it->second));
    shard.clean_copies.erase(it);
    e->clean_tier = -1;
    e->flags.fetch_and(static_cast<uint8_t>(~Entry::kClean), std::memory_order_relaxed);
    host_->SetTierLocked(e, t, m.dest);
  } else {
    *old = e->loc.Take(e->raw_size);
    e->loc.Set(std::move(m.dst));
    host_->SetTierLocked(e, t, m.dest);
  }
  return true;
}

}  // namespace spillway::internal
