// FileTier: objects as checksummed records packed into segment files on one
// or more directories (striped), written through FileIo (io_uring, O_DIRECT).
//
// Write path (write_pipeline.h): a Store encodes its objects into 4 KiB-
// aligned slabs; slabs are encoded and written by a worker pool so encoding
// one overlaps writing the previous, with up to io.queue_depth requests of io.block_bytes in flight.
// An object too large for a slab (codec none) is streamed instead: its record
// is copied into a few reused piece buffers and each piece is written as soon
// as it is full, several in flight, so a 64 MiB object neither waits for its
// whole encoding nor faults in a fresh 64 MiB buffer; its header block goes
// last, once the payload checksum is known. A Location is published only
// after its bytes are on disk. Two streamed writes at once take the piece
// buffers in the order they started, and the second sends at most its first
// few pieces to the disk before the first one's header is written, so the
// first finishes (and frees its source) first.
//
// Read path (file_tier_read.cc): a large raw record is read as several
// requests in flight through a reused ring buffer, each piece hashed and
// copied into the object's blob as soon as it arrives, so verification
// overlaps the I/O; nothing is served before the whole record verified. A
// batch (LoadBatch) reads its small records' windows in one submission and
// its large raw records that way, one by one.
//
// Freeing a record punches its blocks in the background; Sync and
// allocated_bytes() wait for the punches queued before them. On a
// persistent tier, freeing and retiring are deferred: the erase mark (the
// flag in the record's header that makes recovery skip it), the punch and the
// deletion of an emptied segment happen only in CommitFrees, which the engine
// calls after it synced every tier, so no record is flagged erased or punched
// on disk before the record that superseded it is durable.
//
// The segment files, their space and frees, the manifest and recovery's
// bookkeeping are the SegmentManager's (segment_manager.h), the write path
// the WritePipeline's; this class keeps the Tier interface, the record
// encoder and the read path, and composes the two.
//
// Thread-safety: every method may be called concurrently. The segment
// manager and the write pipeline guard their own state; the readers share
// only the read-buffer cache (which locks itself) and a counter.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "base/tier_files.h"
#include "tiers/host_tier.h"
#include "tiers/io_buffer_cache.h"
#include "tiers/record_encoder.h"
#include "tiers/segment_manager.h"
#include "tiers/tier.h"
#include "tiers/write_pipeline.h"

namespace spillway {

// The aligned window [*start, *end) that a read of the record at
// [offset, offset + length) uses (file_tier_read.cc): kIoAlign blocks, or
// `fine_align` units (the file's FileHandle::read_align) where that window is
// at most three quarters as long.
void ReadWindowBounds(uint64_t offset, uint64_t length, uint64_t fine_align, uint64_t* start, uint64_t* end);

class FileTier : public Tier {
 public:
  // `io` must outlive the tier. `host_alloc` (may be null) provides memory for
  // objects read back, so they can be promoted without a copy.
  FileTier(TierConfig config, int index, FileIo* io, HostAllocator* host_alloc);
  ~FileTier() override;

  // Creates the directories and locks each (kLockName: one engine per
  // directory, Busy naming the holder's pid otherwise); wipes old segments of
  // a scratch tier, but never a directory of persistent records (it has a
  // MANIFEST) unless wipe_persistent, and never a file that is not a regular
  // file. A persistent tier keeps them: call Recover next.
  Status Open();
  // Scans every segment of a persistent tier, verifying each record, and
  // reports every valid record through `found`. Corrupt or torn records are
  // skipped and counted in `*skipped` with a message in `*report`; records
  // the manifest says the last Flush left but that are gone (a zeroed block,
  // a truncation) are counted in `*missing` (may be null), also reported.
  // A read error fails with nothing deleted (the caller must not open the
  // tier). Writes a fresh manifest, then deletes segments with nothing in them.
  Status Recover(const std::function<void(RecoveredObject&&)>& found, uint64_t* skipped,
                 std::string* report, uint64_t* missing = nullptr);

  bool Accepts(MemoryKind kind) const override { return kind != MemoryKind::kDevice; }
  uint64_t ReserveEstimate(const ObjectView& object) const override;
  // min_free: some path keeps its reserved free space after `bytes` more.
  bool HasDeviceRoom(uint64_t bytes) const override { return segments_->HasDeviceRoom(bytes); }
  bool direct_io() const { return segments_->direct_io(); }
  // Number of segment files across all stripes.
  size_t segment_count() const { return segments_->segment_count(); }
  // Bytes allocated on disk across all segments (st_blocks).
  uint64_t allocated_bytes() const { return segments_->allocated_bytes(); }
  // Next sequence number for records stored without one (ObjectView::sequence
  // 0); after Recover, one more than the highest recovered.
  void set_next_sequence(uint64_t seq) { pipeline_->set_next_sequence(seq); }
  uint64_t next_sequence() const { return pipeline_->next_sequence(); }
  // Frees the idle I/O buffers the tier keeps for reuse (slab, read and
  // streamed-piece buffers): under process memory pressure.
  void ReleaseCachedMemory() override;
  void BeginClose() override { segments_->BeginClose(); }
  // Idle buffers the tier keeps for reuse (tests, stats).
  size_t idle_io_buffers() const { return pipeline_->idle_buffers() + read_buffers_.idle(); }

  // fdatasyncs every dirty segment and fsyncs the directories; commits no
  // frees. Sync() is this on a scratch tier; on a persistent one it is
  // PrepareFrees, SyncData, CommitFrees, SyncData (for a tier used alone: the
  // engine runs those steps across all its tiers itself, see Flush).
  Status SyncData() { return segments_->SyncData(); }

  // ---- deferred frees (persistent tiers) ----
  // Takes every free and retirement queued so far for the next CommitFrees.
  // The caller then syncs every tier of the chain, so the records that
  // superseded them are durable, and calls CommitFrees.
  void PrepareFrees() { segments_->PrepareFrees(); }
  // Writes the erase marks and reclaims the space (punch, emptied segments)
  // of what PrepareFrees took. A mark that cannot be written stays queued for
  // the next commit and its error is returned. `*wrote` is set when anything
  // reached the disk (the caller syncs again).
  Status CommitFrees(bool* wrote);
  // Bytes of records freed or retired and not yet committed.
  uint64_t pending_free_bytes() const { return segments_->pending_free_bytes(); }
  // Called (without locks held) when the pending frees pass an eighth of the
  // capacity, so the owner commits them before they hold much disk space.
  void set_on_pending_frees(std::function<void()> f) { segments_->set_on_pending_frees(std::move(f)); }

 protected:
  StatusOr<std::vector<Location>> StoreImpl(std::span<const ObjectView> objects) override;
  StatusOr<BlobPtr> LoadImpl(const Location& loc, std::string_view key) override;
  std::vector<StatusOr<BlobPtr>> LoadBatchImpl(std::span<const Location> locs,
                                               std::span<const std::string_view> keys) override;
  void FreeImpl(Location& loc) override;
  void RetireImpl(const Location& loc) override;
  Status SyncImpl() override;

 private:
  struct ReadWindow;

  // file_tier_read.cc: a record's aligned read window (LocateRead: its
  // segment and bounds), then its memory and requests (PrepareRead, on a
  // located window: into `buffer`, the caller's, kIoAlign-aligned and at
  // least the window's length, else into a buffer from read_buffers_ or,
  // above its largest, one of its own); verifying and decoding it once read.
  Status LocateRead(const Location& loc, ReadWindow* w) const;
  Status PrepareRead(const Location& loc, std::byte* buffer, ReadWindow* w, std::vector<IoRequest>* reqs) const;
  StatusOr<BlobPtr> FinishRead(const Location& loc, std::string_view key, const ReadWindow& w,
                               std::span<const IoRequest> reqs);
  // A raw record read as several requests in flight, each piece verified and
  // copied out as it arrives. Sets `*fallback` (nothing served) when the
  // record must be read whole instead (compressed, or tables larger than a piece).
  StatusOr<BlobPtr> LoadStreamed(const Location& loc, std::string_view key, bool* fallback);
  std::string Where(const Location& loc) const { return segments_->Where(loc); }

  FileIo* io_;
  HostAllocator* host_alloc_;
  // Reads: a buffer for each of several readers at once (a Get of a 1 MiB
  // object reads through a 2 MiB one), 32 MiB at most. With two kept, the
  // bench's four readers mapped and faulted in fresh 2 MiB pages on half
  // their Gets.
  mutable IoBufferCache read_buffers_{8, 16ull << 20, 32ull << 20};  // PrepareRead is const
  // Streamed reads (LoadStreamed) running now: they share one ring budget.
  std::atomic<uint32_t> streamed_reads_{0};
  const RecordEncoder encoder_;  // the codec and its settings (min_savings, chunk size)
  // Declared in this order: the pipeline writes into the segments, and goes first.
  std::unique_ptr<SegmentManager> segments_;
  std::unique_ptr<WritePipeline> pipeline_;
};

}  // namespace spillway
