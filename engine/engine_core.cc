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
  http_.reset();  // no scrape may run once teardown begins
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
      shard.TakeAll(&entries);
      for (Entry* e : entries) {
        e->erased = true;
        policy_->Remove(e);
      }
    }
    for (Entry* e : entries) Unref(e);
  }
}

bool EngineCore::UnchangedSince(const Entry* e, int t, uint64_t version) const {
  // Another reader's pin on a file-tier entry may mean a Load of the record
  // in flight, which the caller's Free of the old location would cut short
  // (punched or reused space reads back as a checksum mismatch).
  return !e->erased && !e->moving && e->version == version && e->tier == t &&
         (tiers_[t]->is_memory() || e->pins() == 1);
}

void EngineCore::SetTierLocked(Entry* e, int from, int to) {
  e->tier = static_cast<int8_t>(to);
  // Adding the difference keeps the pin count in the low half intact even
  // while other holders unpin concurrently (unsigned wrap-around is exact).
  e->pin_state.fetch_add((static_cast<uint64_t>(to) - static_cast<uint64_t>(from)) << Entry::kPinTierShift,
                         std::memory_order_acq_rel);
  e->version++;
  policy_->MoveTo(e, to);
}

Location EngineCore::RelocatePinnedLocked(Entry* e, int from, int to, Location loc) {
  Location old = e->loc.Take(e->raw_size);
  e->loc.Set(std::move(loc));
  // The caller's pin keeps the count above zero throughout, so no unpin
  // settles the pinned bytes meanwhile; add to `to` first so its counter
  // never dips below zero when a later unpin subtracts there.
  pinned_bytes_[to].Add(e->raw_size);
  SetTierLocked(e, from, to);
  pinned_bytes_[from].Add(-static_cast<int64_t>(e->raw_size));
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
    // The same batch size as a mover pass, so the tier below gets large writes.
    const uint64_t ahead = std::min<uint64_t>(std::max(estimate * 4, EvictionPolicy::MinBatchBytes(tier)), 64ull << 20);
    const uint64_t moved = Demote(t, std::max<uint64_t>(need, ahead));
    sync_demotions_.fetch_add(1, std::memory_order_relaxed);
    if (tier.TryReserve(estimate)) return true;
    if (moved == 0) break;
  }
  return false;
}

void EngineCore::Insert(std::string_view key, uint64_t raw_size, int tier, Location loc) {
  Entry* e = Entry::Create(key, raw_size);
  e->tier = static_cast<int8_t>(tier);
  e->pin_state.store(static_cast<uint64_t>(tier) << Entry::kPinTierShift, std::memory_order_relaxed);
  e->loc.Set(std::move(loc));
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  Entry* old;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    old = shard.Replace(e, hash);
    if (old) {
      old->erased = true;
      policy_->Remove(old);
    }
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
  Status last_error, fatal;
  std::array<bool, kMaxTiers> full_marked{};
  // One attempt on tier t; true when the object is stored. With `probe`, a
  // tier that a recent ENOSPC marked full (Tier::MarkFull) is tried anyway.
  auto try_tier = [&](size_t t, bool probe) -> bool {
    Tier& tier = *tiers_[t];
    const bool direct = tier.Accepts(kind);
    if (!direct && kind != MemoryKind::kDevice) return false;  // host objects skip gpu tiers
    ObjectView v = view;
    if (!direct) {
      if (!host_copy) {
        auto c = CopyDeviceToHost(view);
        if (!c.ok()) {
          fatal = c.status().WithContext("copying device object to host");
          return false;
        }
        host_copy = std::move(*c);
        host_copy->Spans(&host_spans);
      }
      v = ObjectView{key, host_spans};
    }
    const uint64_t estimate = tier.ReserveEstimate(v);
    if (estimate > tier.capacity_bytes()) return false;
    const bool reserved = probe ? tier.TryReserve(estimate, /*ignore_full_mark=*/true)
                                : ReserveWithBackpressure(static_cast<int>(t), estimate);
    if (!reserved) {
      if (!probe && tier.marked_full()) full_marked[t] = true;
      return false;
    }
    Location loc;
    if (!direct && CanAdoptHost(static_cast<int>(t))) {
      auto adopted = tier.Adopt(host_copy, estimate);  // no second copy
      if (!adopted.ok()) {
        tier.Unreserve(estimate);
        last_error = adopted.status();
        return false;
      }
      loc = std::move(*adopted);
    } else {
      auto locs = tier.Store(std::span<const ObjectView>(&v, 1));
      if (!locs.ok()) {
        tier.Unreserve(estimate);
        last_error = locs.status();
        return false;  // fall through to the next tier
      }
      loc = std::move((*locs)[0]);
    }
    Insert(key, raw, static_cast<int>(t), std::move(loc));
    if (tier.AboveHigh() && mover_) mover_->Wake();
    return true;
  };
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (try_tier(t, false)) return Status::OK();
    if (!fatal.ok()) return fatal;
  }
  // Nothing had room. Rather than fail while a tier sits out a recent
  // ENOSPC, probe it: this is also how the chain notices a disk that has room
  // again (a Store that fails renews the mark).
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (full_marked[t] && try_tier(t, true)) return Status::OK();
    if (!fatal.ok()) return fatal;
  }
  if (!last_error.ok() && !last_error.IsNoSpace()) return last_error;
  return Status::NoSpace("no tier can hold object of " + std::to_string(raw) + " bytes" +
                         (last_error.ok() ? std::string() : " (last error: " + last_error.ToString() + ")"));
}

StatusOr<Handle> EngineCore::Get(std::string_view key, Where where) {
  gets_.Add(1);
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  Entry* e;
  int t;
  uint64_t version;
  Location loc;
  bool moving;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    e = shard.Find(key, hash);
    if (e == nullptr) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return Status::NotFound("key not found");
    }
    // Pins are taken only under the shard lock (so a mover that sees none
    // under it may move the entry); they are dropped without it (Unpin).
    const uint64_t prev = e->pin_state.fetch_add(1, std::memory_order_acq_rel);
    if ((prev & Entry::kPinMask) == 0) {
      pinned_bytes_[prev >> Entry::kPinTierShift].Add(e->raw_size);
    }
    e->refs.fetch_add(1, std::memory_order_relaxed);
    t = e->tier;
    moving = e->moving;
    if (e->loc.has_blob()) {
      // Memory tiers: the blob is all a hit needs.
      loc.blob = e->loc.blob();
      loc.stored_bytes = e->loc.stored_bytes();
      loc.raw_bytes = e->raw_size;
    } else {
      loc = e->loc.Get(e->raw_size);
    }
    version = e->version;
  }
  EvictionPolicy::Touch(e);
  hits_[t].Add(1);
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
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  Entry* e;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    e = shard.Find(key, hash);
    if (e == nullptr) return Status::NotFound("key not found");
    shard.Remove(e, hash);
    e->erased = true;
    policy_->Remove(e);
  }
  Unref(e);
  return Status::OK();
}

bool EngineCore::Contains(std::string_view key) {
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  std::lock_guard<std::mutex> l(shard.mu);
  return shard.Find(key, hash) != nullptr;
}

void EngineCore::Unpin(Entry* e) {
  // No lock: the tier the pinned bytes were counted against comes with the
  // count in one atomic word, and only a pin (under the shard lock) can
  // raise the count from zero again. The release half orders the holder's
  // reads of the object before a mover that then sees no pins.
  const uint64_t prev = e->pin_state.fetch_sub(1, std::memory_order_acq_rel);
  if ((prev & Entry::kPinMask) == 1) {
    pinned_bytes_[prev >> Entry::kPinTierShift].Add(-static_cast<int64_t>(e->raw_size));
  }
}

void EngineCore::Unref(Entry* e) {
  if (e->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  // Last reference: nobody can reach the entry any more.
  if (e->tier >= 0 && !(shutting_down_ && config_.tiers[e->tier].persistent)) {
    Location loc = e->loc.Take(e->raw_size);
    tiers_[e->tier]->Free(loc);
  }
  Entry::Destroy(e);
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
