// MoveHost: what the Mover and the Demoter may use of the engine they serve
// (EngineCore implements it), as CacheLib's BackgroundMover reaches its cache
// only through a wrapper. The move protocol needs the chain, the index and
// the eviction policy, a few entry operations under the index's locks, and
// somewhere to count and log what moved; nothing else of the engine.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engine/eviction_policy.h"
#include "engine/object_index.h"
#include "spillway/stats.h"
#include "spillway/status.h"
#include "tiers/tier.h"

namespace spillway {
class Logger;
}

namespace spillway::internal {

// One boundary's moves (tier `from` -> tier `to`, either direction): what
// Stats reports for it.
struct BoundaryCounters {
  std::atomic<uint64_t> objects{0}, bytes{0}, stored_bytes{0}, nanos{0}, failures{0}, retries{0};
  std::atomic<uint64_t> latency_us[kLatencyBuckets] = {};
  void Record(uint64_t objs, uint64_t raw, uint64_t stored, uint64_t ns);
};

class MoveHost {
 public:
  virtual ~MoveHost() = default;

  // The chain, fastest first; fixed once the engine is open.
  virtual size_t num_tiers() const = 0;
  virtual Tier& tier(size_t i) = 0;
  virtual ObjectIndex& index() = 0;
  virtual EvictionPolicy& policy() = 0;
  // Where a move's warnings go (EngineOptions::logger, else stderr).
  virtual Logger* logger() = 0;

  // Bytes to demote from tier t beyond its watermarks: device memory taken
  // outside the engine (a gpu tier's headroom) or this process's resident
  // memory above Engine::SetProcessMemoryLimit (a host tier). The mover asks
  // at every tick and at WaitIdle.
  virtual uint64_t Pressure(int t) = 0;

  // Copies the objects at `locs` of gpu tier t to fresh host memory, as one
  // batch.
  virtual StatusOr<std::vector<BlobPtr>> LoadBatchToHost(int t, std::span<const Location> locs) = 0;
  // Whether tier t takes host memory as it is (Tier::Adopt) rather than a
  // copy.
  virtual bool CanAdoptHost(int t) const = 0;

  // REQUIRES: the entry's shard mutex. Moves the entry (its tier, the tier
  // its pins count against, its policy list) from tier `from` to `to` and
  // bumps its version.
  virtual void SetTierLocked(Entry* e, int from, int to) = 0;
  // Drops a reference; the last one frees the entry's copies.
  virtual void Unref(Entry* e) = 0;

  // Whether any entry holds a clean copy (Entry::clean_tier) now.
  virtual bool HasCleanCopies() const = 0;
  // A demotion that went back to an entry's clean copy instead of writing:
  // the copy is the entry's location now.
  virtual void CountCleanDemotion() = 0;
  // A demotion a caller ran on its own thread (no background mover).
  virtual void CountSyncDemotion() = 0;
  // A caller that waited `ns` for room in a tier.
  virtual void CountBackpressureWait(uint64_t ns) = 0;
  virtual BoundaryCounters& boundary(int from, int to) = 0;
  // One move for the event log. `error`: why a failed move was abandoned
  // (Status::ToString()).
  virtual void LogMove(std::string_view key, uint64_t raw, uint64_t stored, int from, int to, uint64_t micros,
                       bool ok, std::string_view error = {}) = 0;

  // A demotion in flight, between the two calls: Engine::Flush waits for the
  // demotions that began before it, so the copy an aborted move wrote (of
  // an object erased meanwhile) is freed before Flush commits the erase
  // marks. Use DemoteScope.
  virtual uint64_t BeginDemote() = 0;
  virtual void EndDemote(uint64_t ticket) = 0;
};

// Marks a demotion in flight for its lifetime (MoveHost::BeginDemote).
class DemoteScope {
 public:
  explicit DemoteScope(MoveHost& host) : host_(host), ticket_(host.BeginDemote()) {}
  ~DemoteScope() { host_.EndDemote(ticket_); }
  DemoteScope(const DemoteScope&) = delete;
  DemoteScope& operator=(const DemoteScope&) = delete;

 private:
  MoveHost& host_;
  const uint64_t ticket_;
};

}  // namespace spillway::internal
