// SegmentManager: a file tier's segment files, one stripe per path. It owns
// the segment table and the append offset of each stripe's active segment,
// the reclaiming of freed records (hole punches on a background thread,
// deletion of emptied sealed segments), a persistent tier's deferred frees
// (erase marks written only in CommitFrees), the segment manifest, the
// reserved free space of each path (min_free), and recovery's bookkeeping of
// the segments found at Open. It knows records only by position and length:
// FileTier encodes, writes (WritePipeline) and reads them.
//
// A write takes space with Reserve, writes its bytes, then Publish makes each
// record count (live, and in the next manifest); a failed write gives its
// space back with AbandonWrite.
//
// Thread-safety: every method may be called concurrently, except Open and
// Recover (before any other use). Each stripe's mutex guards its segment
// table, active segment and next id, and each Segment's end/sealed/allocated;
// no I/O runs under it except creating and preallocating a segment file and
// recreating a scratch directory removed under the tier.
// frees_mu_ guards the queued frees.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/thread_pool.h"
#include "spillway/config.h"
#include "spillway/file_io.h"
#include "spillway/status.h"
#include "tiers/segment.h"
#include "tiers/tier.h"

namespace spillway {

// One record found while scanning a persistent tier at open.
struct RecoveredObject {
  std::string key;
  uint64_t sequence = 0;
  bool engine_sequence = false;  // kFlagEngineSequence: `sequence` orders records across tiers
  Location location;
};

class SegmentManager {
 public:
  // `config` (the tier's) and `io` must outlive the manager.
  SegmentManager(const TierConfig& config, FileIo* io);
  // Waits for the queued punches; a closing scratch tier then deletes its
  // segments that hold no live record, the active one included.
  ~SegmentManager();
  SegmentManager(const SegmentManager&) = delete;
  SegmentManager& operator=(const SegmentManager&) = delete;

  // FileTier::Open: creates, checks and locks each directory; wipes a
  // scratch tier's old segments.
  Status Open();
  // FileTier::Recover: scans every segment of a persistent tier, adds those
  // holding records to the table and reports each valid record through
  // `found` (counted live here). Nothing is deleted before every segment was
  // read; then the manifest is written and emptied segments deleted.
  Status Recover(const std::function<void(RecoveredObject&&)>& found, uint64_t* skipped,
                 std::string* report, uint64_t* missing);

  // ---- writes ----
  // The stripe a write of `len` bytes goes to: round robin, skipping paths
  // at their reserved free space (NoSpace when every path is).
  StatusOr<uint32_t> PickStripe(uint64_t len);
  // min_free: some path keeps its reserved free space after `bytes` more.
  bool HasDeviceRoom(uint64_t bytes) const;
  // Reserves `len` bytes for `records` records in a stripe's active segment
  // (sealing it and starting a new one when full); `*offset` is where they go.
  Status Reserve(uint32_t stripe, uint64_t len, int64_t records, SegmentPtr* seg, uint64_t* offset);
  // A record at `offset` is on disk: fills its location, counts it live.
  void Publish(uint32_t stripe, Segment& seg, uint64_t offset, uint64_t length, Location* loc);
  // A write of `records` records at [base, base+len) failed: erases the
  // range, releases the records' reservation and returns `st` in context.
  Status AbandonWrite(uint32_t stripe, const SegmentPtr& seg, uint64_t base, uint64_t len, int64_t records,
                      const Status& st);

  // ---- reads ----
  // Null when the segment is gone.
  SegmentPtr Find(uint32_t stripe, uint32_t id) const;
  // "tier 'x' file DIR/seg-N.spw offset O", for messages.
  std::string Where(const Location& loc) const;

  // ---- frees ----
  // A record's space back: at once on a scratch tier; on a persistent one at
  // the CommitFrees after the next PrepareFrees (file_tier.h).
  void Free(const Location& loc);
  // A persistent tier flags the record erased at the next commit.
  void Retire(const Location& loc);
  void PrepareFrees();
  // `*failures` counts the frees that could not be written (queued again).
  Status CommitFrees(bool* wrote, uint64_t* failures);
  uint64_t pending_free_bytes() const { return pending_free_bytes_.load(std::memory_order_relaxed); }
  void set_on_pending_frees(std::function<void()> f) { on_pending_frees_ = std::move(f); }
  // A scratch tier punches nothing more; its segments go whole at destruction.
  void BeginClose() { closing_.store(true, std::memory_order_relaxed); }

  // ---- durability and inspection ----
  // fdatasyncs every dirty segment, writes a due manifest (persistent) and
  // fsyncs the directories, after the punches queued before it.
  Status SyncData();
  bool direct_io() const { return direct_io_; }
  uint32_t stripe_count() const { return static_cast<uint32_t>(stripes_.size()); }
  size_t segment_count() const;
  // Bytes allocated on disk across all segments, after the queued punches.
  uint64_t allocated_bytes() const;

 private:
  struct Stripe {
    std::string dir;
    std::mutex mu;  // guards segments, active, next_id and each Segment's end/sealed
    std::unordered_map<uint32_t, SegmentPtr> segments;
    SegmentPtr active;
    uint32_t next_id = 1;
    FileHandle lock;  // kLockName, held while the tier is open
    // A record was published or a segment deleted since the last manifest.
    std::atomic<bool> manifest_dirty{false};
    // min_free (segment_manager_space.cc): free space as last measured less
    // the bytes reserved since, the reserve, and when it was measured.
    std::atomic<int64_t> free_bytes{INT64_MAX};
    std::atomic<uint64_t> reserve_bytes{0};
    std::atomic<int64_t> checked_ns{0};
  };
  struct PendingFree {
    enum Kind : uint8_t { kMark, kReclaim, kAbandon };  // ordered: kReclaim includes kMark
    uint32_t stripe;
    uint32_t segment;
    uint64_t offset;
    uint64_t length;
    Kind kind;
  };

  const std::string& name() const { return config_.name; }
  StatusOr<SegmentPtr> NewSegmentLocked(Stripe& s);
  void MaybeDeleteSegment(uint32_t stripe, const SegmentPtr& seg);
  // Frees [offset, offset + len) of `seg` on the punch worker.
  void QueuePunch(uint32_t stripe, SegmentPtr seg, uint64_t offset, uint64_t len);
  // Waits for the punches queued so far.
  void DrainPunches() const;
  void QueueFree(const PendingFree& p);
  // Persistent tiers: flags the record erased on disk so recovery skips it
  // (a header already flagged, or no longer this record's, is left alone).
  Status MarkErased(Segment& seg, const PendingFree& p);
  // Makes [offset, offset+len) unreadable: punched, or zeroed where the
  // filesystem cannot punch.
  Status EraseRange(const Segment& seg, uint64_t offset, uint64_t len);
  // A record's space back: live counts, the punch, an emptied sealed segment.
  void Reclaim(uint32_t stripe, const SegmentPtr& seg, uint64_t offset, uint64_t length);
  // segment_manager_space.cc
  bool HasMinFree() const;
  void RefreshSpace(Stripe& s) const;
  bool StripeHasRoom(Stripe& s, uint64_t bytes) const;
  Status CheckDirectory(const std::string& dir) const;
  Status LockDirectory(Stripe& s);
  Status WipeScratch(Stripe& s);
  // REQUIRES: s.mu held, or no other thread using the stripe.
  Status RecreateScratchDir(Stripe& s);

  const TierConfig& config_;
  FileIo* const io_;
  std::vector<std::unique_ptr<Stripe>> stripes_;
  std::atomic<uint32_t> next_stripe_{0};
  std::unique_ptr<ThreadPool> punch_pool_;  // one thread: hole punching off the caller's path
  std::atomic<bool> closing_{false};        // BeginClose: a scratch tier punches nothing more
  std::atomic<size_t> queued_punches_{0};
  bool direct_io_ = true;
  std::once_flag buffered_warning_;
  std::mutex frees_mu_;  // guards queued_frees_, ready_frees_
  std::vector<PendingFree> queued_frees_;  // since the last PrepareFrees
  std::vector<PendingFree> ready_frees_;   // taken by PrepareFrees (or failed) for CommitFrees
  std::atomic<uint64_t> pending_free_bytes_{0};
  std::function<void()> on_pending_frees_;  // set before use (engine Init)
};

}  // namespace spillway
