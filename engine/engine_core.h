// EngineCore: the implementation behind the Engine facade. Internal: include
// engine/engine.h instead.
//
// Data paths: Put places an object in the first tier that accepts it and has
// room (demoting on the caller's thread when the mover has not kept up); Get
// pins an entry and, for a file tier, reads, verifies and promotes it;
// demotion (mover.cc) copies victims down and commits the new location only
// if nobody pinned, erased or replaced the object meanwhile.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "spillway/engine.h"
#include "engine/event_log.h"
#include "engine/eviction_policy.h"
#include "engine/memory_governor.h"
#include "engine/metrics_dumper.h"
#include "engine/metrics_http.h"
#include "engine/move_host.h"
#include "engine/object_index.h"
#include "base/striped_counter.h"
#include "tiers/host_block_cache.h"
#include "tiers/host_tier.h"
#include "base/thread_pool.h"
#include "spillway/file_io.h"

namespace spillway {
class Scheduler;
}

namespace spillway::internal {

class Mover;
class Demoter;
class Placement;

class EngineCore final : public Engine, public MoveHost {
 public:
  EngineCore(Config config, EngineOptions options);
  ~EngineCore() override;

  Status Init();
  // Spill event log (may be null).
  EventLog* event_log() { return event_log_.get(); }

  // Engine
  Status Put(std::string_view key, std::span<const std::span<const std::byte>> buffers,
             const PutOptions& options) override;
  using Engine::Put;
  StatusOr<Handle> Get(std::string_view key, Where where) override;
  Status PutDeviceAllocation(std::string_view key, void* device_ptr, std::vector<uint64_t> buffer_sizes,
                             std::function<void(void*)> release) override;
  Status PutHostAllocation(std::string_view key, const std::byte* data, std::vector<uint64_t> buffer_sizes,
                           std::function<void(const std::byte*)> release) override;
  Status PutExternal(std::string_view key, uint64_t accounted_bytes, std::shared_ptr<ExternalObject> object) override;
  StatusOr<std::shared_ptr<ExternalObject>> GetExternal(std::string_view key) override;
  StatusOr<std::vector<Handle>> Acquire(std::span<const std::string> keys, Where where) override;
  void Prefetch(std::span<const std::string> keys, Where where) override;
  StatusOr<std::shared_ptr<void>> AllocateDevice(uint64_t bytes) override;
  Status Erase(std::string_view key) override;
  bool Contains(std::string_view key) override;
  int TierOf(std::string_view key) override;
  Status Flush() override;
  void SetProcessMemoryLimit(uint64_t bytes) override { memory_.SetLimit(bytes); }
  bool RelieveMemory(uint64_t incoming_bytes, bool wait) override { return memory_.Relieve(incoming_bytes, wait); }
  EngineStats Stats() override;
  StatusOr<DeviceCheck> CheckDevices() override;
  std::vector<KeyInfo> ListKeys() override;
  const Config& config() const override { return config_; }

  // MoveHost: what the Mover and the Demoter use (engine/move_host.h).
  size_t num_tiers() const override { return tiers_.size(); }
  Tier& tier(size_t i) override { return *tiers_[i]; }
  ObjectIndex& index() override { return index_; }
  EvictionPolicy& policy() override { return *policy_; }
  Logger* logger() override { return options_.logger != nullptr ? options_.logger : StderrLogger(); }
  uint64_t Pressure(int t) override { return DevicePressure(t) + memory_.Pressure(t); }
  StatusOr<std::vector<BlobPtr>> LoadBatchToHost(int t, std::span<const Location> locs) override;
  bool CanAdoptHost(int t) const override;
  void SetTierLocked(Entry* e, int from, int to) override;
  void Unref(Entry* e) override;
  bool HasCleanCopies() const override { return clean_copies_.load(std::memory_order_relaxed) != 0; }
  void CountCleanDemotion() override {
    clean_copies_.fetch_sub(1, std::memory_order_relaxed);
    clean_demotions_.fetch_add(1, std::memory_order_relaxed);
  }
  void CountSyncDemotion() override { sync_demotions_.fetch_add(1, std::memory_order_relaxed); }
  void CountBackpressureWait(uint64_t ns) override {
    backpressure_waits_.fetch_add(1, std::memory_order_relaxed);
    backpressure_wait_ns_.fetch_add(ns, std::memory_order_relaxed);
  }
  BoundaryCounters& boundary(int from, int to) override { return boundaries_[from * kMaxTiers + to]; }
  void LogMove(std::string_view key, uint64_t raw, uint64_t stored, int from, int to, uint64_t micros, bool ok,
               std::string_view error = {}) override;
  uint64_t BeginDemote() override;
  void EndDemote(uint64_t ticket) override;

  // ---- used by Handle and the tests ----
  // Moves up to `bytes` out of tier `t` (LRU first) to the tiers below, on
  // the caller's thread (AllocateDevice). Returns the raw bytes moved.
  uint64_t Demote(int t, uint64_t bytes);
  Mover& mover() { return *mover_; }
  const Placement& placement() const { return *placement_; }
  void Unpin(Entry* e);
  // The gpu tier's share of Pressure: free device memory below headroom.
  // The host tier's is the memory governor's.
  uint64_t DevicePressure(int t);

  static constexpr int kMaxTiers = 16;

 private:
  // engine_read.cc: a read's pinned snapshot of an entry.
  struct PinnedRead {
    Entry* e = nullptr;
    int t = -1;
    uint64_t version = 0;
    Location loc;
    bool moving = false;
  };
  // Pins the entry of `key` (NotFound when absent) and counts the hit. With
  // `loading` non-null, an entry in a file tier that a Prefetch is reading
  // (Entry::kLoading) is not pinned or counted: *loading is set and the
  // result holds only a reference (release it with Unref).
  StatusOr<PinnedRead> PinForRead(std::string_view key, bool* loading = nullptr);
  // Finishes a pinned read: loads it (unless `loaded`, from a batch read),
  // promotes it where there is room (where policy.promote_on_read says so),
  // returns the Handle. Drops the pin on failure. `prefetch` (Prefetch's own
  // thread): it promotes whatever promote_on_read says, since bringing the
  // key up is what a Prefetch is for (without it, the read was wasted and the
  // Get that waited for it read the record again), and a full memory tier
  // makes it wait for the mover to make room (Mover::MakeRoom) instead of
  // serving the read unpromoted.
  // `read_ns`: where `loaded` came from a batch read (AcquireKeys), its
  // share of that read's time, by stored bytes, counted in the promotion's
  // boundary time as a Get's own read is.
  StatusOr<Handle> Serve(PinnedRead p, std::string_view key, Where where, BlobPtr loaded, bool prefetch = false,
                         int64_t read_ns = 0);
  // Acquire's and Prefetch's body. Keys are read and served in runs of at
  // most kReadRunBytes of file-resident data, the next run read on a helper
  // thread while one is served, so the first keys are promoted while later
  // ones are still on the disk; to the device, by one Get per key,
  // kDeviceReaders at once. kPrefetch leaves absent keys
  // out, claims each file-resident key it reads (Entry::kLoading; one
  // already claimed by another Prefetch is left to it), waits for room to
  // promote, and keeps no handles.
  enum class ReadMode { kAcquire, kPrefetch };
  StatusOr<std::vector<Handle>> AcquireKeys(std::span<const std::string> keys, Where where, ReadMode mode);
  // Clears e's kLoading claim and wakes the Gets waiting for it.
  void EndLoading(Entry* e);
  // Commits a new object into the index, replacing the key's previous one,
  // unless that one has a higher sequence (a concurrent Put that began
  // later): then the new object is the one dropped. The entry that leaves is
  // retired (its persistent record flagged erased at the next Flush).
  void Insert(std::string_view key, uint64_t raw_size, int tier, Location loc, uint64_t sequence);
  // InvalidArgument for a key longer than kMaxKeyLen (every Put* checks it).
  static Status CheckKey(std::string_view key);
  // Adopts `blob` (`bytes` accounted) into the first host tier that has, or
  // can make, room, and indexes it under `key`: PutHostAllocation and
  // PutExternal. False when no host tier takes it (`blob` is untouched).
  bool AdoptIntoHostTier(std::string_view key, const BlobPtr& blob, uint64_t bytes);
  bool persistent_file(int t) const { return t >= 0 && !tiers_[t]->is_memory() && config_.tiers[t].persistent; }
  // What a returned Flush promises, in three steps: every record written so
  // far durable (sync every file tier); then the erase marks and reclaims
  // queued before the first step (records erased, replaced or moved away:
  // their successors are now on disk); then those durable too. A failed sync
  // stops before the marks; a failed mark stays queued for the next call.
  // REQUIRES: flush_mu_.
  Status Checkpoint();
  // Runs a Checkpoint on checkpoint_pool_ (at most one queued): a persistent
  // tier's pending frees hold disk space until they are committed.
  void ScheduleCheckpoint();
  // Waits until every Demote that began before this call has finished.
  void WaitForDemotesBegunBefore(uint64_t ticket);
  StatusOr<Handle> Promote(Entry* e, int from_tier, uint64_t version, BlobPtr blob);
  int FirstHostTier() const;
  // REQUIRES: the entry's shard mutex. True when a pinned reader's snapshot
  // (tier t, version) is still current, nobody is moving the entry and, for
  // a file tier, no other reader holds a pin (it may be reading the record
  // the caller is about to free).
  bool UnchangedSince(const Entry* e, int t, uint64_t version) const;
  // REQUIRES: the entry's shard mutex and a pin held by the caller. Points the
  // entry at `loc` in tier `to` (a promotion) and returns its old location,
  // which the caller frees after unlocking.
  Location RelocatePinnedLocked(Entry* e, int from, int to, Location loc);
  int FirstGpuTier() const;
  // engine_gpu.cc: the device halves of Put and Get.
  MemoryKind ClassifyBuffers(std::span<const std::span<const std::byte>> buffers, Where declared) const;
  StatusOr<BlobPtr> CopyDeviceToHost(const ObjectView& view);
  StatusOr<Handle> ToDevice(Entry* e, int t, uint64_t version, Location loc, std::string_view key);
  void CreateGpuTier(const TierConfig& tc, int index, Status* st);
  Status OpenGpuSupport(Logger* logger);

  Config config_;
  EngineOptions options_;
  std::vector<std::unique_ptr<FileIo>> owned_io_;
  // Page-locked pool for host tiers when CUDA and a GPU are present; declared
  // before tiers_ so it outlives every blob the tiers hold.
  std::unique_ptr<HostAllocator> host_alloc_;
  // The process memory limit and what it takes to keep to it; declared
  // before host_cache_, whose budget reads the limit.
  MemoryGovernor memory_;
  // Otherwise the host tiers' (and the file tiers' read buffers') memory:
  // freed blocks kept for reuse, within the capacity of the host tiers in
  // host_cache_tiers_ (tiers/host_block_cache.h). Null when a pinned pool
  // serves every host tier, or there is no host tier.
  std::vector<int> host_cache_tiers_;
  std::unique_ptr<HostBlockCache> host_cache_;
  std::unique_ptr<ThreadPool> prefetch_pool_;
  // A Get that finds its key claimed by a Prefetch (Entry::kLoading) waits
  // here until EndLoading.
  std::mutex loading_mu_;
  std::condition_variable loading_cv_;
  std::vector<std::unique_ptr<Tier>> tiers_;
  ObjectIndex index_;
  std::unique_ptr<EvictionPolicy> policy_;
  std::unique_ptr<Placement> placement_;
  std::unique_ptr<Demoter> demoter_;
  std::unique_ptr<Scheduler> owned_scheduler_;  // when options_.scheduler is null and background_mover
  std::unique_ptr<Mover> mover_;
  std::unique_ptr<EventLog> event_log_;     // null when metrics.event_log is off
  std::unique_ptr<MetricsDumper> dumper_;   // null when metrics.prometheus_file is off
  std::unique_ptr<MetricsHttpServer> http_; // null when metrics.listen is off
  std::vector<std::pair<std::string, std::string>> metrics_labels_;  // resolved metrics.labels
  std::unique_ptr<BoundaryCounters[]> boundaries_;
  // Bumped by every Get hit and pin/unpin: striped so concurrent readers do
  // not contend on one cache line.
  std::unique_ptr<StripedCounter[]> hits_;
  std::unique_ptr<StripedCounter[]> pinned_bytes_;
  StripedCounter gets_;
  std::atomic<bool> shutting_down_{false};  // destructor running: keep persistent records
  std::atomic<uint64_t> puts_{0}, misses_{0}, erases_{0}, sync_demotions_{0};
  std::atomic<uint64_t> backpressure_waits_{0}, backpressure_wait_ns_{0};
  // Entries holding a clean copy (Entry::clean_tier), and demotions that
  // went back to one instead of writing.
  std::atomic<uint64_t> clean_copies_{0}, clean_demotions_{0};
  // Next version sequence (Put); Init starts it above every recovered record.
  std::atomic<uint64_t> next_sequence_{1};
  std::mutex flush_mu_;  // serializes Flush and background checkpoints (their steps must not interleave)
  std::unique_ptr<ThreadPool> checkpoint_pool_;  // one thread: ScheduleCheckpoint
  std::atomic<bool> checkpoint_queued_{false};
  std::atomic<bool> closing_{false};  // destructor: no more background checkpoints
  std::mutex demote_mu_;  // guards demotes_, demote_tickets_
  std::condition_variable demote_cv_;
  std::set<uint64_t> demotes_;  // tickets of the demotions in flight (BeginDemote)
  uint64_t demote_tickets_ = 0;
};

}  // namespace spillway::internal
