// FileTier::Recover: rebuilds a persistent tier's contents at Open by scanning
// every segment's records (ScanSegment, tiers/segment_scan.h). Each record is
// self-describing and valid only at the position it was written for
// (docs/format.md), so no separate index is needed; torn or corrupt records
// are skipped, reported and never served.
#include <algorithm>

#include "tiers/file_tier.h"
#include "tiers/segment_scan.h"

namespace spillway {
namespace {

// Report lines kept per tier; beyond this problems are only counted, so a
// crafted file full of bad headers cannot make the report unbounded.
constexpr uint64_t kMaxReportLines = 1000;

}  // namespace

Status FileTier::Recover(const std::function<void(RecoveredObject&&)>& found, uint64_t* skipped,
                         std::string* report) {
  *skipped = 0;
  uint64_t max_seq = 0;
  uint64_t lines = 0;
  for (uint32_t si = 0; si < stripes_.size(); ++si) {
    Stripe& s = *stripes_[si];
    auto names = io_->ListDir(s.dir);
    if (!names.ok()) return names.status();
    std::sort(names->begin(), names->end());
    for (const std::string& n : *names) {
      uint32_t id;
      if (!Segment::ParseFileName(n, &id)) continue;
      OpenOptions opts;
      opts.write = true;
      opts.try_direct = config().io.direct;
      auto f = io_->Open(s.dir + "/" + n, opts);
      if (!f.ok()) return f.status().WithContext("file tier '" + name() + "': recovering");
      auto seg = std::make_shared<Segment>();
      seg->id = id;
      seg->file = std::move(*f);
      seg->io = io_;
      auto size = io_->FileSize(seg->file);
      if (!size.ok()) return size.status();
      seg->end = (*size + kIoAlign - 1) / kIoAlign * kIoAlign;
      seg->allocated = seg->end;
      seg->sealed = true;
      const uint64_t skipped_before = *skipped;
      (void)ScanSegment(*io_, seg->file, *size, id, [&](ScanItem&& it) {
        if (it.state == ScanState::kErased) return;
        if (it.state != ScanState::kLive) {
          ++*skipped;
          if (lines++ < kMaxReportLines) {
            *report += s.dir + "/" + n + " offset " + std::to_string(it.offset) + ": " +
                       ScanStateName(it.state) + ": " + it.message + "\n";
          }
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
        max_seq = std::max(max_seq, obj.sequence);
        seg->live_records.fetch_add(1);
        seg->live_bytes.fetch_add(it.length);
        ForceReserve(it.length);
        counters_.objects.fetch_add(1);
        counters_.raw_bytes.fetch_add(it.header.raw_size);
        found(std::move(obj));
      });
      std::lock_guard<std::mutex> l(s.mu);
      s.next_id = std::max(s.next_id, id + 1);
      if (seg->live_records.load() == 0 && *skipped == skipped_before) {
        (void)io_->Remove(seg->file.path);  // nothing live and nothing to report
        continue;
      }
      s.segments.emplace(id, std::move(seg));
    }
  }
  if (lines > kMaxReportLines) {
    *report += "... and " + std::to_string(lines - kMaxReportLines) + " more problems in tier '" + name() +
               "' (spillway inspect DIR lists them all)\n";
  }
  sequence_.store(max_seq + 1);
  return Status::OK();
}

}  // namespace spillway
