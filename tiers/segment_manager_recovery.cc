// SegmentManager::Recover: rebuilds a persistent tier's contents at Open by scanning
// every segment's records (ScanSegment, tiers/segment_scan.h). Each record is
// self-describing and valid only at the position it was written for
// (docs/format.md), so no separate index is needed; torn or corrupt records
// are skipped, reported and never served. The segment manifest
// (tiers/segment_manifest.h) says how many records the last Flush left below
// which offset, so records lost whole (a zeroed block, a truncation) are
// reported too.
//
// Nothing is deleted until every segment was read: a read error stops Open
// with nothing changed, so a later free cannot delete the records a partial
// scan did not read.
#include <algorithm>
#include <cstdio>

#include "base/align.h"
#include "tiers/segment_manager.h"
#include "tiers/segment_manifest.h"
#include "tiers/segment_scan.h"

namespace spillway {
namespace {

// Report lines kept per tier; beyond this problems are only counted, so a
// crafted file full of bad headers cannot make the report unbounded.
constexpr uint64_t kMaxReportLines = 1000;

}  // namespace

Status SegmentManager::Recover(const std::function<void(RecoveredObject&&)>& found, uint64_t* skipped,
                               std::string* report, uint64_t* missing) {
  uint64_t missing_here = 0;
  if (missing == nullptr) missing = &missing_here;
  *skipped = 0;
  *missing = 0;
  uint64_t lines = 0;
  auto line = [&](const std::string& text) {
    if (lines++ < kMaxReportLines) *report += text + "\n";
  };
  // Per stripe: segments with nothing in them, deleted once everything was
  // read; the manifest found and the one to write.
  std::vector<std::vector<SegmentPtr>> empty_segments(stripes_.size());
  std::vector<Manifest> expected_by_stripe(stripes_.size());
  std::vector<Manifest> manifests(stripes_.size());
  for (uint32_t si = 0; si < stripes_.size(); ++si) {
    Stripe& s = *stripes_[si];
    Manifest& expected = expected_by_stripe[si];
    if (auto m = ReadManifest(*io_, s.dir); m.ok()) {
      expected = std::move(*m);
    } else if (m.status().code() == StatusCode::kCorruption) {
      ++*skipped;
      line(m.status().message() + ": ignored; records lost whole cannot be detected this time");
    } else if (!m.status().IsNotFound()) {
      return m.status().WithContext("file tier '" + name() + "': recovering; nothing was deleted");
    }
    auto names = io_->ListDir(s.dir);
    if (!names.ok()) return names.status();
    std::sort(names->begin(), names->end());
    for (const std::string& n : *names) {
      uint32_t id;
      if (!Segment::ParseFileName(n, &id)) continue;
      const std::string path = s.dir + "/" + n;
      auto info = io_->Stat(path);
      if (!info.ok()) return info.status().WithContext("file tier '" + name() + "': recovering");
      if (info->type != FileInfo::Type::kRegular) {
        ++*skipped;
        line(path + ": not a regular file; left alone");
        continue;
      }
      // Only this user's engine writes segments: another user's file was
      // planted, and its records must not be served.
      if (!info->owned) {
        ++*skipped;
        line(path + ": owned by uid " + std::to_string(info->uid) + ", not by this user; left alone, not served");
        continue;
      }
      OpenOptions opts;
      opts.write = true;
      opts.try_direct = config_.io.direct;
      // The segment's last writer may have been killed with writes to it
      // still in flight: they land after it is gone, and would make a record
      // this scan found torn whole again later (a version that comes back
      // after another was served). Its lock on the file lasts until they
      // have landed; wait for it.
      opts.lock = true;
      auto f = io_->Open(path, opts);
      if (!f.ok()) return f.status().WithContext("file tier '" + name() + "': recovering");
      auto seg = std::make_shared<Segment>();
      seg->id = id;
      seg->file = std::move(*f);
      seg->io = io_;
      auto size = io_->FileSize(seg->file);
      if (!size.ok()) return size.status();
      seg->end = AlignUp(*size, kIoAlign);
      seg->allocated = seg->end;
      seg->sealed = true;
      const auto listed = expected.find(id);
      const uint64_t committed_end = listed == expected.end() ? 0 : listed->second.committed_end;
      SegmentTally tally;
      tally.file_size = *size;
      uint64_t items = 0;
      const uint64_t skipped_before = *skipped;
      Status scanned = ScanSegment(*io_, seg->file, *size, id, [&](ScanItem&& it) {
        if (it.state == ScanState::kUnreadable) return;  // the returned status says it
        ++items;
        if (it.offset < committed_end) ++tally.headers_below;
        if (it.state == ScanState::kErased) return;
        if (it.state != ScanState::kLive) {
          ++*skipped;
          line(path + " offset " + std::to_string(it.offset) + ": " + ScanStateName(it.state) + ": " + it.message);
          return;
        }
        RecoveredObject obj;
        obj.key = std::move(it.key);
        obj.sequence = it.header.sequence;
        obj.engine_sequence = (it.header.flags & kFlagEngineSequence) != 0;
        obj.location.stripe = si;
        obj.location.segment = id;
        obj.location.offset = it.offset;
        obj.location.length = it.length;
        obj.location.stored_bytes = it.length;
        obj.location.raw_bytes = it.header.raw_size;
        seg->live_records.fetch_add(1);
        seg->live_bytes.fetch_add(it.length);
        found(std::move(obj));
      });
      if (!scanned.ok()) {
        return Status::IOError("file tier '" + name() + "': reading " + path + " while recovering: " +
                               scanned.message() +
                               "; Open stopped and nothing was deleted (fix the disk or move the file away, then reopen)");
      }
      // A damaged segment keeps what the manifest promised, so the loss is
      // reported at every Open (and by inspect) for as long as it exists.
      ManifestEntry entry{*size, items};
      if (listed != expected.end()) {
        const std::string problem = CheckSegment(listed->second, tally);
        if (!problem.empty()) {
          *missing += std::max<uint64_t>(1, MissingRecords(listed->second, tally));
          line(path + ": " + problem);
          entry = listed->second;
        }
      }
      seg->published_end = entry.committed_end;
      seg->published_records = entry.records;
      std::lock_guard<std::mutex> l(s.mu);
      s.next_id = std::max(s.next_id, id + 1);
      if (seg->live_records.load() == 0 && *skipped == skipped_before && entry.records == items) {
        empty_segments[si].push_back(std::move(seg));  // nothing live and nothing to report
        continue;
      }
      manifests[si][id] = entry;
      s.segments.emplace(id, std::move(seg));
    }
  }
  if (lines > kMaxReportLines) {
    *report += "... and " + std::to_string(lines - kMaxReportLines) + " more problems in tier '" + name() +
                 "' (spillway inspect DIR lists them all)\n";
  }
  // The manifest first, without the empty segments, then their files: a
  // crash in between leaves files the next recovery deletes again. Written
  // only when it changes; when it cannot be, the empty segments stay (the
  // next recovery deletes them) and the next Sync tries again.
  for (uint32_t si = 0; si < stripes_.size(); ++si) {
    Stripe& s = *stripes_[si];
    bool written = manifests[si] == expected_by_stripe[si];
    if (!written) {
      Status st = WriteManifest(*io_, s.dir, manifests[si]);
      written = st.ok();
      if (!written) {
        s.manifest_dirty.store(true);
        io_->logger()->Log(LogLevel::kWarning, "tier '" + name() + "': " + st.ToString() + " (the next Flush writes it)");
      }
    }
    if (!written) continue;
    for (const SegmentPtr& seg : empty_segments[si]) (void)io_->Remove(seg->file.path);
  }
  return Status::OK();
}

}  // namespace spillway
