// Tier: one level of the chain (gpu, host or file). Non-virtual public
// methods do accounting and statistics once; subclasses implement *Impl.
//
// Capacity is managed by reservation: the engine reserves bytes before it
// stores an object (TryReserve), so concurrent writers never overfill a tier.
// A stored object's bytes stay reserved until its Location is freed (file
// tiers) or its Blob is destroyed (memory tiers).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spillway/config.h"
#include "spillway/status.h"
#include "tiers/blob.h"
#include "tiers/record.h"

namespace spillway {

class FileIo;

// Where an object lives inside a tier; fields used depend on the tier kind.
struct Location {
  BlobPtr blob;              // memory tiers
  uint32_t stripe = 0;       // file tiers: which path
  uint32_t segment = 0;      //   segment file id within the stripe
  uint64_t offset = 0;       //   record offset in the segment
  uint64_t length = 0;       //   record length (padded)
  uint64_t stored_bytes = 0; // bytes this object holds in the tier's accounting
  uint64_t raw_bytes = 0;    // the object's raw size
};

// Monotonic counters; read with relaxed loads for statistics.
struct TierCounters {
  std::atomic<uint64_t> objects{0};
  std::atomic<uint64_t> raw_bytes{0};      // sum of raw sizes of live objects
  std::atomic<uint64_t> bytes_written{0};  // stored bytes written (file) / copied in (memory)
  std::atomic<uint64_t> bytes_read{0};     // stored bytes read back
  std::atomic<uint64_t> raw_bytes_written{0};
  std::atomic<uint64_t> reads{0};
  std::atomic<uint64_t> writes{0};
  std::atomic<uint64_t> checksum_failures{0};
  std::atomic<uint64_t> io_errors{0};
  // Raw bytes of objects stored or adopted here, and of objects and clean
  // copies freed here, ever: a host tier's memory taken and given back
  // (EngineCore::ResidentBytes).
  std::atomic<uint64_t> admitted_raw_bytes{0};
  std::atomic<uint64_t> freed_raw_bytes{0};
};

class Tier : public BlobAccount {
 public:
  Tier(TierConfig config, int index) : config_(std::move(config)), index_(index) {}
  ~Tier() override = default;
  Tier(const Tier&) = delete;
  Tier& operator=(const Tier&) = delete;

  const TierConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }
  TierKind kind() const { return config_.kind; }
  int index() const { return index_; }
  bool is_memory() const { return config_.kind != TierKind::kFile; }
  virtual bool Accepts(MemoryKind kind) const = 0;

  // ---- capacity ----------------------------------------------------------
  uint64_t capacity_bytes() const { return config_.capacity_bytes; }
  uint64_t used_bytes() const { return used_.load(std::memory_order_relaxed); }
  // Atomically adds `bytes` if the tier stays within capacity and is not
  // marked full (unless `ignore_full_mark`: a probe after a recent ENOSPC).
  bool TryReserve(uint64_t bytes, bool ignore_full_mark = false);
  // The device reported ENOSPC: refuse reservations for `seconds`, so the
  // chain falls through to the next tier instead of failing again.
  void MarkFull(double seconds = 1.0);
  bool marked_full() const;
  // Adds `bytes` even past capacity (small overshoot after encoding).
  void ForceReserve(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void Unreserve(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  bool AboveHigh() const { return used_bytes() > HighBytes(); }
  uint64_t HighBytes() const { return static_cast<uint64_t>(config_.watermarks.high * capacity_bytes()); }
  uint64_t LowBytes() const { return static_cast<uint64_t>(config_.watermarks.low * capacity_bytes()); }
  // Bytes to demote to get down to the low watermark (0 when already there).
  uint64_t ExcessOverLow() const {
    uint64_t u = used_bytes(), low = LowBytes();
    return u > low ? u - low : 0;
  }
  // Bytes a Store of `object` reserves before it is encoded (an upper bound).
  virtual uint64_t ReserveEstimate(const ObjectView& object) const = 0;
  // Whether `bytes` more can be written without eating into the device's
  // reserved free space (a file tier's min_free); memory tiers: always.
  virtual bool HasDeviceRoom(uint64_t bytes) const {
    (void)bytes;
    return true;
  }

  // ---- data --------------------------------------------------------------
  // Stores every object (space already reserved with ReserveEstimate each) and
  // returns their locations; on failure nothing is stored. Adjusts the
  // reservation to the bytes actually stored.
  StatusOr<std::vector<Location>> Store(std::span<const ObjectView> objects);
  // The same with each object's reservation as the caller computed it
  // (Placement): the estimate is computed once and carried, not recomputed.
  StatusOr<std::vector<Location>> Store(std::span<const ObjectView> objects, std::span<const uint64_t> reserved);
  // Reads an object back as host memory, checksum verified and decoded.
  // The host tier returns its own Blob (no copy); a gpu tier returns a host
  // copy (batched loads: GpuTier::LoadToHost).
  StatusOr<BlobPtr> Load(const Location& loc, std::string_view key);
  // Reads several objects; one result per location. A file tier issues all
  // their reads as one batch at its queue depth.
  std::vector<StatusOr<BlobPtr>> LoadBatch(std::span<const Location> locs, std::span<const std::string_view> keys);
  // Takes ownership of a host blob read from a lower tier (promotion) without
  // copying; `reserved` bytes were reserved by the caller.
  StatusOr<Location> Adopt(BlobPtr blob, uint64_t reserved);
  // The object at `loc` no longer holds its key's current value (erased or
  // replaced) though a reader may still hold it: a persistent tier flags the
  // record erased on disk at its next commit (FileTier::CommitFrees). Free
  // must still follow.
  void Retire(const Location& loc) { RetireImpl(loc); }
  // Releases the object's space.
  void Free(Location& loc);
  // A record kept as a clean copy of an object that now lives in a tier
  // above: its space stays used, but it no longer counts as one of this
  // tier's objects (KeepAsCopy) until it serves the object again
  // (ServeFromCopy) or is released (FreeCopy).
  void KeepAsCopy(uint64_t raw_bytes);
  void ServeFromCopy(uint64_t raw_bytes);
  void FreeCopy(Location& loc);
  // Makes everything stored so far durable (file tiers).
  Status Sync() { return SyncImpl(); }
  // Frees memory the tier keeps only to go faster (idle I/O buffers); the
  // engine calls it when the process is above its memory limit.
  virtual void ReleaseCachedMemory() {}
  // The engine is closing: it frees every object it holds here next, and
  // nothing is stored or read after. A scratch file tier then skips freeing
  // each record's blocks and removes its segment files whole when it is
  // destroyed (SegmentManager, segment_manager.cc).
  virtual void BeginClose() {}

  const TierCounters& counters() const { return counters_; }
  TierCounters& mutable_counters() { return counters_; }

  // BlobAccount: a memory tier's Blob was destroyed.
  void OnBlobFreed(uint64_t bytes) override { Unreserve(bytes); }

 protected:
  virtual StatusOr<std::vector<Location>> StoreImpl(std::span<const ObjectView> objects) = 0;
  virtual StatusOr<BlobPtr> LoadImpl(const Location& loc, std::string_view key) = 0;
  // Default: LoadImpl one location after another.
  virtual std::vector<StatusOr<BlobPtr>> LoadBatchImpl(std::span<const Location> locs,
                                                       std::span<const std::string_view> keys);
  virtual StatusOr<Location> AdoptImpl(BlobPtr blob, uint64_t reserved);
  virtual void FreeImpl(Location& loc) = 0;
  virtual void RetireImpl(const Location&) {}
  virtual Status SyncImpl() { return Status::OK(); }

  TierCounters counters_;

 private:
  const TierConfig config_;
  const int index_;
  std::atomic<uint64_t> used_{0};
  std::atomic<int64_t> full_until_ns_{0};  // steady_clock time until which the tier counts as full
};

}  // namespace spillway
