// FileTier::Recover: rebuilds a persistent tier's contents at Open by scanning
// every segment's records. Each record is self-describing (docs/format.md), so
// no separate index is needed; a torn or corrupt record is skipped, reported
// and never served, and the scan resynchronizes at the next aligned offset.
#include <algorithm>
#include <cstring>

#include "tiers/file_tier.h"

namespace spillway {
namespace {

constexpr uint64_t kWindow = 4ull << 20;

// Reads byte ranges of one segment through an aligned window, so the scan
// works with O_DIRECT files and issues few large reads.
class SegmentReader {
 public:
  SegmentReader(FileIo* io, const FileHandle& f, uint64_t size) : io_(io), f_(f), size_(size) {}

  // Copies [pos, pos+len) into *out; false with a status on a short or failed read.
  Status Read(uint64_t pos, uint64_t len, std::vector<std::byte>* out) {
    if (pos + len > size_) return Status::Corruption("past end");
    if (pos < win_start_ || pos + len > win_start_ + win_len_) {
      uint64_t start = pos / kIoAlign * kIoAlign;
      uint64_t want = std::max<uint64_t>(kWindow, (pos + len - start + kIoAlign - 1) / kIoAlign * kIoAlign);
      uint64_t avail = ((size_ + kIoAlign - 1) / kIoAlign * kIoAlign) - start;
      want = std::min(want, avail);
      if (want > cap_) {
        buf_.reset(static_cast<std::byte*>(std::aligned_alloc(kIoAlign, want)));
        cap_ = buf_ ? want : 0;
        if (!buf_) return Status::NoSpace("out of memory scanning segment");
      }
      IoRequest r;
      r.op = IoRequest::Op::kRead;
      r.fd = f_.fd;
      r.offset = start;
      r.buf = buf_.get();
      r.len = want;
      IoRequest reqs[1] = {r};
      Status st = io_->SubmitAndWait(reqs, 1);
      if (!st.ok()) return st;
      win_start_ = start;
      win_len_ = static_cast<uint64_t>(std::max<ssize_t>(reqs[0].result, 0));
      if (pos + len > win_start_ + win_len_) return Status::Corruption("short read");
    }
    out->assign(buf_.get() + (pos - win_start_), buf_.get() + (pos - win_start_) + len);
    return Status::OK();
  }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  FileIo* io_;
  const FileHandle& f_;
  uint64_t size_;
  std::unique_ptr<std::byte, Free> buf_;
  uint64_t cap_ = 0;
  uint64_t win_start_ = 0;
  uint64_t win_len_ = 0;
};

}  // namespace

Status FileTier::Recover(const std::function<void(RecoveredObject&&)>& found, uint64_t* skipped,
                         std::string* report) {
  *skipped = 0;
  uint64_t max_seq = 0;
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
      seg->sealed = true;
      SegmentReader reader(io_, seg->file, *size);
      const uint64_t skipped_before = *skipped;
      std::vector<std::byte> hdr, rec;
      uint64_t pos = 0;
      while (pos + kRecordHeaderSize <= *size) {
        if (!reader.Read(pos, kRecordHeaderSize, &hdr).ok()) break;
        auto h = ParseRecordHeader(hdr);
        if (!h.ok()) {
          uint32_t magic;
          std::memcpy(&magic, hdr.data(), 4);
          if (magic == kRecordMagic) {
            ++*skipped;
            *report += s.dir + "/" + n + " offset " + std::to_string(pos) + ": " + h.status().message() + "\n";
          }
          pos += kRecordAlign;
          continue;
        }
        const uint64_t len = RecordSize(*h);
        if (h->flags & kFlagErased) {  // erased before the restart: skip it whole
          pos += len;
          continue;
        }
        Status st = reader.Read(pos, len, &rec);
        StatusOr<RecordInfo> info = st.ok() ? ParseRecord(rec) : StatusOr<RecordInfo>(st);
        if (!info.ok()) {
          ++*skipped;
          *report += s.dir + "/" + n + " offset " + std::to_string(pos) + ": " + info.status().message() + "\n";
          pos += kRecordAlign;
          continue;
        }
        RecoveredObject obj;
        obj.key.assign(info->key);
        obj.sequence = info->header.sequence;
        obj.location.stripe = si;
        obj.location.segment = id;
        obj.location.offset = pos;
        obj.location.length = len;
        obj.location.stored_bytes = len;
        obj.location.raw_bytes = info->header.raw_size;
        max_seq = std::max(max_seq, obj.sequence);
        seg->live_records.fetch_add(1);
        seg->live_bytes.fetch_add(len);
        ForceReserve(len);
        counters_.objects.fetch_add(1);
        counters_.raw_bytes.fetch_add(info->header.raw_size);
        found(std::move(obj));
        pos += len;
      }
      std::lock_guard<std::mutex> l(s.mu);
      s.next_id = std::max(s.next_id, id + 1);
      if (seg->live_records.load() == 0 && *skipped == skipped_before) {
        (void)io_->Remove(seg->file.path);  // nothing live and nothing to report
        continue;
      }
      s.segments.emplace(id, std::move(seg));
    }
  }
  sequence_.store(max_seq + 1);
  return Status::OK();
}

}  // namespace spillway
