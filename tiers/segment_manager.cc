// SegmentManager: the segment table, appends, reclaiming freed records,
// deferred frees and the manifest. See segment_manager.h for the contract;
// recovery is in segment_manager_recovery.cc, min_free in
// segment_manager_space.cc.
#include "tiers/segment_manager.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "base/align.h"
#include "base/tier_files.h"
#include "tiers/io_buffer_cache.h"
#include "tiers/record.h"
#include "tiers/segment_manifest.h"

namespace spillway {
namespace {

// Hole punches waiting for the punch thread, at most (see QueuePunch).
constexpr size_t kMaxQueuedPunches = 4096;

}  // namespace

SegmentManager::SegmentManager(const TierConfig& config, FileIo* io) : config_(config), io_(io) {
  for (const std::string& p : config_.paths) {
    auto s = std::make_unique<Stripe>();
    s->dir = p;
    stripes_.push_back(std::move(s));
  }
  punch_pool_ = std::make_unique<ThreadPool>(1);
}

SegmentManager::~SegmentManager() {
  punch_pool_.reset();  // finishes the queued punches
  // A closing scratch tier freed its records without punching them
  // (Reclaim): the segments that hold none now go whole, the active one
  // included. Punching 32,768 records of a 2 GiB spill of 64 KiB objects
  // one by one made the engine's close take seconds.
  if (closing_.load(std::memory_order_relaxed) && !config_.persistent) {
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

Status SegmentManager::Open() {
  if (stripes_.empty()) return Status::InvalidArgument("file tier '" + name() + "' has no paths");
  for (auto& s : stripes_) {
    SPILLWAY_RETURN_IF_ERROR(io_->CreateDir(s->dir).WithContext("file tier '" + name() + "'"));
    SPILLWAY_RETURN_IF_ERROR(CheckDirectory(s->dir));
    SPILLWAY_RETURN_IF_ERROR(LockDirectory(*s));
    if (config_.persistent) continue;
    SPILLWAY_RETURN_IF_ERROR(WipeScratch(*s));
  }
  return Status::OK();
}

// One engine per directory: a second one would delete or overwrite segments
// the first is still appending to.
Status SegmentManager::LockDirectory(Stripe& s) {
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
Status SegmentManager::WipeScratch(Stripe& s) {
  auto names = io_->ListDir(s.dir);
  if (!names.ok()) return names.status().WithContext("file tier '" + name() + "'");
  const bool marked = std::find(names->begin(), names->end(), kManifestName) != names->end();
  if (marked && !config_.wipe_persistent) {
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
Status SegmentManager::RecreateScratchDir(Stripe& s) {
  SPILLWAY_RETURN_IF_ERROR(io_->CreateDir(s.dir).WithContext("file tier '" + name() + "': recreating"));
  SPILLWAY_RETURN_IF_ERROR(LockDirectory(s));
  io_->logger()->Log(LogLevel::kWarning, "tier '" + name() + "': directory " + s.dir + " was removed; made it again");
  return Status::OK();
}

// Refuses a tier directory an attacker could redirect: a symlink, or one
// owned by another user (unless the config says allow_symlink); and one that
// others may write in, sticky or not, where they could plant a segment or a
// LOCK (docs/reliability.md, "The tier directory").
Status SegmentManager::CheckDirectory(const std::string& dir) const {
  auto st = io_->Stat(dir);
  if (!st.ok()) return st.status().WithContext("file tier '" + name() + "'");
  if (st->type == FileInfo::Type::kDirectory && (st->mode & 022) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st->mode & 07777));
    return Status::InvalidArgument("file tier '" + name() + "': " + dir + " (mode " + mode + ") is " +
                                   ((st->mode & 002) ? "world" : "group") +
                                   "-writable: other users could plant files in it (chmod go-w it, or use a "
                                   "directory of its own such as a new subdirectory)");
  }
  if (config_.allow_symlink) return Status::OK();
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

StatusOr<SegmentPtr> SegmentManager::NewSegmentLocked(Stripe& s) {
  OpenOptions opts;
  opts.create = true;
  opts.exclusive = true;
  opts.write = true;
  opts.try_direct = config_.io.direct;
  opts.lock = true;  // held while this engine may have writes to it in flight (SegmentManager::Recover)
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint32_t id = s.next_id++;
    auto f = io_->Open(s.dir + "/" + Segment::FileName(id), opts);
    if (!f.ok() && f.status().IsNotFound() && !config_.persistent &&
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

Status SegmentManager::Reserve(uint32_t stripe, uint64_t len, int64_t records, SegmentPtr* seg,
                               uint64_t* offset) {
  Stripe& s = *stripes_[stripe];
  SegmentPtr sealed;
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (s.active && s.active->end > 0 && s.active->end + len > config_.io.segment_bytes) {
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
      const uint64_t cap = config_.capacity_bytes;
      const uint64_t full = cap != 0 ? std::min(config_.io.segment_bytes, cap) : config_.io.segment_bytes;
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

SegmentPtr SegmentManager::Find(uint32_t stripe, uint32_t id) const {
  if (stripe >= stripes_.size()) return nullptr;
  Stripe& s = *stripes_[stripe];
  std::lock_guard<std::mutex> l(s.mu);
  auto it = s.segments.find(id);
  return it == s.segments.end() ? nullptr : it->second;
}

void SegmentManager::MaybeDeleteSegment(uint32_t stripe, const SegmentPtr& seg) {
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

std::string SegmentManager::Where(const Location& loc) const {
  std::string path = loc.stripe < stripes_.size() ? stripes_[loc.stripe]->dir : "?";
  return "tier '" + name() + "' file " + path + "/" + Segment::FileName(loc.segment) + " offset " +
         std::to_string(loc.offset);
}

Status SegmentManager::AbandonWrite(uint32_t stripe, const SegmentPtr& seg, uint64_t base, uint64_t len,
                                    int64_t records, const Status& st) {
  // A failed or torn write may have left complete records on disk that were
  // never acknowledged; punch them out so a scan cannot revive them (after
  // an Erase of the key's older value, one would come back at a restart).
  // Where that fails too, a persistent tier retries at the next commit,
  // whose Flush reports the error until it succeeds.
  Status erased = EraseRange(*seg, base, len);
  if (!erased.ok() && config_.persistent) {
    QueueFree(PendingFree{stripe, seg->id, base, len, PendingFree::kAbandon});
  }
  seg->live_records.fetch_sub(records);
  MaybeDeleteSegment(stripe, seg);
  return st.WithContext("file tier '" + name() + "': writing " + seg->file.path);
}

void SegmentManager::Publish(uint32_t stripe, Segment& seg, uint64_t offset, uint64_t length, Location* loc) {
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
  stripes_[stripe]->manifest_dirty.store(true);  // after the counts: see SyncData
}

Status SegmentManager::MarkErased(Segment& seg, const PendingFree& p) {
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

Status SegmentManager::EraseRange(const Segment& seg, uint64_t offset, uint64_t len) {
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

void SegmentManager::Reclaim(uint32_t stripe, const SegmentPtr& seg, uint64_t offset, uint64_t length) {
  seg->live_bytes.fetch_sub(length, std::memory_order_relaxed);
  // Punch the blocks only this record covers; neighbours share the edges.
  // Never the header's block(s): a persistent tier's erase mark lives there.
  const uint64_t from = AlignUp(offset + kRecordHeaderSize, kIoAlign);
  const uint64_t to = AlignDown(offset + length, kIoAlign);
  // Closing, a scratch tier's segments go whole (~SegmentManager).
  const bool whole_later = closing_.load(std::memory_order_relaxed) && !config_.persistent;
  if (to > from && !whole_later) QueuePunch(stripe, seg, from, to - from);
  if (seg->live_records.fetch_sub(1) == 1) MaybeDeleteSegment(stripe, seg);
}

void SegmentManager::Free(const Location& loc) {
  if (config_.persistent) {
    // The mark and the punch wait for CommitFrees (see file_tier.h).
    QueueFree(PendingFree{loc.stripe, loc.segment, loc.offset, loc.length, PendingFree::kReclaim});
  } else if (SegmentPtr seg = Find(loc.stripe, loc.segment)) {
    Reclaim(loc.stripe, seg, loc.offset, loc.length);
  }
}

void SegmentManager::Retire(const Location& loc) {
  if (config_.persistent) {
    QueueFree(PendingFree{loc.stripe, loc.segment, loc.offset, loc.length, PendingFree::kMark});
  }
}

void SegmentManager::QueueFree(const PendingFree& p) {
  {
    std::lock_guard<std::mutex> l(frees_mu_);
    queued_frees_.push_back(p);
  }
  const uint64_t pending = pending_free_bytes_.fetch_add(p.length, std::memory_order_relaxed) + p.length;
  if (on_pending_frees_ && pending > config_.capacity_bytes / 8) on_pending_frees_();
}

void SegmentManager::PrepareFrees() {
  std::lock_guard<std::mutex> l(frees_mu_);
  ready_frees_.insert(ready_frees_.end(), queued_frees_.begin(), queued_frees_.end());
  queued_frees_.clear();
}

Status SegmentManager::CommitFrees(bool* wrote, uint64_t* failures) {
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
    SegmentPtr seg = Find(p.stripe, p.segment);
    if (!seg) {  // deleted: its records went with it
      done_bytes += bytes;
      continue;
    }
    Status st = p.kind == PendingFree::kAbandon ? EraseRange(*seg, p.offset, p.length) : MarkErased(*seg, p);
    if (!st.ok()) {
      ++*failures;
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
void SegmentManager::QueuePunch(uint32_t stripe, SegmentPtr seg, uint64_t offset, uint64_t len) {
  if (queued_punches_.fetch_add(1, std::memory_order_relaxed) >= kMaxQueuedPunches) {
    queued_punches_.fetch_sub(1, std::memory_order_relaxed);
    (void)io_->PunchHole(seg->file, offset, len);
    return;
  }
  punch_pool_->Submit([this, stripe, seg = std::move(seg), offset, len] {
    if (Find(stripe, seg->id) == seg) (void)io_->PunchHole(seg->file, offset, len);
    queued_punches_.fetch_sub(1, std::memory_order_relaxed);
  });
}

void SegmentManager::DrainPunches() const { punch_pool_->WaitIdle(); }

Status SegmentManager::SyncData() {
  DrainPunches();  // a synced tier holds no freed blocks
  for (uint32_t si = 0; si < stripes_.size(); ++si) {
    Stripe& s = *stripes_[si];
    // Taken before the dirty flags are cleared: whatever the snapshot counts
    // was written before this Sync's fdatasync (Publish follows the write).
    const bool manifest_due = config_.persistent && s.manifest_dirty.exchange(false);
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
    if (!st.ok() && !config_.persistent && io_->Stat(s.dir).status().IsNotFound()) {
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

size_t SegmentManager::segment_count() const {
  size_t n = 0;
  for (auto& s : stripes_) {
    std::lock_guard<std::mutex> l(s->mu);
    n += s->segments.size();
  }
  return n;
}

uint64_t SegmentManager::allocated_bytes() const {
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
