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
#include <memory>
#include <vector>

#include "spillway/engine.h"
#include "engine/event_log.h"
#include "engine/eviction_policy.h"
#include "engine/metrics_dumper.h"
#include "engine/metrics_http.h"
#include "engine/object_index.h"
#include "base/striped_counter.h"
#include "tiers/host_tier.h"
#include "base/thread_pool.h"
#include "spillway/file_io.h"

namespace spillway::internal {

class Mover;

struct BoundaryCounters {
  std::atomic<uint64_t> objects{0}, bytes{0}, stored_bytes{0}, nanos{0}, failures{0}, retries{0};
  std::atomic<uint64_t> latency_us[kLatencyBuckets] = {};
  void Record(uint64_t objs, uint64_t raw, uint64_t stored, uint64_t ns);
};

class EngineCore final : public Engine {
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
  StatusOr<std::vector<Handle>> Acquire(std::span<const std::string> keys, Where where) override;
  void Prefetch(std::span<const std::string> keys, Where where) override;
  StatusOr<std::shared_ptr<void>> AllocateDevice(uint64_t bytes) override;
  Status Erase(std::string_view key) override;
  bool Contains(std::string_view key) override;
  Status Flush() override;
  EngineStats Stats() override;
  const Config& config() const override { return config_; }

  // ---- used by Mover and Handle ----
  size_t num_tiers() const { return tiers_.size(); }
  Tier& tier(size_t i) { return *tiers_[i]; }
  ObjectIndex& index() { return index_; }
  EvictionPolicy& policy() { return *policy_; }
  // Moves up to `bytes` out of tier `t` (LRU first) to the tiers below.
  // Returns the raw bytes moved. Called by the mover and, under backpressure,
  // by Put/Get on their own thread.
  uint64_t Demote(int t, uint64_t bytes);
  void Unpin(Entry* e);
  void Unref(Entry* e);
  BoundaryCounters& boundary(int from, int to) { return boundaries_[from * kMaxTiers + to]; }
  // Bytes to demote from gpu tier t because free device memory is below its
  // headroom (memory taken outside the engine). 0 for other tiers.
  uint64_t DevicePressure(int t);
  // Reserves `estimate` bytes in tier t, demoting synchronously if needed.
  bool ReserveWithBackpressure(int t, uint64_t estimate);

  static constexpr int kMaxTiers = 16;

 private:
  // Commits a new object into the index (replacing any previous one).
  void Insert(std::string_view key, uint64_t raw_size, int tier, Location loc);
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
  // REQUIRES: the entry's shard mutex. Moves the entry (its tier, the tier
  // its pins count against, its policy list) from tier `from` to `to` and
  // bumps its version.
  void SetTierLocked(Entry* e, int from, int to);
  int FirstGpuTier() const;
  // engine_gpu.cc: the device halves of Put and Get.
  MemoryKind ClassifyBuffers(std::span<const std::span<const std::byte>> buffers, Where declared) const;
  StatusOr<BlobPtr> CopyDeviceToHost(const ObjectView& view);
  StatusOr<Handle> ToDevice(Entry* e, int t, uint64_t version, Location loc, std::string_view key);
  StatusOr<std::vector<BlobPtr>> LoadBatchToHost(int t, std::span<const Location> locs);
  bool CanAdoptHost(int t) const;
  void CreateGpuTier(const TierConfig& tc, int index, Status* st);
  Status OpenGpuSupport();
  void LogMove(std::string_view key, uint64_t raw, uint64_t stored, int from, int to, uint64_t micros, bool ok);

  Config config_;
  EngineOptions options_;
  std::vector<std::unique_ptr<FileIo>> owned_io_;
  // Page-locked pool for host tiers when CUDA and a GPU are present; declared
  // before tiers_ so it outlives every blob the tiers hold.
  std::unique_ptr<HostAllocator> host_alloc_;
  std::unique_ptr<ThreadPool> prefetch_pool_;
  std::vector<std::unique_ptr<Tier>> tiers_;
  ObjectIndex index_;
  std::unique_ptr<EvictionPolicy> policy_;
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
};

}  // namespace spillway::internal
