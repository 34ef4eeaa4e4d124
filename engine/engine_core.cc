// EngineCore: Put, Get, Erase and the index bookkeeping. The move protocol
// lives in demoter.cc, the background mover in mover.cc.
#include "engine/engine_core.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>

#include "base/scheduler.h"
#include "engine/demoter.h"
#include "engine/mover.h"
#include "engine/placement.h"
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
  closing_ = true;
  checkpoint_pool_.reset();  // finishes a checkpoint in flight
  // A clean close is a last Flush: erase marks still queued reach the disk,
  // so what was erased stays erased after the next Open.
  bool persistent = false;
  for (size_t t = 0; t < tiers_.size(); ++t) persistent |= persistent_file(static_cast<int>(t));
  if (persistent) {
    std::lock_guard<std::mutex> l(flush_mu_);
    Status st = Checkpoint();
    if (!st.ok()) {
      Logger* logger = options_.logger != nullptr ? options_.logger : StderrLogger();
      logger->Log(LogLevel::kError, "closing: the last flush failed (the next Open recovers what reached the disk): " +
                                        st.ToString());
    }
  }
  if (dumper_) {
    (void)dumper_->DumpNow();  // a last snapshot while the objects still exist
    dumper_.reset();
  }
  // Drop every entry. Scratch copies go with them; records in persistent
  // tiers must stay on disk for the next Open, so they are not freed.
  shutting_down_ = true;
  for (auto& t : tiers_) t->BeginClose();  // scratch files go whole, not record by record
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
  // The tiers go next, and the cache's view of their usage with them.
  if (host_cache_) host_cache_->Detach();
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

void EngineCore::Insert(std::string_view key, uint64_t raw_size, int tier, Location loc, uint64_t sequence) {
  Entry* e = Entry::Create(key, raw_size);
  e->tier = static_cast<int8_t>(tier);
  e->sequence = sequence;
  e->pin_state.store(static_cast<uint64_t>(tier) << Entry::kPinTierShift, std::memory_order_relaxed);
  e->loc.Set(std::move(loc));
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  Entry* gone;  // the entry that leaves: the old one, or `e` when it lost
  Location retired;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    Entry* cur = shard.Find(key, hash);
    if (cur != nullptr && cur->sequence > sequence) {
      // A Put of this key that began later has committed first. Recovery
      // would prefer its record (the higher sequence), so the index does
      // too: this Put is ordered before it, and its object is dropped.
      gone = e;
      e->erased = true;
    } else {
      gone = shard.Replace(e, hash);
      if (gone) {
        gone->erased = true;
        policy_->Remove(gone);
      }
      policy_->Insert(e, tier);
    }
    if (gone && persistent_file(gone->tier)) retired = gone->loc.Get(gone->raw_size);
  }
  if (gone) {
    // A Handle may keep the old entry (and its Free) for long; its record is
    // flagged erased at the next Flush all the same.
    if (persistent_file(gone->tier)) tiers_[gone->tier]->Retire(retired);
    Unref(gone);
  }
}

Status EngineCore::CheckKey(std::string_view key) {
  if (key.size() <= kMaxKeyLen) return Status::OK();
  return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                                 std::to_string(kMaxKeyLen));
}

Status EngineCore::Put(std::string_view key, std::span<const std::span<const std::byte>> buffers,
                       const PutOptions& options) {
  puts_.fetch_add(1, std::memory_order_relaxed);
  SPILLWAY_RETURN_IF_ERROR(CheckKey(key));
  if (buffers.size() > kMaxBuffers) return Status::InvalidArgument("too many buffers in one object");
  const MemoryKind kind = ClassifyBuffers(buffers, options.memory);
  // The version's number, in its record on every tier it reaches.
  const uint64_t sequence = next_sequence_.fetch_add(1, std::memory_order_relaxed);
  ObjectView view{key, buffers, sequence};
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
      v = ObjectView{key, host_spans, sequence};
    }
    // Placement: admission (size rules, capacity) and room (min_free); the
    // estimate is computed once and carried to Store.
    const uint64_t estimate = tier.ReserveEstimate(v);
    if (!placement_->Admits(static_cast<int>(t), raw, estimate)) return false;
    const bool reserved = probe ? placement_->TryReserve(static_cast<int>(t), estimate, /*probe=*/true)
                                : tier.HasDeviceRoom(estimate) && mover_->MakeRoom(static_cast<int>(t), estimate);
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
      auto locs = tier.Store(std::span<const ObjectView>(&v, 1), std::span<const uint64_t>(&estimate, 1));
      if (!locs.ok()) {
        tier.Unreserve(estimate);
        last_error = locs.status();
        return false;  // fall through to the next tier
      }
      loc = std::move((*locs)[0]);
    }
    Insert(key, raw, static_cast<int>(t), std::move(loc), sequence);
    if (mover_) mover_->NudgeIfDue(static_cast<int>(t));
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

Status EngineCore::Erase(std::string_view key) {
  erases_.fetch_add(1, std::memory_order_relaxed);
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  Entry* e;
  Location retired;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    e = shard.Find(key, hash);
    if (e == nullptr) return Status::NotFound("key not found");
    shard.Remove(e, hash);
    e->erased = true;
    policy_->Remove(e);
    if (persistent_file(e->tier)) retired = e->loc.Get(e->raw_size);
  }
  // Flagged erased on disk at the next Flush, even while a Handle keeps the
  // entry (and its Free) alive.
  if (persistent_file(e->tier)) tiers_[e->tier]->Retire(retired);
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
  if (e->clean_tier >= 0) {  // scratch tiers only: never persistent
    Location clean;
    {
      auto& shard = index_.ShardFor(e->key());
      std::lock_guard<std::mutex> l(shard.mu);
      auto it = shard.clean_copies.find(e);
      clean = std::move(it->second);
      shard.clean_copies.erase(it);
    }
    tiers_[e->clean_tier]->FreeCopy(clean);
    clean_copies_.fetch_sub(1, std::memory_order_relaxed);
  }
  Entry::Destroy(e);
}

void EngineCore::LogMove(std::string_view key, uint64_t raw, uint64_t stored, int from, int to,
                         uint64_t micros, bool ok, std::string_view error) {
  if (!event_log_) return;
  event_log_->Record({key, raw, stored, tiers_[from]->name(), tiers_[to]->name(),
                      CodecKindName(config_.tiers[to].codec.kind), to > from, micros, ok, error});
}

uint64_t EngineCore::Demote(int t, uint64_t bytes) {
  return demoter_->Demote(t, bytes, [this](int d, uint64_t n) { return mover_->MakeRoom(d, n); });
}

uint64_t EngineCore::BeginDemote() {
  std::lock_guard<std::mutex> l(demote_mu_);
  const uint64_t ticket = demote_tickets_++;
  demotes_.insert(ticket);
  return ticket;
}

void EngineCore::EndDemote(uint64_t ticket) {
  {
    std::lock_guard<std::mutex> l(demote_mu_);
    demotes_.erase(ticket);
  }
  demote_cv_.notify_all();
}

void EngineCore::WaitForDemotesBegunBefore(uint64_t ticket) {
  std::unique_lock<std::mutex> l(demote_mu_);
  demote_cv_.wait(l, [&] { return demotes_.empty() || *demotes_.begin() >= ticket; });
}

Status EngineCore::Flush() {
  if (mover_) mover_->WaitIdle();
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> l(demote_mu_);
    ticket = demote_tickets_;
  }
  WaitForDemotesBegunBefore(ticket);
  std::lock_guard<std::mutex> l(flush_mu_);
  return Checkpoint();
}

Status EngineCore::Checkpoint() {
  // 0. What is queued now: each entry was queued after the record that
  //    superseded it was written.
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (persistent_file(static_cast<int>(t))) static_cast<FileTier*>(tiers_[t].get())->PrepareFrees();
  }
  // 1. Every record written so far durable.
  Status first;
  for (auto& t : tiers_) {
    if (t->is_memory()) continue;
    Status st = static_cast<FileTier*>(t.get())->SyncData();
    if (!st.ok() && first.ok()) first = st;
  }
  if (!first.ok()) return first;  // the marks wait: what superseded them may not be on disk
  // 2. The erase marks and reclaims, then 3. those durable.
  bool wrote = false;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (!persistent_file(static_cast<int>(t))) continue;
    Status st = static_cast<FileTier*>(tiers_[t].get())->CommitFrees(&wrote);
    if (!st.ok() && first.ok()) first = st;
  }
  if (!wrote) return first;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (!persistent_file(static_cast<int>(t))) continue;
    Status st = static_cast<FileTier*>(tiers_[t].get())->SyncData();
    if (!st.ok() && first.ok()) first = st;
  }
  return first;
}

void EngineCore::ScheduleCheckpoint() {
  if (closing_ || !checkpoint_pool_ || checkpoint_queued_.exchange(true)) return;
  checkpoint_pool_->Submit([this] {
    checkpoint_queued_ = false;  // frees queued from now on may schedule the next one
    std::lock_guard<std::mutex> l(flush_mu_);
    // A failure leaves the frees queued: the next Flush retries and reports it.
    (void)Checkpoint();
  });
}

}  // namespace spillway::internal
