// EngineCore's read paths: Get, Acquire and Prefetch. A read pins the entry
// under its shard lock, reads it (file-resident keys of one Acquire or
// Prefetch to host memory in runs of batched requests: Tier::LoadBatch; to
// the device, one Get per key, several at once), and promotes it into the
// first host tier only where that tier has room now (a device read: into the
// gpu tier, ToDevice). A read never
// demotes or writes on its own thread: when the host tier is full it asks
// the mover for room (Mover::RequestRoom) and serves the copy it read.
// Prefetch runs on its own pool, where waiting is allowed: it waits for the
// mover to make room so what it read is promoted, and a Get of a key it is
// reading waits for it (Entry::kLoading) rather than reading it twice.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <system_error>
#include <thread>

#include "engine/engine_core.h"
#include "engine/mover.h"
#include "engine/placement.h"

namespace spillway::internal {

namespace {

// File-resident bytes one run of an Acquire or Prefetch reads before it
// serves (and promotes) them: the file tier's largest single submission.
// At most two runs are held at once: the one being served and the next,
// read meanwhile.
constexpr uint64_t kReadRunBytes = 64ull << 20;
// A device Acquire's or Prefetch's reads running at once (one key each).
constexpr size_t kDeviceReaders = 16;
// How long a Get waits for a Prefetch's read of its key before reading it
// itself.
constexpr auto kLoadingWait = std::chrono::seconds(2);

}  // namespace

StatusOr<EngineCore::PinnedRead> EngineCore::PinForRead(std::string_view key, bool* loading) {
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  PinnedRead p;
  {
    std::lock_guard<std::mutex> l(shard.mu);
    Entry* e = shard.Find(key, hash);
    if (e == nullptr) {
      misses_.fetch_add(1, std::memory_order_relaxed);
      return Status::NotFound("key not found");
    }
    if (loading != nullptr && (e->flags.load(std::memory_order_acquire) & Entry::kLoading) &&
        !tiers_[e->tier]->is_memory()) {
      *loading = true;
      e->refs.fetch_add(1, std::memory_order_relaxed);
      p.e = e;
      p.t = e->tier;
      return p;
    }
    // Pins are taken only under the shard lock (so a mover that sees none
    // under it may move the entry); they are dropped without it (Unpin).
    const uint64_t prev = e->pin_state.fetch_add(1, std::memory_order_acq_rel);
    if ((prev & Entry::kPinMask) == 0) {
      pinned_bytes_[prev >> Entry::kPinTierShift].Add(e->raw_size);
    }
    e->refs.fetch_add(1, std::memory_order_relaxed);
    p.e = e;
    p.t = e->tier;
    p.moving = e->moving;
    if (e->loc.has_blob()) {
      // Memory tiers: the blob is all a hit needs.
      p.loc.blob = e->loc.blob();
      p.loc.stored_bytes = e->loc.stored_bytes();
      p.loc.raw_bytes = e->raw_size;
    } else {
      p.loc = e->loc.Get(e->raw_size);
    }
    p.version = e->version;
  }
  EvictionPolicy::Touch(p.e);
  EvictionPolicy::ReadAheadConsumed(p.e);
  hits_[p.t].Add(1);
  return p;
}

StatusOr<Handle> EngineCore::Get(std::string_view key, Where where) {
  gets_.Add(1);
  bool loading = false;
  auto p = PinForRead(key, &loading);
  if (!p.ok()) return p.status();
  if (loading) {
    // A Prefetch is reading this record: wait for it (it promotes the
    // object), then look again; past kLoadingWait, read it here.
    Entry* e = p->e;
    {
      std::unique_lock<std::mutex> l(loading_mu_);
      loading_cv_.wait_for(l, kLoadingWait,
                           [e] { return (e->flags.load(std::memory_order_acquire) & Entry::kLoading) == 0; });
    }
    Unref(e);
    p = PinForRead(key);
    if (!p.ok()) return p.status();
  }
  return Serve(std::move(*p), key, where, nullptr);
}

void EngineCore::EndLoading(Entry* e) {
  e->flags.fetch_and(static_cast<uint8_t>(~Entry::kLoading), std::memory_order_release);
  { std::lock_guard<std::mutex> l(loading_mu_); }  // a waiter between its check and its wait sees the change
  loading_cv_.notify_all();
}

StatusOr<Handle> EngineCore::Serve(PinnedRead p, std::string_view key, Where where, BlobPtr loaded,
                                   bool prefetch, int64_t read_ns) {
  Entry* e = p.e;
  const int t = p.t;
  if (tiers_[t]->kind() == TierKind::kGpu) {
    if (where != Where::kHost) return Handle(std::move(p.loc.blob), e, this);
    auto host = tiers_[t]->Load(p.loc, key);  // a host copy; the object stays on the device
    if (!host.ok()) {
      Unpin(e);
      Unref(e);
      return host.status();
    }
    return Handle(std::move(*host), e, this);
  }
  if (where == Where::kDevice) return ToDevice(e, t, p.version, std::move(p.loc), key);
  if (tiers_[t]->is_memory()) return Handle(std::move(p.loc.blob), e, this);

  const auto start = std::chrono::steady_clock::now() - std::chrono::nanoseconds(read_ns);
  BlobPtr b = std::move(loaded);
  if (!b) {
    auto blob = tiers_[t]->Load(p.loc, key);
    if (!blob.ok()) {
      bool erased;
      {
        auto& shard = index_.ShardFor(key);
        std::lock_guard<std::mutex> l(shard.mu);
        erased = e->erased;
      }
      Unpin(e);
      Unref(e);
      // Erased or replaced while being read: a Flush may have rewritten the
      // record's header (its erase mark) under the read. Read what the key
      // maps to now.
      if (erased && blob.status().IsCorruption()) return Get(key, where);
      return blob.status();
    }
    b = std::move(*blob);
  }
  // Objects in a persistent tier are read in place: promoting would move
  // their only durable copy into memory.
  const uint64_t raw = b->size();
  const int h = (config_.policy.promote_on_read || prefetch) && !config_.tiers[t].persistent && !p.moving
                    ? placement_->PromotionTarget(t, raw) : -1;
  if (h < 0) return Handle(std::move(b), e, this);
  // Room made ahead by the mover, never here (see Mover::ReserveForPromotion):
  // without it this read is served as read and the next one promotes.
  // Prefetch's thread waits for the mover instead.
  if (!tiers_[h]->HasDeviceRoom(raw) ||
      !(prefetch ? mover_->MakeRoom(h, raw, Mover::RoomFor::kRead) : mover_->ReserveForPromotion(h, raw))) {
    return Handle(std::move(b), e, this);
  }
  // The record stays where it is as the entry's clean copy (scratch tiers;
  // not when the tier is short of room): demoting the object again then
  // writes nothing. A scan read back through a full memory tier would
  // otherwise write every object a second time.
  const bool keep_clean = !tiers_[t]->AboveHigh();
  Location old;
  bool committed = false, kept = false;
  {
    auto& shard = index_.ShardFor(key);
    std::lock_guard<std::mutex> l(shard.mu);
    if (UnchangedSince(e, t, p.version)) {
      auto nl = tiers_[h]->Adopt(b, raw);
      if (nl.ok()) {
        old = RelocatePinnedLocked(e, t, h, std::move(*nl));
        committed = true;
        if (prefetch) e->flags.fetch_or(Entry::kReadAhead, std::memory_order_relaxed);
        if (keep_clean && e->clean_tier < 0) {
          shard.clean_copies.emplace(e, std::move(old));
          e->clean_tier = static_cast<int8_t>(t);
          e->flags.fetch_or(Entry::kClean, std::memory_order_relaxed);
          kept = true;
        }
      }
    }
  }
  if (!committed) {
    tiers_[h]->Unreserve(raw);
    return Handle(std::move(b), e, this);
  }
  if (kept) {
    tiers_[t]->KeepAsCopy(raw);
    clean_copies_.fetch_add(1, std::memory_order_relaxed);
  } else {
    tiers_[t]->Free(old);
  }
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  boundary(t, h).Record(1, raw, raw, ns);
  LogMove(key, raw, raw, t, h, static_cast<uint64_t>(ns) / 1000, true);
  if (tiers_[h]->AboveHigh()) mover_->Wake();
  return Handle(std::move(b), e, this);
}

StatusOr<std::vector<Handle>> EngineCore::Acquire(std::span<const std::string> keys, Where where) {
  return AcquireKeys(keys, where, ReadMode::kAcquire);
}

StatusOr<std::vector<Handle>> EngineCore::AcquireKeys(std::span<const std::string> keys, Where where,
                                                      ReadMode mode) {
  const bool prefetch = mode == ReadMode::kPrefetch;
  if (where == Where::kDevice) {
    // Device reads: one Get per key, up to kDeviceReaders at once, each on a
    // thread of its own that reads the record, checks it and copies it to
    // the device beside the others. The batched runs below read a run's
    // large records two at a time and one run ahead; to the device they ran
    // slower than this (kDeviceReaders in docs/performance.md, "Tuning
    // constants").
    std::vector<StatusOr<Handle>> got;
    got.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) got.emplace_back(Status::IOError("not read"));
    std::atomic<size_t> next{0};
    auto worker = [&] {
      for (size_t i; (i = next.fetch_add(1, std::memory_order_relaxed)) < keys.size();) got[i] = Get(keys[i], where);
    };
    {
      std::vector<std::jthread> helpers;
      for (size_t n = 1; n < std::min(kDeviceReaders, keys.size()); ++n) {
        try {
          helpers.emplace_back(worker);
        } catch (const std::system_error&) {
          break;  // no thread: the ones running take the rest
        }
      }
      worker();
    }  // joins the helpers
    std::vector<Handle> handles;
    Status first;
    for (size_t i = 0; i < got.size(); ++i) {
      if (!got[i].ok()) {
        if (prefetch && got[i].status().IsNotFound()) continue;
        if (first.ok()) first = got[i].status().WithContext("acquire '" + keys[i] + "'");
        continue;
      }
      if (!prefetch) handles.push_back(std::move(*got[i]));
    }
    if (!first.ok()) return first;  // handles released here: nothing stays pinned
    return handles;
  }
  gets_.Add(keys.size());
  std::vector<PinnedRead> pins;
  std::vector<std::string_view> names;  // pins[i]'s key
  std::vector<char> claimed;            // pins[i] holds the entry's kLoading claim (and a reference for it)
  pins.reserve(keys.size());
  auto release_pins = [&](size_t from) {
    for (size_t i = from; i < pins.size(); ++i) {
      Unpin(pins[i].e);
      Unref(pins[i].e);
    }
  };
  // Ends the kLoading claims of pins [from, to) (the Gets waiting for them
  // look again) and drops the claims' references. pins[i].e stays valid
  // after pins[i] is moved from: it is a plain pointer.
  auto end_claims = [&](size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (!claimed[i]) continue;
      EndLoading(pins[i].e);
      Unref(pins[i].e);
      claimed[i] = 0;
    }
  };
  for (const std::string& k : keys) {
    auto p = PinForRead(k);
    if (!p.ok()) {
      if (prefetch && p.status().IsNotFound()) continue;
      release_pins(0);
      return p.status().WithContext("acquire '" + k + "'");
    }
    bool claim = false;
    if (prefetch && !tiers_[p->t]->is_memory()) {
      if (p->e->flags.fetch_or(Entry::kLoading, std::memory_order_acq_rel) & Entry::kLoading) {
        // Another Prefetch is reading it: its Gets wait for that one.
        Unpin(p->e);
        Unref(p->e);
        continue;
      }
      claim = true;
      p->e->refs.fetch_add(1, std::memory_order_relaxed);  // the claim's: EndLoading after Serve
    }
    pins.push_back(std::move(*p));
    names.push_back(k);
    claimed.push_back(claim);
  }
  std::vector<Handle> handles;
  handles.reserve(prefetch ? 0 : pins.size());
  Status first;
  // Runs of keys holding at most kReadRunBytes of file-resident data (at
  // least one key), each read as one batch per file tier. While one run is
  // served (promoted where there is room), the next is read on a helper
  // thread, so the disk is not idle while the first keys are promoted.
  struct Run {
    size_t begin = 0, end = 0;
    bool on_disk = false;           // any key of it file-resident
    std::vector<BlobPtr> loaded;    // [i - begin]: key i's bytes, where read
    std::vector<int64_t> read_ns;   // each key's share of its batch's read time
    Status st;
  };
  auto make_run = [&](size_t begin) {
    Run r;
    r.begin = r.end = begin;
    uint64_t run_bytes = 0;
    for (; r.end < pins.size(); ++r.end) {
      if (tiers_[pins[r.end].t]->is_memory()) continue;
      const uint64_t n = pins[r.end].loc.stored_bytes;
      if (r.on_disk && run_bytes + n > kReadRunBytes) break;
      run_bytes += n;
      r.on_disk = true;
    }
    r.loaded.resize(r.end - r.begin);
    r.read_ns.assign(r.end - r.begin, 0);
    return r;
  };
  // Reads r's file-resident keys. Touches only pins[r.begin, r.end) (their
  // tier and location, which their pins keep), names and r itself, so it can
  // run beside the serving of another run.
  auto read_run = [&](Run& r) {
    for (size_t t = 0; t < tiers_.size() && r.st.ok(); ++t) {
      if (tiers_[t]->is_memory()) continue;
      std::vector<size_t> idx;
      std::vector<Location> locs;
      std::vector<std::string_view> batch_keys;
      for (size_t i = r.begin; i < r.end; ++i) {
        if (pins[i].t != static_cast<int>(t)) continue;
        idx.push_back(i);
        locs.push_back(pins[i].loc);
        batch_keys.push_back(names[i]);
      }
      if (idx.empty()) continue;
      const auto read_start = std::chrono::steady_clock::now();
      auto blobs = tiers_[t]->LoadBatch(locs, batch_keys);
      const double read_time =
          std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - read_start).count();
      uint64_t batch_bytes = 0;
      for (const Location& l : locs) batch_bytes += l.stored_bytes;
      for (size_t j = 0; j < idx.size(); ++j) {
        r.read_ns[idx[j] - r.begin] =
            batch_bytes == 0 ? 0
                             : static_cast<int64_t>(read_time * static_cast<double>(locs[j].stored_bytes) /
                                                    static_cast<double>(batch_bytes));
        if (blobs[j].ok()) {
          r.loaded[idx[j] - r.begin] = std::move(*blobs[j]);
        } else if (r.st.ok()) {
          r.st = blobs[j].status().WithContext("acquire '" + std::string(names[idx[j]]) + "'");
        }
      }
    }
  };
  Run cur = make_run(0);
  if (cur.on_disk) read_run(cur);
  while (cur.begin < pins.size()) {
    Run next = make_run(cur.end);
    std::jthread reader;  // joins when it goes out of scope, on every path
    if (cur.st.ok() && next.on_disk) {
      try {
        reader = std::jthread([&read_run, &next] { read_run(next); });
      } catch (const std::system_error&) {
        // no thread: read it after this run is served, as before
      }
    }
    if (!cur.st.ok()) {
      if (reader.joinable()) reader.join();
      release_pins(cur.begin);
      end_claims(cur.begin, pins.size());
      return cur.st;  // handles released here: nothing stays pinned
    }
    for (size_t i = cur.begin; i < cur.end; ++i) {
      auto h = Serve(std::move(pins[i]), names[i], where, std::move(cur.loaded[i - cur.begin]), prefetch,
                     cur.read_ns[i - cur.begin]);
      end_claims(i, i + 1);  // promoted (or not) now
      if (!h.ok()) {
        if (first.ok()) first = h.status().WithContext("acquire '" + std::string(names[i]) + "'");
        continue;  // Serve dropped this pin itself
      }
      if (!prefetch) handles.push_back(std::move(*h));
    }
    if (reader.joinable()) {
      reader.join();
    } else if (next.on_disk && first.ok()) {
      read_run(next);
    }
    if (!first.ok() && next.begin < pins.size()) {
      release_pins(next.begin);
      end_claims(next.begin, pins.size());
      return first;  // handles released here: nothing stays pinned
    }
    cur = std::move(next);
  }
  if (!first.ok()) return first;  // handles released here: nothing stays pinned
  return handles;
}

void EngineCore::Prefetch(std::span<const std::string> keys, Where where) {
  // One task for the whole set, so file-resident keys are read in batches;
  // missing keys are skipped (a hint, not a request).
  if (keys.empty()) return;
  prefetch_pool_->Submit([this, ks = std::vector<std::string>(keys.begin(), keys.end()), where] {
    (void)AcquireKeys(ks, where, ReadMode::kPrefetch);
  });
}

}  // namespace spillway::internal
