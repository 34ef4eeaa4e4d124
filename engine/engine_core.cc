// EngineCore: Put, Get, Erase and the index bookkeeping. Demotion lives in
// demote.cc, the background thread in mover.cc.
#include "engine/engine_core.h"

#include <algorithm>
#include <bit>
#include <chrono>

#include "engine/mover.h"
#include "tiers/file_tier.h"

namespace spillway::internal {

void BoundaryCounters::Record(uint64_t objs, uint64_t raw, uint64_t stored, uint64_t ns) {
  objects.fetch_add(objs, std::memory_order_relaxed);
  bytes.fetch_add(raw, std::memory_order_relaxed);
  stored_bytes.fetch_add(stored, std::memory_order_relaxed);
  nanos.fetch_add(ns, std::memory_order_relaxed);
  const uint64_t us = ns / 1000;
  const int bucket = std::min<int>(kLatencyBuckets - 1, us == 0 ? 0 : std::bit_width(us));
  latency_us[bucket].fetch_add(1, std::memory_order_relaxed);
}

EngineCore::EngineCore(Config config, EngineOptions options)
    : config_(std::move(config)), options_(std::move(options)) {}

EngineCore::~EngineCore() {
  prefetch_pool_.reset();  // finishes queued prefetches
  if (mover_) mover_->Stop();
  if (dumper_) {
    (void)dumper_->DumpNow();  // a last snapshot while the objects still exist
    dumper_.reset();
  }
  // Drop every entry. Scratch copies go with them; records in persistent
  // tiers must stay on disk for the next Open, so they are not freed.
  shutting_down_ = true;
  for (size_t s = 0; s < ObjectIndex::kShards; ++s) {
    auto& shard = index_.shard(s);
    std::vector<Entry*> entries;
    {
      std::lock_guard<std::mutex> l(shard.mu);
      for (auto& [k, e] : shard.map) {
        e->erased = true;
        policy_->Remove(e);
        entries.push_back(e);
      }
      shard.map.clear();
    }
    for (Entry* e : entries) Unref(e);
  }
}

bool EngineCore::UnchangedSince(const Entry* e, int t, uint64_t version) const {
  return !e->erased && !e->moving && e->version == version && e->tier == t;
}

Location EngineCore::RelocatePinnedLocked(Entry* e, int from, int to, Location loc) {
  Location old = std::move(e->loc);
  e->loc = std::move(loc);
  e->tier = static_cast<int8_t>(to);
  e->version++;
  policy_->MoveTo(e, to);
  pinned_bytes_[from].fetch_sub(e->raw_size, std::memory_order_relaxed);
  pinned_bytes_[to].fetch_add(e->raw_size, std::memory_order_relaxed);
  return old;
}

int EngineCore::FirstGpuTier() const {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->kind() == TierKind::kGpu) return static_cast<int>(i);
  }
  return -1;
}

int EngineCore::FirstHostTier() const {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    if (tiers_[i]->is_memory() && tiers_[i]->Accepts(MemoryKind::kHost)) return static_cast<int>(i);
  }
  return -1;
}

bool EngineCore::ReserveWithBackpressure(int t, uint64_t estimate) {
  Tier& tier = *tiers_[t];
  if (tier.TryReserve(estimate)) return true;
  if (estimate > tier.capacity_bytes()) return false;
  if (mover_) mover_->Wake();
  if (static_cast<size_t>(t) + 1 >= tiers_.size()) return false;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const uint64_t used = tier.used_bytes();
    const uint64_t need = used + estimate > tier.capacity_bytes() ? used + estimate - tier.capacity_bytes() : 0;
    // Demote a little ahead so the next few calls do not each stall.
    const uint64_t ahead = std::min<uint64_t>(std::max(estimate * 4, tier.capacity_bytes() / 16), 64ull << 20);
    const uint64_t moved = Demote(t, std::max<uint64_t>(need, ahead));
    sync_demotions_.fetch_add(1, std::memory_order_relaxed);
    if (tier.TryReserve(estimate)) return true;
    if (moved == 0) break;
  }
  return false;
}

void EngineCore::Insert(std::string_view key, uint64_t raw_size, int tier, Location loc) {
  Entry* e = new Entry(key, raw_size);
  e->tier = static_cast<int8_t>(tier);
  e->loc = std::move(loc);
  Entry* old = nullptr;
  auto& shard = index_.ShardFor(key);
  {
    std::lock_guard<std::mutex> l(shard.mu);
    auto it = shard.map.find(key);
    if (it != shard.map.end()) {
      old = it->second;
      shard.map.erase(it);
      old->erased = true;
      policy_->Remove(old);
    }
    shard.map.emplace(std::string_view(e->key), e);
    policy_->Insert(e, tier);
  }
  if (old) Unref(old);
}

Status EngineCore::Put(std::string_view key, std::span<const std::span<const std::byte>> buffers,
                       const PutOptions& options) {
  puts_.fetch_add(1, std::memory_order_relaxed);
  if (key.size() > kMaxKeyLen) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                                   std::to_string(kMaxKeyLen));
  }
  if (buffers.size() > kMaxBuffers) return Status::InvalidArgument("too many buffers in one object");
  const MemoryKind kind = ClassifyBuffers(buffers, options.memory);
  ObjectView view{key, buffers};
  const uint64_t raw = view.raw_size();
  // A device object that lands below the gpu tiers is copied to host memory once.
  BlobPtr host_copy;
  std::vector<std::span<const std::byte>> host_spans;
  Status last_error;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Tier& tier = *tiers_[t];
    const bool direct = tier.Accepts(kind);
    if (!direct && kind != MemoryKind::kDevice) continue;  // host objects skip gpu tiers
    ObjectView v = view;
    if (!direct) {
      if (!host_copy) {
        auto c = CopyDeviceToHost(view);
        if (!c.ok()) return c.status().WithContext("copying device object to host");
        host_copy = std::move(*c);
        host_copy->Spans(&host_spans);
      }
      v = ObjectView{key, host_spans};
    }
    const uint64_t estimate = tier.ReserveEstimate(v);
    if (estimate > tier.capacity_bytes()) continue;
    if (!ReserveWithBackpressure(static_cast<int>(t), estimate)) continue;
    Location loc;
    if (!direct && CanAdoptHost(static_cast<int>(t))) {
      auto adopted = tier.Adopt(host_copy, estimate);  // no second copy
      if (!adopted.ok()) {
        tier.Unreserve(estimate);
        last_error = adopted.status();
        continue;
      }
      loc = std::move(*adopted);
    } else {
      auto locs = tier.Store(std::span<const ObjectView>(&v, 1));
      if (!locs.ok()) {
        tier.Unreserve(estimate);
        last_error = locs.status();
        continue;  // fall through to the next tier
      }
      loc = std::move((*locs)[0]);
    }
    Insert(key, raw, static_cast<int>(t), std::move(loc));
    if (tier.AboveHigh() && mover_) mover_->Wake();
    return Status::OK();
  }
  if (!last_error.ok() && !last_error.IsNoSpace()) return last_error;
  return Status::NoSpace("no tier can hold object of " + std::to_string(raw) + " bytes" +
                         (last_error.ok() ? std::string() : " (last error: " + last_error.ToString() + ")"));
}

StatusOr<Handle> EngineCore::Get(std::string_view key, Where where) {
  gets_.fetch_add(1, std::memory_order_relaxed);
  auto& shard = index_.ShardFor(key);
  Entry* e;
  int t;
  uint64_t version;
  Location loc;
  bool moving;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return Status::NotFound("key not found");
    }
    e = it->second;
    if (e->pins.fetch_add(1, std::memory_order_acq_rel) == 0) {
      pinned_bytes_[e->tier].fetch_add(e->raw_size, std::memory_order_relaxed);
    }
    e->refs.fetch_add(1, std::memory_order_relaxed);
    t = e->tier;
    version = e->version;
    loc = e->loc;
    moving = e->moving;
    policy_->Touch(e);
  }
  hits_[t].fetch_add(1, std::memory_order_relaxed);
  if (tiers_[t]->kind() == TierKind::kGpu) {
    if (where != Where::kHost) return Handle(std::move(loc.blob), e, this);
    auto host = tiers_[t]->Load(loc, key);  // a host copy; the object stays on the device
    if (!host.ok()) {
      Unpin(e);
      Unref(e);
      return host.status();
    }
    return Handle(std::move(*host), e, this);
  }
  if (where == Where::kDevice) return ToDevice(e, t, version, std::move(loc), key);
  if (tiers_[t]->is_memory()) return Handle(std::move(loc.blob), e, this);

  const auto start = std::chrono::steady_clock::now();
  auto blob = tiers_[t]->Load(loc, key);
  if (!blob.ok()) {
    Unpin(e);
    Unref(e);
    return blob.status();
  }
  const int h = FirstHostTier();
  // Objects in a persistent tier are read in place: promoting would move
  // their only durable copy into memory.
  if (config_.policy.promote_on_read && !config_.tiers[t].persistent && !moving && h >= 0 && h < t) {
    BlobPtr b = std::move(*blob);
    const uint64_t raw = b->size();
    if (ReserveWithBackpressure(h, raw)) {
      Location old;
      bool committed = false;
      {
        std::lock_guard<std::mutex> l(shard.mu);
        if (UnchangedSince(e, t, version)) {
          auto nl = tiers_[h]->Adopt(b, raw);
          if (nl.ok()) {
            old = RelocatePinnedLocked(e, t, h, std::move(*nl));
            committed = true;
          }
        }
      }
      if (committed) {
        tiers_[t]->Free(old);
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - start).count();
        boundary(t, h).Record(1, raw, raw, ns);
        if (event_log_) {
          event_log_->Record({key, raw, raw, tiers_[t]->name(), tiers_[h]->name(),
                              CodecKindName(config_.tiers[h].codec.kind), false,
                              static_cast<uint64_t>(ns) / 1000, true});
        }
        if (tiers_[h]->AboveHigh() && mover_) mover_->Wake();
      } else {
        tiers_[h]->Unreserve(raw);
      }
    }
    return Handle(std::move(b), e, this);
  }
  return Handle(std::move(*blob), e, this);
}

Status EngineCore::Erase(std::string_view key) {
  erases_.fetch_add(1, std::memory_order_relaxed);
  auto& shard = index_.ShardFor(key);
  Entry* e;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    auto it = shard.map.find(key);
    if (it == shard.map.end()) return Status::NotFound("key not found");
    e = it->second;
    shard.map.erase(it);
    e->erased = true;
    policy_->Remove(e);
  }
  Unref(e);
  return Status::OK();
}

bool EngineCore::Contains(std::string_view key) {
  auto& shard = index_.ShardFor(key);
  std::lock_guard<std::mutex> l(shard.mu);
  return shard.map.count(key) != 0;
}

void EngineCore::Unpin(Entry* e) {
  // Under the shard lock so the 1 -> 0 transition and pinned-bytes
  // bookkeeping cannot interleave with a Get pinning the entry again.
  auto& shard = index_.ShardFor(e->key);
  std::lock_guard<std::mutex> l(shard.mu);
  if (e->pins.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    pinned_bytes_[e->tier].fetch_sub(e->raw_size, std::memory_order_relaxed);
  }
}

void EngineCore::Unref(Entry* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Last reference: nobody can reach the entry any more.
  if (e->tier >= 0 && !(shutting_down_ && config_.tiers[e->tier].persistent)) tiers_[e->tier]->Free(e->loc);
  delete e;
}

Status EngineCore::Flush() {
  if (mover_) mover_->WaitIdle();
  Status first;
  for (auto& t : tiers_) {
    if (t->is_memory()) continue;
    Status st = t->Sync();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

}  // namespace spillway::internal
