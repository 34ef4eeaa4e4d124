// WritePipeline: grouping a Store's objects into slabs, the slab and
// streamed write paths, and the buffers they reuse. See write_pipeline.h.
#include "tiers/write_pipeline.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <set>

#include "base/align.h"

namespace spillway {
namespace {

// Slabs small enough that several are in flight at once (each worker keeps
// slab/block requests queued), large enough to amortize a submission.
constexpr uint64_t kSlabBytes = 8ull << 20;
// A slab of several records may grow to this before a new one starts, so
// that a demotion batch (8 MiB of raw bytes, DemotionPolicy::BatchBytes) is
// one slab, encoded and written on the batch's own thread, although its
// records are larger than its raw bytes (a 4 KiB object's record is 4.5
// KiB): split at 8 MiB, each batch also queued a small slab for the writer
// threads and waited for it (docs/performance.md#tuning-constants-file-tier).
constexpr uint64_t kSlabMaxBytes = kSlabBytes + kSlabBytes / 4;

// Streamed writes (objects larger than a slab, codec none): pieces of this
// size, written by kPieceWriters threads at once, each piece's
// io.block_bytes requests submitted together (at most queue_depth / 2: two
// 1 MiB requests at the defaults, so up to 16 in flight for one object, more
// when several batches stream at once). Small pieces let the first one go
// to the disk while the encoder still copies the rest, and spread one 8 MiB
// object over several writers (docs/performance.md#tuning-constants-file-tier). Two
// spare buffers let the encoder fill the next pieces while the others are
// on the disk.
constexpr uint64_t kPieceBytes = 2ull << 20;
constexpr size_t kPieceWriters = 8;
constexpr size_t kPieceBuffers = kPieceWriters + 2;
// Pieces a streamed write sends to the disk before the previous one's
// header is written (PieceBuffers::WaitToWrite), so a header waits behind
// at most 8 MiB of the next record, while a whole 8 MiB record may go ahead
// and the disk's queue does not drain at the handover (docs/performance.md#tuning-constants-file-tier).
constexpr size_t kPiecesAheadOfTurn = 4;

void BuildRequests(const FileHandle* file, IoRequest::Op op, std::byte* buf, uint64_t file_offset, uint64_t len,
                   uint64_t block, std::vector<IoRequest>* out) {
  out->clear();
  for (uint64_t done = 0; done < len; done += block) {
    IoRequest r;
    r.op = op;
    r.file = file;
    r.offset = file_offset + done;
    r.buf = buf + done;
    r.len = static_cast<size_t>(std::min(block, len - done));
    out->push_back(r);
  }
}

}  // namespace

struct WritePipeline::Slab {
  size_t first = 0;
  size_t count = 0;
  uint64_t max_bytes = 0;
  bool stream = false;  // one object, written piece by piece (WriteStreamed)
  Status status;
};

// The streamed writes' aligned buffers, made on first use and reused, so a
// large object never faults in fresh pages, and so their number bounds the
// memory and the I/O that streamed writes hold.
//
// Buffers go to the streamed writes strictly in the order they started
// (each takes a ticket): a write gets none while an older one still has
// pieces to fill, and sends at most kPiecesAheadOfTurn to the disk before
// the older one's header is written, so two large objects stored at once
// are written one after the other. The disk sees the same queue either
// way, but the first object is on disk (and its source memory free) in half
// the time: interleaved, both finished together and the disk then sat idle
// while the next two Puts copied their objects in
// (docs/performance.md#tuning-constants-file-tier). Handing a buffer to a
// younger write whenever the older one was busy encoding was not enough on
// a loaded machine: the older encoder was often not running when a buffer
// came free.
class WritePipeline::PieceBuffers {
 public:
  ~PieceBuffers() {
    for (std::byte* b : free_) FreeIoBuffer(b, kPieceBytes);
  }
  // A write's place in both queues: FilledAll() gives up its turn to fill
  // pieces (after its last Acquire), Retire() its turn at the disk (after
  // its header is written).
  uint64_t Ticket() {
    std::lock_guard<std::mutex> l(mu_);
    filling_.insert(next_ticket_);
    writing_.insert(next_ticket_);
    return next_ticket_++;
  }
  void FilledAll(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> l(mu_);
      filling_.erase(ticket);
    }
    cv_.notify_all();
  }
  void Retire(uint64_t ticket) {
    {
      std::lock_guard<std::mutex> l(mu_);
      writing_.erase(ticket);
    }
    cv_.notify_all();
  }
  // Blocks while every buffer is in flight or an older write has pieces
  // left to fill; null when memory runs out.
  std::byte* Acquire(uint64_t ticket) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return (!free_.empty() || made_ < kPieceBuffers) && *filling_.begin() == ticket; });
    if (!free_.empty()) {
      std::byte* b = free_.back();
      free_.pop_back();
      return b;
    }
    std::byte* b = AllocIoBuffer(kPieceBytes);
    if (b != nullptr) ++made_;
    return b;
  }
  // Blocks until every older write has retired: its header is on disk.
  void WaitToWrite(uint64_t ticket) {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return *writing_.begin() == ticket; });
  }
  void Release(std::byte* b) {
    {
      std::lock_guard<std::mutex> l(mu_);
      free_.push_back(b);
    }
    cv_.notify_all();
  }
  // Frees the buffers not in use; later writes allocate them again.
  void ReleaseIdle() {
    std::vector<std::byte*> drop;
    {
      std::lock_guard<std::mutex> l(mu_);
      drop.swap(free_);
      made_ -= drop.size();
    }
    for (std::byte* b : drop) FreeIoBuffer(b, kPieceBytes);
  }

 private:
  std::mutex mu_;  // guards everything below
  std::condition_variable cv_;
  std::vector<std::byte*> free_;
  size_t made_ = 0;
  uint64_t next_ticket_ = 0;
  std::set<uint64_t> filling_;  // tickets of the writes still filling pieces
  std::set<uint64_t> writing_;  // tickets of the writes whose header is not yet written
};

WritePipeline::WritePipeline(const TierConfig& config, FileIo* io, SegmentManager* segments,
                             const RecordEncoder* encoder, std::function<void(Location&)> release)
    : config_(config), io_(io), segments_(segments), encoder_(encoder), release_(std::move(release)) {
  for (uint32_t i = 0; i < segments_->stripe_count(); ++i) {
    slab_writes_.push_back(std::make_unique<FifoGate>(kSlabWritesOnDisk));
  }
  // Four workers per stripe: slabs encode while others are written, and the
  // in-flight writes of all workers together reach the queue depth.
  pool_ = std::make_unique<ThreadPool>(std::max<size_t>(4, 4 * segments_->stripe_count()));
  pieces_ = std::make_unique<PieceBuffers>();
  piece_pool_ = std::make_unique<ThreadPool>(kPieceWriters);
}

WritePipeline::~WritePipeline() {
  // Writers first: they feed the piece writers.
  pool_.reset();
  piece_pool_.reset();
}

void WritePipeline::ReleaseCachedMemory() {
  slab_buffers_.Release();
  pieces_->ReleaseIdle();
}

Status WritePipeline::WriteSlab(Slab& slab, std::span<const ObjectView> objects,
                                std::vector<Location>& out) {
  IoBufferCache::Lease lease = slab_buffers_.Take(slab.max_bytes);
  std::byte* buf = lease.get();
  if (buf == nullptr) return Status::NoSpace("file tier '" + name() + "': out of memory for write buffer");
  std::vector<uint64_t> rec_off(slab.count), rec_len(slab.count);
  uint64_t off = 0;
  for (size_t i = 0; i < slab.count; ++i) {
    const ObjectView& obj = objects[slab.first + i];
    const size_t max = encoder_->MaxSize(obj);
    const uint64_t seq = obj.sequence != 0 ? obj.sequence : sequence_.fetch_add(1, std::memory_order_relaxed);
    auto n = encoder_->Encode(obj, seq, std::span<std::byte>(buf + off, max));
    if (!n.ok()) return n.status().WithContext("file tier '" + name() + "': encoding");
    rec_off[i] = off;
    rec_len[i] = *n;
    off += *n;
  }
  const uint64_t len = AlignUp(off, kIoAlign);
  std::memset(buf + off, 0, len - off);

  auto picked = segments_->PickStripe(len);
  if (!picked.ok()) return picked.status();
  const uint32_t stripe = *picked;
  SegmentPtr seg;
  uint64_t base = 0;
  SPILLWAY_RETURN_IF_ERROR(segments_->Reserve(stripe, len, static_cast<int64_t>(slab.count), &seg, &base));
  // Seal each header with its position, now known (record.h: RecordSeed).
  for (size_t i = 0; i < slab.count; ++i) {
    ResealRecordHeader(buf + rec_off[i], RecordSeed(seg->id, base + rec_off[i]));
  }
  std::vector<IoRequest> reqs;
  BuildRequests(&seg->file, IoRequest::Op::kWrite, buf, base, len, config_.io.block_bytes, &reqs);
  Status st;
  {
    // In turn (slab_writes_): the first slab encoded is the first on the
    // disk and the first done.
    FifoGate::Pass pass = slab_writes_[stripe]->Enter();
    st = io_->SubmitAndWait(reqs, config_.io.queue_depth);
  }
  if (!st.ok()) return segments_->AbandonWrite(stripe, seg, base, len, static_cast<int64_t>(slab.count), st);
  seg->dirty.store(true, std::memory_order_relaxed);
  for (size_t i = 0; i < slab.count; ++i) {
    segments_->Publish(stripe, *seg, base + rec_off[i], rec_len[i], &out[slab.first + i]);
  }
  return Status::OK();
}

Status WritePipeline::WriteStreamed(Slab& slab, std::span<const ObjectView> objects,
                                    std::vector<Location>& out) {
  const ObjectView& obj = objects[slab.first];
  RawRecordStream rec;
  Status st = rec.Start(obj, obj.sequence != 0 ? obj.sequence : sequence_.fetch_add(1, std::memory_order_relaxed));
  if (!st.ok()) return st.WithContext("file tier '" + name() + "': encoding");
  const uint64_t len = AlignUp(rec.size(), kIoAlign);
  // The header block: the record's first kIoAlign bytes, written last.
  IoBuffer head(kIoAlign);
  if (!head) return Status::NoSpace("file tier '" + name() + "': out of memory for write buffer");
  std::memset(head.get(), 0, kIoAlign);
  rec.Next(std::span<std::byte>(head.get(), std::min<uint64_t>(kIoAlign, rec.size())));

  auto picked = segments_->PickStripe(len);
  if (!picked.ok()) return picked.status();
  const uint32_t stripe = *picked;
  SegmentPtr seg;
  uint64_t base = 0;
  SPILLWAY_RETURN_IF_ERROR(segments_->Reserve(stripe, len, 1, &seg, &base));
  const uint32_t depth = std::max<uint32_t>(1, config_.io.queue_depth / 2);
  const uint64_t block = config_.io.block_bytes;
  TaskGroup tracker;
  const uint64_t ticket = pieces_->Ticket();
  size_t sent = 0;  // pieces handed to the writers
  for (uint64_t pos = kIoAlign; pos < len && !tracker.failed(); pos += kPieceBytes) {
    const uint64_t n = std::min(kPieceBytes, len - pos);
    std::byte* buf = pieces_->Acquire(ticket);  // waits while every buffer is on the disk
    if (buf == nullptr) {
      st = Status::NoSpace("file tier '" + name() + "': out of memory for write buffer");
      break;
    }
    const uint64_t fill = std::min(n, rec.size() - rec.produced());
    rec.Next(std::span<std::byte>(buf, fill));
    std::memset(buf + fill, 0, n - fill);  // up to the aligned end
    if (sent++ == kPiecesAheadOfTurn) {
      // The rest wait for the previous write's header: the disk stays busy
      // with the first pieces while it is written, and the header waits
      // behind those pieces only, not behind this whole record.
      pieces_->WaitToWrite(ticket);
    }
    tracker.Add();
    piece_pool_->Submit([this, &tracker, buf, n, block, depth, file = &seg->file, at = base + pos] {
      std::vector<IoRequest> reqs;
      BuildRequests(file, IoRequest::Op::kWrite, buf, at, n, block, &reqs);
      Status ws = io_->SubmitAndWait(reqs, depth);
      pieces_->Release(buf);
      tracker.Done(std::move(ws));
    });
  }
  pieces_->FilledAll(ticket);  // the next streamed write may fill pieces and send its first ones
  Status written = tracker.Wait();
  if (st.ok()) st = std::move(written);
  if (st.ok()) {
    // Every other byte is on disk: the header, sealed with its position,
    // makes the record visible.
    rec.FinishHeader(head.get(), RecordSeed(seg->id, base));
    st = io_->Write(seg->file, base, head.get(), kIoAlign);
  }
  // Only now may the next streamed write send more than its first
  // kPiecesAheadOfTurn pieces: queued behind all of them, this header would
  // wait for the whole next object (the disk's elevator serves the higher
  // offsets first).
  pieces_->Retire(ticket);
  if (!st.ok()) return segments_->AbandonWrite(stripe, seg, base, len, 1, st);
  seg->dirty.store(true, std::memory_order_relaxed);
  segments_->Publish(stripe, *seg, base, rec.size(), &out[slab.first]);
  return Status::OK();
}

StatusOr<std::vector<Location>> WritePipeline::Store(std::span<const ObjectView> objects) {
  std::vector<Location> locs(objects.size());
  // Group objects into slabs of up to kSlabMaxBytes; an object larger than
  // kSlabBytes gets a slab of its own (always its first object).
  std::vector<Slab> slabs;
  Slab cur;
  for (size_t i = 0; i < objects.size(); ++i) {
    const ObjectView& obj = objects[i];
    const uint64_t max = encoder_->MaxSize(obj);
    const bool cur_large = cur.count == 1 && cur.max_bytes > kSlabBytes;
    if (cur.count > 0 && (max > kSlabBytes || cur_large || cur.max_bytes + max > kSlabMaxBytes)) {
      slabs.push_back(cur);
      cur = Slab();
      cur.first = i;
    }
    if (cur.count == 0) {
      cur.first = i;
      // Larger than a slab: it is alone in its slab; stream it when its
      // layout is known before encoding (no codec).
      cur.stream = max > kSlabBytes && encoder_->kind() == CodecKind::kNone;
    }
    cur.count++;
    cur.max_bytes += max;
  }
  if (cur.count > 0) slabs.push_back(cur);
  for (auto& sl : slabs) sl.max_bytes = AlignUp(sl.max_bytes, kIoAlign);

  auto write = [&](Slab& sl) {
    sl.status = sl.stream ? WriteStreamed(sl, objects, locs) : WriteSlab(sl, objects, locs);
  };
  if (slabs.size() == 1) {
    write(slabs[0]);
  } else {
    // The first slab on this thread, the others on the tier's writers.
    TaskGroup group;
    group.Add(static_cast<int>(slabs.size() - 1));
    for (size_t i = 1; i < slabs.size(); ++i) {
      pool_->Submit([&, slab = &slabs[i]] {
        write(*slab);
        group.Done();
      });
    }
    write(slabs[0]);
    (void)group.Wait();  // each slab keeps its own status, checked below
  }
  Status first_error;
  for (auto& sl : slabs) {
    if (!sl.status.ok() && first_error.ok()) first_error = sl.status;
  }
  if (!first_error.ok()) {
    // Nothing is stored on failure: release the slabs that did succeed.
    for (auto& sl : slabs) {
      if (!sl.status.ok()) continue;
      for (size_t i = 0; i < sl.count; ++i) release_(locs[sl.first + i]);
    }
    return first_error;
  }
  return locs;
}

}  // namespace spillway
