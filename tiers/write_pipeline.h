// WritePipeline: a file tier's write path. A Store's objects are grouped into
// slabs of records, each encoded into a reused buffer and written with up to
// io.queue_depth requests of io.block_bytes in flight; the slabs of one Store
// go to the pipeline's writer threads, so encoding one overlaps writing
// another, and reach each path's disk kSlabWritesOnDisk at a time, in the
// order they were encoded. An object too large for a slab (codec none) is
// streamed instead: its record is copied into a few reused piece buffers,
// each piece written as soon as it is full, several in flight, its header
// block last, once the payload checksum is known. A record is published
// (SegmentManager::Publish) only after its bytes are on disk.
//
// It owns the writer threads, the slab and piece buffers, the per-path turn
// of slab writes and the counter that numbers records stored without a
// sequence; the space comes from the SegmentManager.
//
// Thread-safety: Store may run on any number of threads at once. The buffer
// caches and PieceBuffers lock themselves; the turn is a FifoGate per path.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "base/fifo_gate.h"
#include "base/thread_pool.h"
#include "spillway/config.h"
#include "spillway/file_io.h"
#include "tiers/io_buffer_cache.h"
#include "tiers/record_encoder.h"
#include "tiers/segment_manager.h"
#include "tiers/tier.h"

namespace spillway {

class WritePipeline {
 public:
  // `config` (the tier's), `io`, `segments` and `encoder` must outlive the
  // pipeline. `release` frees a record it wrote (FileTier::FreeImpl): a
  // Store that fails stores nothing.
  WritePipeline(const TierConfig& config, FileIo* io, SegmentManager* segments, const RecordEncoder* encoder,
                std::function<void(Location&)> release);
  // Waits for the writers: each thread pool finishes its queue first.
  ~WritePipeline();
  WritePipeline(const WritePipeline&) = delete;
  WritePipeline& operator=(const WritePipeline&) = delete;

  // Writes every object and returns their locations; on failure nothing is
  // stored (the records already written are released) and the first error
  // is returned.
  StatusOr<std::vector<Location>> Store(std::span<const ObjectView> objects);

  // Next sequence number for records stored without one (ObjectView::sequence 0).
  void set_next_sequence(uint64_t seq) { sequence_.store(seq); }
  uint64_t next_sequence() const { return sequence_.load(); }
  // Frees the idle slab and piece buffers (under process memory pressure).
  void ReleaseCachedMemory();
  // Idle slab buffers kept for reuse (tests, stats).
  size_t idle_buffers() const { return slab_buffers_.idle(); }

 private:
  // Slab writes on one path's disk at once (slab_writes_).
  static constexpr int kSlabWritesOnDisk = 2;
  struct Slab;
  class PieceBuffers;

  const std::string& name() const { return config_.name; }
  // Encodes and writes one slab; fills its locations.
  Status WriteSlab(Slab& slab, std::span<const ObjectView> objects, std::vector<Location>& out);
  // Writes a slab's single large object piece by piece (codec none).
  Status WriteStreamed(Slab& slab, std::span<const ObjectView> objects, std::vector<Location>& out);

  const TierConfig& config_;
  FileIo* const io_;
  SegmentManager* const segments_;
  const RecordEncoder* const encoder_;
  const std::function<void(Location&)> release_;
  // Slab encode buffers, shared by the writer threads (io_buffer_cache.h);
  // declared before the thread pools, which give buffers back until they stop.
  IoBufferCache slab_buffers_{4, 64ull << 20};
  // Slab writes (WriteSlab) go to each path's disk kSlabWritesOnDisk at a
  // time, in the order their encoding finished, so one batch finishes every
  // few milliseconds and the next starts as it does. Let all in at once, the
  // demotion batches a full tier starts together shared the disk, finished
  // together, and the disk idled until the high watermark started the next
  // ones (docs/performance.md#tuning-constants-file-tier). One per stripe.
  std::vector<std::unique_ptr<FifoGate>> slab_writes_;
  std::atomic<uint64_t> sequence_{1};
  std::unique_ptr<ThreadPool> pool_;        // slab writes (they may wait on piece_pool_)
  std::unique_ptr<PieceBuffers> pieces_;    // streamed writes' buffers
  std::unique_ptr<ThreadPool> piece_pool_;  // writes one streamed piece each; never waits on a task
};

}  // namespace spillway
