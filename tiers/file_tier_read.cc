// FileTier's read path: one record (LoadImpl) or many at once (LoadBatchImpl:
// the records' aligned windows in one SubmitAndWait, so an Acquire of N
// spilled keys keeps the tier's queue depth busy instead of reading one at a
// time; a raw record of kBatchStreamedPieces blocks or more is read streamed,
// kBatchStreamedAtOnce such records at once, below), each verified and
// decoded into host memory. A window is the record's bytes rounded out to
// 4 KiB blocks, or to the segment file's direct-read alignment
// (FileHandle::read_align: 512 bytes on a disk of 512-byte logical blocks)
// where that reads at most three quarters as much:
// a 4 KiB object, whose record is a little longer, reads 4.5 KiB rather than
// two 4 KiB blocks, while a 64 KiB object keeps its 4 KiB blocks
// (docs/performance.md#tuning-constants-file-tier).
//
// A single large raw record (codec none) is read as several requests in
// flight through a ring from the tier's read-buffer cache
// (FileIo::SubmitAndWaitEach): each piece, as soon as it and every piece
// before it have arrived, is hashed and its payload copied into the object's
// blob while the later pieces are still on the disk, so the checksum and the
// copy overlap the I/O instead of following it, and a 64 MiB object needs no
// 64 MiB read window. Nothing is served before the whole record verified.
#include <algorithm>
#include <cstring>
#include <optional>
#include <system_error>
#include <thread>

#include "base/align.h"
#include "tiers/file_tier.h"

namespace spillway {
namespace {

// A single read's window up to this size uses a buffer from the tier's
// read-buffer cache (read_buffers_): a 1 MiB read into fresh memory spends
// as long faulting the pages in as the disk takes to fill them. Also the
// largest ring a streamed read uses, and the most window bytes one batch
// submission reads: its windows share one such buffer (LoadBatchImpl), in
// 2 MiB pages like every cached buffer (io_buffer_cache.h), where each
// window used to be an allocation of its own in 4 KiB pages. It bounds the
// memory a batch of large objects holds before they are decoded.
constexpr uint64_t kCachedReadLimit = 16ull << 20;

// Raw records at least this long are read piece by piece (LoadStreamed).
constexpr uint64_t kStreamedReadMin = 256ull << 10;
// Streamed reads running at once share kCachedReadLimit of ring, each
// taking the budget over the reads running when it starts (at least
// kMinStreamedRing): one reader keeps 16 requests of 1 MiB in flight, four
// about 4-8 each, so several readers touch less cold ring memory and the
// disk is not driven deeper than it serves best (docs/performance.md#tuning-constants-file-tier).
constexpr uint64_t kMinStreamedRing = 4ull << 20;
// A streamed read's requests: a quarter of the window (so a 1 MiB record
// has four in flight and only the last quarter's checksum and copy follow
// the I/O), at least kMinReadPiece, at most io.block_bytes.
constexpr uint64_t kMinReadPiece = 64ull << 10;
// Within a piece, hashed and copied in blocks that stay in cache between the two.
constexpr uint64_t kVerifyBlock = 128ull << 10;
// A batch (LoadBatchImpl) reads a raw record of at least this many
// io.block_bytes pieces streamed, on its own: such a record keeps the queue
// busy alone, and its window, a fresh allocation of the record's length,
// took a page fault per 4 KiB page as the read filled it
// (docs/performance.md#tuning-constants-file-tier).
constexpr uint64_t kBatchStreamedPieces = 4;
// Records of a batch read streamed, this many at once (the calling thread
// and helpers): one record alone has at most its own pieces in flight, and
// none while the one after it starts, so a Prefetch of 8 MiB objects kept
// the disk 9 MiB deep at best where fio's sequential read keeps 32
// (docs/performance.md#tuning-constants-file-tier).
constexpr size_t kBatchStreamedAtOnce = 2;

// A streamed read's full-size request for a tier of this io.block_bytes.
uint64_t StreamedPieceMax(uint64_t block_bytes) {
  return std::clamp(AlignDown(block_bytes, kIoAlign), kMinReadPiece, kCachedReadLimit);
}

}  // namespace

void ReadWindowBounds(uint64_t offset, uint64_t length, uint64_t fine_align, uint64_t* start, uint64_t* end) {
  *start = AlignDown(offset, kIoAlign);
  *end = AlignUp(offset + length, kIoAlign);
  if (fine_align == 0 || fine_align >= kIoAlign) return;
  const uint64_t fs = AlignDown(offset, fine_align), fe = AlignUp(offset + length, fine_align);
  if ((fe - fs) * 4 <= (*end - *start) * 3) {
    *start = fs;
    *end = fe;
  }
}

// One record's aligned read window.
struct FileTier::ReadWindow {
  SegmentPtr seg;
  uint64_t start = 0, end = 0;
  std::byte* data = nullptr;  // `owned`, or `cached`
  IoBuffer owned;
  IoBufferCache::Lease cached;
  size_t first_req = 0, num_reqs = 0;
};

Status FileTier::LocateRead(const Location& loc, ReadWindow* w) const {
  w->seg = segments_->Find(loc.stripe, loc.segment);
  if (!w->seg) return Status::Corruption(Where(loc) + ": segment file is missing");
  ReadWindowBounds(loc.offset, loc.length, w->seg->file.read_align, &w->start, &w->end);
  return Status::OK();
}

Status FileTier::PrepareRead(const Location& loc, std::byte* buffer, ReadWindow* w,
                             std::vector<IoRequest>* reqs) const {
  if (buffer != nullptr) {
    w->data = buffer;
  } else if (w->end - w->start <= kCachedReadLimit) {
    w->cached = read_buffers_.Take(w->end - w->start);
    w->data = w->cached.get();
  } else {
    w->owned = IoBuffer(w->end - w->start);
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

StatusOr<BlobPtr> FileTier::LoadStreamed(const Location& loc, std::string_view key, bool* fallback) {
  *fallback = false;
  SegmentPtr seg = segments_->Find(loc.stripe, loc.segment);
  if (!seg) return Status::Corruption(Where(loc) + ": segment file is missing");
  const uint64_t start = AlignDown(loc.offset, kIoAlign);
  const uint64_t window = AlignUp(loc.offset + loc.length, kIoAlign) - start;
  const uint64_t rel = loc.offset - start;  // the record's first byte in the window
  const uint64_t max_piece = StreamedPieceMax(config().io.block_bytes);
  const uint64_t piece = std::clamp(AlignUp((window + 3) / 4, kIoAlign), kMinReadPiece, max_piece);
  const size_t pieces = static_cast<size_t>((window + piece - 1) / piece);
  const uint32_t active = streamed_reads_.fetch_add(1, std::memory_order_relaxed) + 1;
  struct Leave {
    std::atomic<uint32_t>* n;
    ~Leave() { n->fetch_sub(1, std::memory_order_relaxed); }
  } leave{&streamed_reads_};
  const uint64_t ring_limit = std::max(kMinStreamedRing, kCachedReadLimit / active);
  const size_t ring_pieces = static_cast<size_t>(std::clamp<uint64_t>(ring_limit / piece, 1, pieces));
  IoBufferCache::Lease ring_lease = read_buffers_.Take(ring_pieces * piece);
  std::byte* ring = ring_lease.get();
  if (ring == nullptr) return Status::NoSpace(Where(loc) + ": out of memory for read buffer");
  std::vector<IoRequest> reqs(pieces);
  for (size_t k = 0; k < pieces; ++k) {
    IoRequest& r = reqs[k];
    r.op = IoRequest::Op::kRead;
    r.file = &seg->file;
    r.offset = start + k * piece;
    r.buf = ring + (k % ring_pieces) * piece;  // free again: request k - ring_pieces was verified
    r.len = static_cast<size_t>(std::min(piece, window - k * piece));
  }

  // What the pieces verified so far found. Verdicts on a record whose
  // header is sound wait for the end, in ParseRecord's order (checksum,
  // padding, tables, then the key), so both paths name the same fault.
  const uint64_t seed = RecordSeed(loc.segment, loc.offset);
  Status stop;  // the header is bad or the file ends early: the rest is not looked at
  std::optional<RecordHeader> header;
  Status tables;  // ParseRecordPrefix's verdict
  bool key_matches = false, padding_zero = true;
  uint64_t body_end = 0, payload_begin = 0, rec_end = rel + loc.length;  // window offsets
  Checksum64Stream sum;
  BlobPtr blob;
  auto verify = [&](size_t k) {
    const IoRequest& r = reqs[k];
    const uint64_t p0 = k * piece, p1 = p0 + r.len;
    const std::byte* data = static_cast<const std::byte*>(r.buf);
    // Only the record's own bytes must be there: the file may end inside the
    // last aligned block (a truncated segment), after the record.
    const uint64_t want = rec_end > p0 ? std::min<uint64_t>(r.len, rec_end - p0) : 0;
    if (r.result < 0 || static_cast<uint64_t>(r.result) < want) {
      stop = Status::Corruption(Where(loc) + ": record extends past the end of the file");
      return;
    }
    if (k == 0) {
      const std::span<const std::byte> first(data + rel, r.len - rel);
      auto h = ParseRecordHeader(first, seed);
      if (!h.ok()) {
        stop = Status::Corruption(Where(loc) + ": " + h.status().message());
        return;
      }
      const bool raw = h->codec == static_cast<uint8_t>(CodecKind::kNone) ||
                       ((h->flags & kFlagStoredRaw) && !(h->flags & kFlagChunked));
      if (!raw || RecordPrefixSize(*h) > first.size()) {
        *fallback = true;  // compressed, or tables past the first piece: read it whole
        stop = Status::NotSupported("streamed read not possible");
        return;
      }
      if (RecordSize(*h) > loc.length) {
        stop = Status::Corruption(Where(loc) + ": truncated record: " + std::to_string(loc.length) + " of " +
                                  std::to_string(RecordSize(*h)) + " bytes");
        return;
      }
      header = *h;
      rec_end = rel + RecordSize(*h);
      body_end = rel + kRecordHeaderSize + RecordBodySize(*h);
      auto info = ParseRecordPrefix(first, seed);
      if (info.ok()) {
        key_matches = info->key == key;
        payload_begin = rel + info->payload_offset;
        blob = NewHostBlob(host_alloc_, h->raw_size, std::move(info->buffer_sizes));
        if (!blob) {
          stop = Status::NoSpace(Where(loc) + ": out of memory for " + std::to_string(h->raw_size) + " bytes");
          return;
        }
      } else {
        tables = info.status();
      }
    }
    // The body (what payload_checksum covers) block by block; the payload
    // part of each block is copied out right after it is hashed.
    const uint64_t hash_end = std::min(p1, body_end);
    for (uint64_t b = std::max(p0, rel + kRecordHeaderSize); b < hash_end;) {
      const uint64_t n = std::min(kVerifyBlock, hash_end - b);
      sum.Update(data + (b - p0), n);
      const uint64_t c0 = std::max(b, payload_begin), c1 = b + n;
      if (blob && c0 < c1) std::memcpy(blob->data() + (c0 - payload_begin), data + (c0 - p0), c1 - c0);
      b += n;
    }
    for (uint64_t b = std::max(p0, body_end); b < std::min(p1, rec_end); ++b) {
      if (data[b - p0] != std::byte{0}) padding_zero = false;
    }
  };
  std::vector<char> arrived(pieces, 0);
  size_t verified = 0;  // pieces [0, verified) were looked at, in order
  auto done = [&](size_t i) {
    arrived[i] = 1;
    for (; verified < pieces && arrived[verified]; ++verified) {
      if (stop.ok()) verify(verified);
    }
  };
  Status st = io_->SubmitAndWaitEach(reqs, config().io.queue_depth, ring_pieces, done);
  if (*fallback) return stop;
  if (!st.ok()) return st.WithContext(Where(loc));
  if (!stop.ok()) return stop;
  if (verified != pieces || !header) return Status::IOError(Where(loc) + ": streamed read ended early");
  if (sum.Digest() != header->payload_checksum) {
    return Status::Corruption(Where(loc) + ": record payload checksum mismatch");
  }
  if (!padding_zero) return Status::Corruption(Where(loc) + ": record padding is not zero");
  if (!tables.ok()) return Status::Corruption(Where(loc) + ": " + tables.message());
  if (!key_matches) return Status::Corruption(Where(loc) + ": record holds a different key");
  return blob;
}

StatusOr<BlobPtr> FileTier::LoadImpl(const Location& loc, std::string_view key) {
  if (encoder_.kind() == CodecKind::kNone && loc.length >= kStreamedReadMin) {
    bool fallback = false;
    auto blob = LoadStreamed(loc, key, &fallback);
    if (!fallback) return blob;
  }
  ReadWindow w;
  std::vector<IoRequest> reqs;
  SPILLWAY_RETURN_IF_ERROR(LocateRead(loc, &w));
  SPILLWAY_RETURN_IF_ERROR(PrepareRead(loc, /*buffer=*/nullptr, &w, &reqs));
  // A large record is read as block_bytes requests, queue_depth in flight.
  Status st = io_->SubmitAndWait(reqs, config().io.queue_depth);
  if (!st.ok()) return st.WithContext(Where(loc));
  return FinishRead(loc, key, w, reqs);
}

std::vector<StatusOr<BlobPtr>> FileTier::LoadBatchImpl(std::span<const Location> locs,
                                                       std::span<const std::string_view> keys) {
  std::vector<StatusOr<BlobPtr>> out(locs.size(), StatusOr<BlobPtr>(Status::IOError("not read")));
  // A raw record this long keeps kBatchStreamedPieces full-size requests in
  // flight by itself: it is read streamed, alone (LoadImpl -> LoadStreamed),
  // through the cached ring instead of a fresh window of its own length.
  const bool raw = encoder_.kind() == CodecKind::kNone;
  const uint64_t streamed_min =
      std::max(kBatchStreamedPieces * StreamedPieceMax(config().io.block_bytes), kStreamedReadMin);
  auto streamed = [&](const Location& loc) { return raw && loc.length >= streamed_min; };
  size_t i = 0;
  while (i < locs.size()) {
    if (streamed(locs[i])) {
      // A run of streamed records: kBatchStreamedAtOnce threads take the
      // next one each as they finish (each LoadStreamed shares the ring
      // budget with the others running).
      size_t end = i;
      while (end < locs.size() && streamed(locs[end])) ++end;
      std::atomic<size_t> next{i};
      auto worker = [&] {
        for (size_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < end;) out[k] = LoadImpl(locs[k], keys[k]);
      };
      std::vector<std::thread> helpers;
      for (size_t h = 1; h < std::min(kBatchStreamedAtOnce, end - i); ++h) {
        try {
          helpers.emplace_back(worker);
        } catch (const std::system_error&) {
          break;  // no thread: this one reads them all
        }
      }
      worker();
      for (std::thread& t : helpers) t.join();
      i = end;
      continue;
    }
    // One submission of windows up to kCachedReadLimit bytes (at least
    // one), up to the next record read streamed, all in one buffer from
    // read_buffers_, each window at a kIoAlign boundary in it. A window
    // larger than that (a compressed record) is read alone into its own.
    std::vector<ReadWindow> located;
    std::vector<size_t> located_at;
    uint64_t bytes = 0;
    for (; i < locs.size() && !streamed(locs[i]); ++i) {
      ReadWindow w;
      Status st = LocateRead(locs[i], &w);
      if (!st.ok()) {
        out[i] = st;
        continue;
      }
      const uint64_t n = AlignUp(w.end - w.start, kIoAlign);
      if (!located.empty() && bytes + n > kCachedReadLimit) break;
      bytes += n;
      located.push_back(std::move(w));
      located_at.push_back(i);
    }
    if (located.empty()) continue;
    IoBufferCache::Lease shared;
    if (bytes <= kCachedReadLimit) {
      shared = read_buffers_.Take(bytes);
      if (shared.get() == nullptr) {
        for (size_t j : located_at) out[j] = Status::NoSpace(Where(locs[j]) + ": out of memory for read buffer");
        continue;
      }
    }
    std::vector<ReadWindow> windows;
    std::vector<size_t> which;
    std::vector<IoRequest> reqs;
    uint64_t at = 0;
    for (size_t k = 0; k < located.size(); ++k) {
      const size_t j = located_at[k];
      ReadWindow& w = located[k];
      Status st = PrepareRead(locs[j], shared.get() != nullptr ? shared.get() + at : nullptr, &w, &reqs);
      if (!st.ok()) {
        out[j] = st;
        continue;
      }
      at += AlignUp(w.end - w.start, kIoAlign);
      windows.push_back(std::move(w));
      which.push_back(j);
    }
    if (windows.empty()) continue;
    // Each record is verified and decoded as soon as its window has arrived,
    // while the later windows are still on the disk (SubmitAndWaitEach), not
    // after the whole submission.
    std::vector<size_t> window_of(reqs.size());
    std::vector<uint32_t> pending(windows.size());
    for (size_t k = 0; k < windows.size(); ++k) {
      pending[k] = static_cast<uint32_t>(windows[k].num_reqs);
      for (size_t r = 0; r < windows[k].num_reqs; ++r) window_of[windows[k].first_req + r] = k;
    }
    Status st = io_->SubmitAndWaitEach(reqs, config().io.queue_depth, /*max_ahead=*/0, [&](size_t r) {
      const size_t k = window_of[r];
      if (--pending[k] != 0) return;
      const size_t j = which[k];
      out[j] = FinishRead(locs[j], keys[j], windows[k],
                          std::span<const IoRequest>(reqs).subspan(windows[k].first_req, windows[k].num_reqs));
      windows[k] = ReadWindow{};
    });
    (void)st;  // a failed request leaves its window pending, below
    for (size_t k = 0; k < windows.size(); ++k) {
      if (pending[k] == 0) continue;  // decoded as it arrived
      // A request of this window failed or was cancelled (its result says
      // which); re-read the record alone so the error names it precisely
      // (and a healthy one still loads).
      const size_t j = which[k];
      windows[k] = ReadWindow{};
      out[j] = LoadImpl(locs[j], keys[j]);
    }
  }
  return out;
}

}  // namespace spillway
