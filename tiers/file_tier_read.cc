// FileTier's read path: one record (LoadImpl) or many at once (LoadBatchImpl:
// every record's aligned window in one SubmitAndWait, so an Acquire of N
// spilled keys keeps the tier's queue depth busy instead of reading one at a
// time), each verified and decoded into host memory.
#include <algorithm>

#include "tiers/file_tier.h"

namespace spillway {
namespace {

// Windows read in one submission, at most: bounds the memory a batch of
// large objects holds before it is decoded.
constexpr uint64_t kMaxBatchWindowBytes = 64ull << 20;
// A single read's window up to this size uses a buffer kept per thread:
// a 1 MiB read into fresh memory spends as long faulting the pages in as
// the disk takes to fill them.
constexpr uint64_t kCachedReadLimit = 16ull << 20;

uint64_t AlignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
uint64_t AlignDown(uint64_t v, uint64_t a) { return v / a * a; }

struct AlignedFree {
  void operator()(std::byte* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<std::byte, AlignedFree>;

std::byte* AllocWindow(uint64_t bytes) {
  return static_cast<std::byte*>(std::aligned_alloc(kIoAlign, std::max<uint64_t>(AlignUp(bytes, kIoAlign), kIoAlign)));
}

// This thread's reusable read buffer of at least `bytes` (<= kCachedReadLimit).
std::byte* ThreadReadBuffer(uint64_t bytes) {
  thread_local AlignedBuffer cached;
  thread_local uint64_t cached_size = 0;
  if (cached_size < bytes) {
    const uint64_t size = std::min(AlignUp(bytes, 1 << 20), kCachedReadLimit);
    cached.reset(AllocWindow(size));
    cached_size = cached ? size : 0;
  }
  return cached.get();
}

}  // namespace

// One record's aligned read window.
struct FileTier::ReadWindow {
  SegmentPtr seg;
  uint64_t start = 0, end = 0;
  std::byte* data = nullptr;  // `owned`, or this thread's read buffer
  AlignedBuffer owned;
  size_t first_req = 0, num_reqs = 0;
};

Status FileTier::PrepareRead(const Location& loc, bool thread_buffer, ReadWindow* w,
                             std::vector<IoRequest>* reqs) const {
  w->seg = FindSegment(loc.stripe, loc.segment);
  if (!w->seg) return Status::Corruption(Where(loc) + ": segment file is missing");
  w->start = AlignDown(loc.offset, kIoAlign);
  w->end = AlignUp(loc.offset + loc.length, kIoAlign);
  if (thread_buffer && w->end - w->start <= kCachedReadLimit) {
    w->data = ThreadReadBuffer(w->end - w->start);
  } else {
    w->owned.reset(AllocWindow(w->end - w->start));
    w->data = w->owned.get();
  }
  if (w->data == nullptr) return Status::NoSpace(Where(loc) + ": out of memory for read buffer");
  w->first_req = reqs->size();
  const uint64_t block = config().io.block_bytes;
  for (uint64_t done = 0; done < w->end - w->start; done += block) {
    IoRequest r;
    r.op = IoRequest::Op::kRead;
    r.file = &w->seg->file;
    r.offset = w->start + done;
    r.buf = w->data + done;
    r.len = static_cast<size_t>(std::min(block, w->end - w->start - done));
    reqs->push_back(r);
  }
  w->num_reqs = reqs->size() - w->first_req;
  return Status::OK();
}

StatusOr<BlobPtr> FileTier::FinishRead(const Location& loc, std::string_view key, const ReadWindow& w,
                                       std::span<const IoRequest> reqs) {
  // Only the record's own bytes must be there: the file may end inside the
  // last aligned block (a truncated segment), after the record.
  const uint64_t need = loc.offset + loc.length;
  for (const IoRequest& r : reqs) {
    const uint64_t want = std::min<uint64_t>(r.len, need > r.offset ? need - r.offset : 0);
    if (r.result < 0 || static_cast<uint64_t>(r.result) < want) {
      return Status::Corruption(Where(loc) + ": record extends past the end of the file");
    }
  }
  std::span<const std::byte> rec(w.data + (loc.offset - w.start), loc.length);
  auto info = ParseRecord(rec, RecordSeed(loc.segment, loc.offset));
  if (!info.ok()) return Status::Corruption(Where(loc) + ": " + info.status().message());
  if (info->key != key) return Status::Corruption(Where(loc) + ": record holds a different key");
  const uint64_t raw = info->header.raw_size;
  BlobPtr blob = NewHostBlob(host_alloc_, raw, info->buffer_sizes);
  if (!blob) return Status::NoSpace(Where(loc) + ": out of memory for " + std::to_string(raw) + " bytes");
  Status st = DecodeRecordPayload(*info, rec, std::span<std::byte>(blob->data(), raw));
  if (!st.ok()) return Status::Corruption(Where(loc) + ": " + st.message());
  return blob;
}

StatusOr<BlobPtr> FileTier::LoadImpl(const Location& loc, std::string_view key) {
  ReadWindow w;
  std::vector<IoRequest> reqs;
  SPILLWAY_RETURN_IF_ERROR(PrepareRead(loc, /*thread_buffer=*/true, &w, &reqs));
  // A large record is read as block_bytes requests, queue_depth in flight.
  Status st = io_->SubmitAndWait(reqs, config().io.queue_depth);
  if (!st.ok()) return st.WithContext(Where(loc));
  return FinishRead(loc, key, w, reqs);
}

std::vector<StatusOr<BlobPtr>> FileTier::LoadBatchImpl(std::span<const Location> locs,
                                                       std::span<const std::string_view> keys) {
  std::vector<StatusOr<BlobPtr>> out(locs.size(), StatusOr<BlobPtr>(Status::IOError("not read")));
  size_t i = 0;
  while (i < locs.size()) {
    // One submission of windows up to kMaxBatchWindowBytes (at least one).
    std::vector<ReadWindow> windows;
    std::vector<size_t> which;
    std::vector<IoRequest> reqs;
    uint64_t bytes = 0;
    for (; i < locs.size() && (windows.empty() || bytes + locs[i].length <= kMaxBatchWindowBytes); ++i) {
      ReadWindow w;
      Status st = PrepareRead(locs[i], /*thread_buffer=*/false, &w, &reqs);
      if (!st.ok()) {
        out[i] = st;
        continue;
      }
      bytes += w.end - w.start;
      windows.push_back(std::move(w));
      which.push_back(i);
    }
    if (windows.empty()) continue;
    Status st = io_->SubmitAndWait(reqs, config().io.queue_depth);
    for (size_t k = 0; k < windows.size(); ++k) {
      const size_t j = which[k];
      if (!st.ok()) {
        // Which request failed is in its result; re-read alone so the error
        // names this record precisely (and a healthy one still loads).
        out[j] = LoadImpl(locs[j], keys[j]);
        continue;
      }
      out[j] = FinishRead(locs[j], keys[j], windows[k],
                          std::span<const IoRequest>(reqs).subspan(windows[k].first_req, windows[k].num_reqs));
    }
  }
  return out;
}

}  // namespace spillway
