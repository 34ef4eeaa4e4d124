// FileTier: segment management, the slab and streamed write paths, verified
// reads, and space reclamation. See file_tier.h for the design.
#include "tiers/file_tier.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <set>
#include <tuple>

#include "base/align.h"
#include "tiers/segment_manifest.h"

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
// Hole punches waiting for the punch thread, at most (see QueuePunch).
constexpr size_t kMaxQueuedPunches = 4096;

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

struct FileTier::Slab {
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
class FileTier::PieceBuffers {
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

FileTier::FileTier(TierConfig config, int index, FileIo* io, HostAllocator* host_alloc)
    : Tier(std::move(config), index), io_(io), host_alloc_(host_alloc), encoder_(this->config().codec) {
  for (const std::string& p : this->config().paths) {
    auto s = std::make_unique<Stripe>();
    s->dir = p;
    stripes_.push_back(std::move(s));
  }
  // Four workers per stripe: slabs encode while others are written, and the
  // in-flight writes of all workers together reach the queue depth.
  pool_ = std::make_unique<ThreadPool>(std::max<size_t>(4, 4 * stripes_.size()));
  pieces_ = std::make_unique<PieceBuffers>();
  piece_pool_ = std::make_unique<ThreadPool>(kPieceWriters);
  punch_pool_ = std::make_unique<ThreadPool>(1);
}

FileTier::~FileTier() {
  // Writers first (they feed the piece writers), then the punches queued by
  // their cleanup; each pool finishes its queue before it stops.
  pool_.reset();
  piece_pool_.reset();
  punch_pool_.reset();
  // A closing scratch tier freed its records without punching them
  // (Reclaim): the segments that hold none now go whole, the active one
  // included. Punching 32,768 records of a 2 GiB spill of 64 KiB objects
  // one by one made the engine's close take seconds.
  if (closing_.load(std::memory_order_relaxed) && !config().persistent) {
    for (auto& s : stripes_) {
      std::vector<SegmentPtr> empty;
      {
        std::lock_guard<std::mutex> l(s->mu);
        for (auto it = s->segments.begin(); it != s->segments.end();) {
          if (it->second->live_records.load() == 0) {
            empty.push_back(it->second);
            it = s->segments.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (const SegmentPtr& seg : empty) (void)io_->Remove(seg->file.path);
    }
  }
  for (auto& s : stripes_) {
    if (s->lock.is_open()) (void)io_->Close(s->lock);
  }
}

void FileTier::ReleaseCachedMemory() {
  slab_buffers_.Release();
  read_buffers_.Release();
  pieces_->ReleaseIdle();
}

Status FileTier::Open() {
  if (stripes_.empty()) return Status::InvalidArgument("file tier '" + name() + "' has no paths");
  for (auto& s : stripes_) {
    SPILLWAY_RETURN_IF_ERROR(io_->CreateDir(s->dir).WithContext("file tier '" + name() + "'"));
    SPILLWAY_RETURN_IF_ERROR(CheckDirectory(s->dir));
    SPILLWAY_RETURN_IF_ERROR(LockDirectory(*s));
    if (config().persistent) continue;
    SPILLWAY_RETURN_IF_ERROR(WipeScratch(*s));
  }
  return Status::OK();
}

// One engine per directory: a second one would delete or overwrite segments
// the first is still appending to.
Status FileTier::LockDirectory(Stripe& s) {
  auto lock = io_->LockFile(s.dir + "/" + kLockName);
  if (lock.ok()) {
    if (s.lock.is_open()) (void)io_->Close(s.lock);
    s.lock = std::move(*lock);
    return Status::OK();
  }
  // Only contention means another engine: a LOCK that is a directory, a
  // symlink, a FIFO or someone else's file is reported as what it is.
  if (lock.status().code() != StatusCode::kBusy) {
    return lock.status().WithContext("file tier '" + name() + "': cannot lock directory " + s.dir);
  }
  std::string why = lock.status().message();
  if (why.find("pid " + std::to_string(::getpid())) != std::string::npos) {
    why += " (this process: another engine, or another tier of this chain, uses the same directory)";
  }
  return Status::Busy("file tier '" + name() + "': directory " + s.dir +
                      " is in use by another spillway engine: " + why);
}

// Deletes a scratch tier's old segments: only regular files named like
// segments, and never a directory holding a persistent tier's records unless
// the config says wipe_persistent.
Status FileTier::WipeScratch(Stripe& s) {
  auto names = io_->ListDir(s.dir);
  if (!names.ok()) return names.status().WithContext("file tier '" + name() + "'");
  const bool marked = std::find(names->begin(), names->end(), kManifestName) != names->end();
  if (marked && !config().wipe_persistent) {
    return Status::InvalidArgument(
        "file tier '" + name() + "': " + s.dir + " holds records written by a persistent tier (it has a " +
        kManifestName + "); a scratch tier would delete them: set persistent: true to keep them, or "
        "wipe_persistent: true to delete them");
  }
  for (const std::string& n : *names) {
    uint32_t id;
    if (!Segment::ParseFileName(n, &id)) continue;
    const std::string path = s.dir + "/" + n;
    auto info = io_->Stat(path);
    if (!info.ok()) return info.status().WithContext("file tier '" + name() + "'");
    if (info->type != FileInfo::Type::kRegular) {
      io_->logger()->Log(LogLevel::kWarning, "tier '" + name() + "': " + path + " is not a regular file; left alone");
      continue;
    }
    SPILLWAY_RETURN_IF_ERROR(io_->Remove(path));
  }
  if (marked) SPILLWAY_RETURN_IF_ERROR(io_->Remove(s.dir + "/" + kManifestName));
  return Status::OK();
}

// A scratch tier's directory was removed under it (tmp cleaners do this):
// make it again, so later segments have a home and Flush can sync it. The
// segments already open stay readable until their records are freed.
Status FileTier::RecreateScratchDir(Stripe& s) {
  SPILLWAY_RETURN_IF_ERROR(io_->CreateDir(s.dir).WithContext("file tier '" + name() + "': recreating"));
  SPILLWAY_RETURN_IF_ERROR(LockDirectory(s));
  io_->logger()->Log(LogLevel::kWarning, "tier '" + name() + "': directory " + s.dir + " was removed; made it again");
  return Status::OK();
}


// Refuses a tier directory an attacker could redirect: a symlink, or one
// owned by another user (unless the config says allow_symlink); and one that
// others may write in, sticky or not, where they could plant a segment or a
// LOCK (docs/reliability.md, "The tier directory").
Status FileTier::CheckDirectory(const std::string& dir) const {
  auto st = io_->Stat(dir);
  if (!st.ok()) return st.status().WithContext("file tier '" + name() + "'");
  if (st->type == FileInfo::Type::kDirectory && (st->mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", st->mode);
    return Status::InvalidArgument("file tier '" + name() + "': " + dir + " (mode " + mode + ") is " +
                                   ((st->mode & 002) ? "world" : "group") +
                                   "-writable: other users could plant files in it (chmod go-w it, or use a "
                                   "directory of its own such as a new subdirectory)");
  }
  if (config().allow_symlink) return Status::OK();
  if (st->type == FileInfo::Type::kSymlink) {
    return Status::InvalidArgument("file tier '" + name() + "': " + dir +
                                   " is a symlink (set allow_symlink: true to accept it)");
  }
  if (st->type != FileInfo::Type::kDirectory) return Status::InvalidArgument("file tier '" + name() + "': " + dir + " is not a directory");
  if (!st->owned) {
    return Status::InvalidArgument("file tier '" + name() + "': " + dir + " is owned by uid " +
                                   std::to_string(st->uid) + ", not by this process (set allow_symlink: true to accept it)");
  }
  return Status::OK();
}

uint64_t FileTier::ReserveEstimate(const ObjectView& object) const {
  return encoder_.MaxSize(object);
}

StatusOr<SegmentPtr> FileTier::NewSegmentLocked(Stripe& s) {
  OpenOptions opts;
  opts.create = true;
  opts.exclusive = true;
  opts.write = true;
  opts.try_direct = config().io.direct;
  opts.lock = true;  // held while this engine may have writes to it in flight (FileTier::Recover)
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t id = s.next_id++;
    auto f = io_->Open(s.dir + "/" + Segment::FileName(id), opts);
    if (!f.ok() && f.status().IsNotFound() && !config().persistent &&
        io_->Stat(s.dir).status().IsNotFound()) {
      SPILLWAY_RETURN_IF_ERROR(RecreateScratchDir(s));  // removed under us: make it again
      f = io_->Open(s.dir + "/" + Segment::FileName(id), opts);
    }
    if (!f.ok()) {
      if (f.status().message().find("File exists") != std::string::npos) continue;
      return f.status().WithContext("file tier '" + name() + "': creating segment");
    }
    if (!f->direct) {
      direct_io_ = false;
      std::call_once(buffered_warning_, [&] {
        io_->logger()->Log(LogLevel::kWarning,
                           "tier '" + name() + "': O_DIRECT refused in " + s.dir + ", using buffered I/O");
      });
    }
    auto seg = std::make_shared<Segment>();
    seg->id = id;
    seg->file = std::move(*f);
    seg->io = io_;
    s.segments.emplace(id, seg);
    return seg;
  }
  return Status::IOError("file tier '" + name() + "': no free segment name in " + s.dir);
}

Status FileTier::Reserve(uint32_t stripe, uint64_t len, int64_t records, SegmentPtr* seg,
                         uint64_t* offset) {
  Stripe& s = *stripes_[stripe];
  SegmentPtr sealed;
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (s.active && s.active->end > 0 && s.active->end + len > config().io.segment_bytes) {
      s.active->sealed = true;
      sealed = std::move(s.active);
    }
    if (!s.active) {
      auto ns = NewSegmentLocked(s);
      if (!ns.ok()) return ns.status();
      s.active = std::move(*ns);
    }
    *seg = s.active;
    *offset = s.active->end;
    s.active->end += len;
    // Preallocate ahead of the writes (as fio does by default): writes into
    // allocated extents run markedly faster than ones that grow the file.
    // The whole segment at once, when it is created and nothing is written
    // to it yet: fallocate on ext4 and XFS first waits for every direct
    // write in flight on the file (inode_dio_wait), so growing the active
    // segment in steps drained the disk queue at every step
    // (docs/performance.md#tuning-constants-file-tier). No more than the tier's
    // capacity, so a small tier does not reserve a segment it can never fill.
    if (s.active->end > s.active->allocated) {
      const uint64_t need = s.active->end - s.active->allocated;
      const uint64_t cap = config().capacity_bytes;
      const uint64_t full = cap != 0 ? std::min(config().io.segment_bytes, cap) : config().io.segment_bytes;
      const uint64_t room = full > s.active->allocated ? full - s.active->allocated : 0;
      const uint64_t want = std::max(need, room);
      if (io_->Allocate(s.active->file, s.active->allocated, want).ok()) {
        s.active->allocated += want;
      } else if (want > need && io_->Allocate(s.active->file, s.active->allocated, need).ok()) {
        s.active->allocated += need;  // a nearly full disk: what this write needs
      } else {
        s.active->allocated = s.active->end;  // unsupported or full: the write decides
      }
    }
    s.active->live_records.fetch_add(records, std::memory_order_relaxed);
  }
  if (sealed) MaybeDeleteSegment(stripe, sealed);
  return Status::OK();
}

SegmentPtr FileTier::FindSegment(uint32_t stripe, uint32_t id) const {
  if (stripe >= stripes_.size()) return nullptr;
  Stripe& s = *stripes_[stripe];
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.segments.find(id);
  return it == s.segments.end() ? nullptr : it->second;
}

void FileTier::MaybeDeleteSegment(uint32_t stripe, const SegmentPtr& seg) {
  Stripe& s = *stripes_[stripe];
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (!seg->sealed || seg->live_records.load() != 0) return;
    auto it = s.segments.find(seg->id);
    if (it == s.segments.end() || it->second != seg) return;
    s.segments.erase(it);
  }
  s.manifest_dirty.store(true);
  (void)io_->Remove(seg->file.path);
}

std::string FileTier::Where(const Location& loc) const {
  std::string path = loc.stripe < stripes_.size() ? stripes_[loc.stripe]->dir : "?";
  return "tier '" + name() + "' file " + path + "/" + Segment::FileName(loc.segment) + " offset " +
         std::to_string(loc.offset);
}

Status FileTier::WriteSlab(Slab& slab, std::span<const ObjectView> objects,
                           std::vector<Location>& out) {
  IoBufferCache::Lease lease = slab_buffers_.Take(slab.max_bytes);
  std::byte* buf = lease.get();
  if (buf == nullptr) return Status::NoSpace("file tier '" + name() + "': out of memory for write buffer");
  std::vector<uint64_t> rec_off(slab.count), rec_len(slab.count);
  uint64_t off = 0;
  for (size_t i = 0; i < slab.count; ++i) {
    const ObjectView& obj = objects[slab.first + i];
    const size_t max = encoder_.MaxSize(obj);
    const uint64_t seq = obj.sequence != 0 ? obj.sequence : sequence_.fetch_add(1, std::memory_order_relaxed);
    auto n = encoder_.Encode(obj, seq, std::span<std::byte>(buf + off, max));
    if (!n.ok()) return n.status().WithContext("file tier '" + name() + "': encoding");
    rec_off[i] = off;
    rec_len[i] = *n;
    off += *n;
  }
  const uint64_t len = AlignUp(off, kIoAlign);
  std::memset(buf + off, 0, len - off);

  auto picked = PickStripe(len);
  if (!picked.ok()) return picked.status();
  const uint32_t stripe = *picked;
  SegmentPtr seg;
  uint64_t base = 0;
  SPILLWAY_RETURN_IF_ERROR(Reserve(stripe, len, static_cast<int64_t>(slab.count), &seg, &base));
  // Seal each header with its position, now known (record.h: RecordSeed).
  for (size_t i = 0; i < slab.count; ++i) {
    ResealRecordHeader(buf + rec_off[i], RecordSeed(seg->id, base + rec_off[i]));
  }
  std::vector<IoRequest> reqs;
  BuildRequests(&seg->file, IoRequest::Op::kWrite, buf, base, len, config().io.block_bytes, &reqs);
  Status st;
  {
    // In turn (Stripe::slab_writes): the first slab encoded is the first
    // on the disk and the first done.
    FifoGate::Pass pass = stripes_[stripe]->slab_writes.Enter();
    st = io_->SubmitAndWait(reqs, config().io.queue_depth);
  }
  if (!st.ok()) return AbandonWrite(stripe, seg, base, len, static_cast<int64_t>(slab.count), st);
  seg->dirty.store(true, std::memory_order_relaxed);
  for (size_t i = 0; i < slab.count; ++i) {
    Publish(stripe, *seg, base + rec_off[i], rec_len[i], &out[slab.first + i]);
  }
  return Status::OK();
}

Status FileTier::AbandonWrite(uint32_t stripe, const SegmentPtr& seg, uint64_t base, uint64_t len,
                              int64_t records, const Status& st) {
  // A failed or torn write may have left complete records on disk that were
  // never acknowledged; punch them out so a scan cannot revive them (after
  // an Erase of the key's older value, one would come back at a restart).
  // Where that fails too, a persistent tier retries at the next commit,
  // whose Flush reports the error until it succeeds.
  Status erased = EraseRange(*seg, base, len);
  if (!erased.ok() && config().persistent) {
    QueueFree(PendingFree{stripe, seg->id, base, len, PendingFree::kAbandon});
  }
  seg->live_records.fetch_sub(records);
  MaybeDeleteSegment(stripe, seg);
  return st.WithContext("file tier '" + name() + "': writing " + seg->file.path);
}

void FileTier::Publish(uint32_t stripe, Segment& seg, uint64_t offset, uint64_t length, Location* loc) {
  loc->stripe = stripe;
  loc->segment = seg.id;
  loc->offset = offset;
  loc->length = length;
  loc->stored_bytes = length;
  seg.live_bytes.fetch_add(length, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> l(seg.publish_mu);
    ++seg.published_records;
    seg.published_end = std::max(seg.published_end, offset + length);
  }
  stripes_[stripe]->manifest_dirty.store(true);  // after the counts: see SyncImpl
}

Status FileTier::WriteStreamed(Slab& slab, std::span<const ObjectView> objects,
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

  auto picked = PickStripe(len);
  if (!picked.ok()) return picked.status();
  const uint32_t stripe = *picked;
  SegmentPtr seg;
  uint64_t base = 0;
  SPILLWAY_RETURN_IF_ERROR(Reserve(stripe, len, 1, &seg, &base));
  const uint32_t depth = std::max<uint32_t>(1, config().io.queue_depth / 2);
  const uint64_t block = config().io.block_bytes;
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
  if (!st.ok()) return AbandonWrite(stripe, seg, base, len, 1, st);
  seg->dirty.store(true, std::memory_order_relaxed);
  Publish(stripe, *seg, base, rec.size(), &out[slab.first]);
  return Status::OK();
}

StatusOr<std::vector<Location>> FileTier::StoreImpl(std::span<const ObjectView> objects) {
  std::vector<Location> locs(objects.size());
  // Group objects into slabs of up to kSlabMaxBytes; an object larger than
  // kSlabBytes gets a slab of its own (always its first object).
  std::vector<Slab> slabs;
  Slab cur;
  for (size_t i = 0; i < objects.size(); ++i) {
    const ObjectView& obj = objects[i];
    const uint64_t max = encoder_.MaxSize(obj);
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
      cur.stream = max > kSlabBytes && encoder_.kind() == CodecKind::kNone;
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
      for (size_t i = 0; i < sl.count; ++i) FreeImpl(locs[sl.first + i]);
    }
    return first_error;
  }
  return locs;
}

Status FileTier::MarkErased(Segment& seg, const PendingFree& p) {
  // Read-modify-write the aligned block(s) holding the header. Neighbouring
  // records in those blocks are written back unchanged.
  Location loc;
  loc.stripe = p.stripe;
  loc.segment = p.segment;
  loc.offset = p.offset;
  const uint64_t start = AlignDown(p.offset, kIoAlign);
  const uint64_t end = AlignUp(p.offset + kRecordHeaderSize, kIoAlign);
  IoBuffer buf(end - start);
  if (!buf) return Status::NoSpace(Where(loc) + ": out of memory for an erase mark");
  std::lock_guard<std::mutex> l(seg.header_mu);
  SPILLWAY_RETURN_IF_ERROR(io_->Read(seg.file, start, buf.get(), end - start)
                               .WithContext(Where(loc) + ": reading the header to mark it erased"));
  std::byte* header = buf.get() + (p.offset - start);
  const uint64_t seed = RecordSeed(p.segment, p.offset);
  const std::span<const std::byte> view(header, kRecordHeaderSize);
  auto now = ParseRecordHeader(view, seed);
  if (now.ok() && (now->flags & kFlagErased)) return Status::OK();  // marked by an earlier commit
  // A mark changes only the flags and the checksum, so a header that fails
  // its checksum after a mark was torn half way is completed by marking it
  // again. A header that still does not describe this record (other damage)
  // is left alone: it can never be served.
  std::byte marked[kRecordHeaderSize];
  std::memcpy(marked, header, kRecordHeaderSize);
  MarkRecordErased(marked, seed);
  auto after = ParseRecordHeader(std::span<const std::byte>(marked, kRecordHeaderSize), seed);
  if (!after.ok() || RecordSize(*after) != p.length) return Status::OK();
  std::memcpy(header, marked, kRecordHeaderSize);
  SPILLWAY_RETURN_IF_ERROR(io_->Write(seg.file, start, buf.get(), end - start)
                               .WithContext(Where(loc) + ": writing the erase mark"));
  seg.dirty.store(true, std::memory_order_relaxed);
  return Status::OK();
}

Status FileTier::EraseRange(const Segment& seg, uint64_t offset, uint64_t len) {
  Status st = io_->PunchHole(seg.file, offset, len);
  if (st.code() != StatusCode::kNotSupported) return st;
  // No hole punching here: overwrite with zeros (offset and len are aligned).
  const uint64_t chunk = std::min<uint64_t>(len, 1ull << 20);
  IoBuffer zeros(chunk);
  if (!zeros) return Status::NoSpace("file tier '" + name() + "': out of memory for zeroing");
  std::memset(zeros.get(), 0, chunk);
  for (uint64_t done = 0; done < len; done += chunk) {
    SPILLWAY_RETURN_IF_ERROR(io_->Write(seg.file, offset + done, zeros.get(), std::min(chunk, len - done)));
  }
  return Status::OK();
}

void FileTier::Reclaim(uint32_t stripe, const SegmentPtr& seg, uint64_t offset, uint64_t length) {
  seg->live_bytes.fetch_sub(length, std::memory_order_relaxed);
  // Punch the blocks only this record covers; neighbours share the edges.
  // Never the header's block(s): a persistent tier's erase mark lives there.
  const uint64_t from = AlignUp(offset + kRecordHeaderSize, kIoAlign);
  const uint64_t to = AlignDown(offset + length, kIoAlign);
  // Closing, a scratch tier's segments go whole (~FileTier).
  const bool whole_later = closing_.load(std::memory_order_relaxed) && !config().persistent;
  if (to > from && !whole_later) QueuePunch(stripe, seg, from, to - from);
  if (seg->live_records.fetch_sub(1) == 1) MaybeDeleteSegment(stripe, seg);
}

void FileTier::FreeImpl(Location& loc) {
  Unreserve(loc.stored_bytes);
  if (config().persistent) {
    // The mark and the punch wait for CommitFrees (see file_tier.h).
    QueueFree(PendingFree{loc.stripe, loc.segment, loc.offset, loc.length, PendingFree::kReclaim});
  } else if (SegmentPtr seg = FindSegment(loc.stripe, loc.segment)) {
    Reclaim(loc.stripe, seg, loc.offset, loc.length);
  }
  loc.length = 0;
}

void FileTier::RetireImpl(const Location& loc) {
  if (config().persistent) {
    QueueFree(PendingFree{loc.stripe, loc.segment, loc.offset, loc.length, PendingFree::kMark});
  }
}

void FileTier::QueueFree(const PendingFree& p) {
  {
    std::lock_guard<std::mutex> l(frees_mu_);
    queued_frees_.push_back(p);
  }
  const uint64_t pending = pending_free_bytes_.fetch_add(p.length, std::memory_order_relaxed) + p.length;
  if (on_pending_frees_ && pending > capacity_bytes() / 8) on_pending_frees_();
}

void FileTier::PrepareFrees() {
  std::lock_guard<std::mutex> l(frees_mu_);
  ready_frees_.insert(ready_frees_.end(), queued_frees_.begin(), queued_frees_.end());
  queued_frees_.clear();
}

Status FileTier::CommitFrees(bool* wrote) {
  std::vector<PendingFree> work;
  {
    std::lock_guard<std::mutex> l(frees_mu_);
    work.swap(ready_frees_);
  }
  if (work.empty()) return Status::OK();
  // One mark per record, however often it was queued (retired, then freed).
  std::sort(work.begin(), work.end(), [](const PendingFree& a, const PendingFree& b) {
    return std::tie(a.stripe, a.segment, a.offset, a.kind) < std::tie(b.stripe, b.segment, b.offset, b.kind);
  });
  std::vector<PendingFree> failed;
  Status first;
  uint64_t done_bytes = 0;
  for (size_t i = 0; i < work.size(); ++i) {
    PendingFree p = work[i];
    uint64_t bytes = p.length;
    while (i + 1 < work.size() && work[i + 1].stripe == p.stripe && work[i + 1].segment == p.segment &&
           work[i + 1].offset == p.offset) {
      p.kind = std::max(p.kind, work[++i].kind);
      bytes += work[i].length;
    }
    SegmentPtr seg = FindSegment(p.stripe, p.segment);
    if (!seg) {  // deleted: its records went with it
      done_bytes += bytes;
      continue;
    }
    Status st = p.kind == PendingFree::kAbandon ? EraseRange(*seg, p.offset, p.length) : MarkErased(*seg, p);
    if (!st.ok()) {
      counters_.io_errors.fetch_add(1, std::memory_order_relaxed);
      if (first.ok()) first = st.WithContext("file tier '" + name() + "'");
      failed.push_back(p);
      done_bytes += bytes - p.length;
      continue;
    }
    *wrote = true;
    done_bytes += bytes;
    if (p.kind == PendingFree::kReclaim) Reclaim(p.stripe, seg, p.offset, p.length);
  }
  {
    std::lock_guard<std::mutex> l(frees_mu_);
    ready_frees_.insert(ready_frees_.end(), failed.begin(), failed.end());
  }
  pending_free_bytes_.fetch_sub(done_bytes, std::memory_order_relaxed);
  return first;
}

// Punching a large record takes milliseconds (the filesystem frees its
// extents), so it runs on punch_pool_'s thread, not the caller's. The task
// holds the segment, so its file stays open; a segment deleted meanwhile is
// skipped (its blocks go with the file).
// Past kMaxQueuedPunches the caller punches itself, so frees faster than the
// filesystem can punch cannot grow the queue (and the segments it holds open)
// without bound.
void FileTier::QueuePunch(uint32_t stripe, SegmentPtr seg, uint64_t offset, uint64_t len) {
  if (queued_punches_.fetch_add(1, std::memory_order_relaxed) >= kMaxQueuedPunches) {
    queued_punches_.fetch_sub(1, std::memory_order_relaxed);
    (void)io_->PunchHole(seg->file, offset, len);
    return;
  }
  punch_pool_->Submit([this, stripe, seg = std::move(seg), offset, len] {
    if (FindSegment(stripe, seg->id) == seg) (void)io_->PunchHole(seg->file, offset, len);
    queued_punches_.fetch_sub(1, std::memory_order_relaxed);
  });
}

void FileTier::DrainPunches() const { punch_pool_->WaitIdle(); }

Status FileTier::SyncImpl() {
  if (!config().persistent) return SyncData();
  // Used alone (no engine orders the tiers): the three steps of a Flush.
  PrepareFrees();
  SPILLWAY_RETURN_IF_ERROR(SyncData());
  bool wrote = false;
  Status st = CommitFrees(&wrote);
  if (wrote) {
    Status again = SyncData();
    if (st.ok()) st = std::move(again);
  }
  return st;
}

Status FileTier::SyncData() {
  DrainPunches();  // a synced tier holds no freed blocks
  for (uint32_t si = 0; si < stripes_.size(); ++si) {
    Stripe& s = *stripes_[si];
    // Taken before the dirty flags are cleared: whatever the snapshot counts
    // was written before this Sync's fdatasync (Publish follows the write).
    const bool manifest_due = config().persistent && s.manifest_dirty.exchange(false);
    std::vector<SegmentPtr> segs;
    {
      std::lock_guard<std::mutex> l(s.mu);
      for (auto& [id, seg] : s.segments) segs.push_back(seg);
    }
    Manifest manifest;
    if (manifest_due) {
      for (auto& seg : segs) {
        std::lock_guard<std::mutex> l(seg->publish_mu);
        manifest[seg->id] = ManifestEntry{seg->published_end, seg->published_records};
      }
    }
    for (auto& seg : segs) {
      if (!seg->dirty.exchange(false)) continue;
      Status st = io_->Sync(seg->file);
      if (!st.ok()) {
        seg->dirty.store(true);
        if (manifest_due) s.manifest_dirty.store(true);
        return st.WithContext("file tier '" + name() + "'");
      }
    }
    Status st = manifest_due ? WriteManifest(*io_, s.dir, manifest) : io_->SyncDir(s.dir);
    if (!st.ok() && !config().persistent && io_->Stat(s.dir).status().IsNotFound()) {
      SegmentPtr sealed;
      {
        std::lock_guard<std::mutex> l(s.mu);
        st = RecreateScratchDir(s);
        if (st.ok() && s.active) {
          s.active->sealed = true;  // its file is gone: new segments go to the new directory
          sealed = std::move(s.active);
        }
      }
      if (sealed) MaybeDeleteSegment(si, sealed);
      if (st.ok()) st = io_->SyncDir(s.dir);
    }
    if (!st.ok()) {
      if (manifest_due) s.manifest_dirty.store(true);
      return st.WithContext("file tier '" + name() + "'");
    }
  }
  return Status::OK();
}

size_t FileTier::segment_count() const {
  size_t n = 0;
  for (auto& s : stripes_) {
    std::lock_guard<std::mutex> l(s->mu);
    n += s->segments.size();
  }
  return n;
}

uint64_t FileTier::allocated_bytes() const {
  DrainPunches();
  uint64_t n = 0;
  for (auto& s : stripes_) {
    std::vector<SegmentPtr> segs;
    {
      std::lock_guard<std::mutex> l(s->mu);
      for (auto& [id, seg] : s->segments) segs.push_back(seg);
    }
    for (auto& seg : segs) {
      auto a = io_->AllocatedBytes(seg->file);
      if (a.ok()) n += *a;
    }
  }
  return n;
}

}  // namespace spillway
