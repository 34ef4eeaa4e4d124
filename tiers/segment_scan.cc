// ScanSegment: the one walk over a segment file's records, shared by
// recovery and `spillway inspect`. See segment_scan.h for the rules.
#include "tiers/segment_scan.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/align.h"
#include "codecs/codec.h"
#include "tiers/io_buffer_cache.h"

namespace spillway {
namespace {

constexpr uint64_t kWindow = 4ull << 20;
constexpr uint64_t kProgressEvery = 16ull << 20;

// An aligned read window over the file (works with O_DIRECT handles). Any
// range of at most kWindow bytes can be viewed; memory is fixed.
class Window {
 public:
  Window(FileIo& io, const FileHandle& f, uint64_t size) : io_(io), f_(f), size_(size) {}

  // Bytes [pos, pos + len), len <= kWindow, pos + len <= size; null with *st
  // set on failure (the window is then empty, never stale).
  const std::byte* Get(uint64_t pos, uint64_t len, Status* st) {
    if (pos >= start_ && pos + len <= start_ + valid_) return buf_.get() + (pos - start_);
    valid_ = 0;
    if (!buf_) {
      buf_ = IoBuffer(kWindow + kIoAlign);
      if (!buf_) {
        *st = Status::NoSpace("out of memory for a " + std::to_string(kWindow) + "-byte scan window");
        return nullptr;
      }
    }
    const uint64_t start = AlignDown(pos, kIoAlign);
    const uint64_t end = std::min(AlignUp(size_, kIoAlign), start + kWindow + kIoAlign);
    IoRequest r;
    r.op = IoRequest::Op::kRead;
    r.file = &f_;
    r.offset = start;
    r.buf = buf_.get();
    r.len = end - start;
    IoRequest reqs[1] = {r};
    *st = io_.SubmitAndWait(reqs, 1);
    if (!st->ok()) return nullptr;
    start_ = start;
    valid_ = static_cast<uint64_t>(std::max<ssize_t>(reqs[0].result, 0));
    if (pos + len > start_ + valid_) {
      valid_ = 0;
      *st = Status::IOError("short read at offset " + std::to_string(pos) + " (the file shrank?)");
      return nullptr;
    }
    return buf_.get() + (pos - start_);
  }

  // First hole at or after `pos` (size when none): punched or never written
  // ranges read as zeros and must not be mistaken for data.
  uint64_t NextHole(uint64_t pos) const {
    const StatusOr<uint64_t> h = io_.NextHole(f_, pos);
    return h.ok() ? std::min<uint64_t>(*h, size_) : size_;
  }
  // Start of data at or after `pos` (size when only a hole follows; `pos`
  // when the filesystem cannot tell).
  uint64_t NextData(uint64_t pos) const {
    const StatusOr<uint64_t> d = io_.NextData(f_, pos);
    return d.ok() ? std::min<uint64_t>(*d, size_) : pos;
  }

 private:
  FileIo& io_;
  const FileHandle& f_;
  uint64_t size_;
  IoBuffer buf_;
  uint64_t start_ = 0;
  uint64_t valid_ = 0;
};

}  // namespace

const char* ScanStateName(ScanState s) {
  switch (s) {
    case ScanState::kLive: return "live";
    case ScanState::kErased: return "erased";
    case ScanState::kCorrupt: return "corrupt";
    case ScanState::kTorn: return "torn";
    case ScanState::kFreed: return "freed";
    case ScanState::kUnreadable: return "unreadable";
  }
  return "?";
}

Status ScanSegment(FileIo& io, const FileHandle& file, uint64_t size, uint32_t segment_id,
                   const std::function<void(ScanItem&&)>& emit,
                   const std::function<void(uint64_t)>& progress) {
  Window w(io, file, size);
  Status st;
  auto problem = [&](uint64_t off, ScanState state, std::string msg) {
    ScanItem it;
    it.state = state;
    it.offset = off;
    it.message = std::move(msg);
    emit(std::move(it));
  };
  auto unreadable = [&](uint64_t off) {
    problem(off, ScanState::kUnreadable, st.ToString());
    return st;
  };
  // The key of a record with a valid header, when its bytes are on disk
  // (`hole`: the first hole at or after the record).
  auto read_key = [&](uint64_t pos, uint64_t hole, const RecordHeader& h, ScanItem* it) {
    const uint64_t key_end = pos + kRecordHeaderSize + h.key_len;
    if (key_end > size || hole < key_end) return;
    Status ks;
    if (const std::byte* k = w.Get(pos + kRecordHeaderSize, h.key_len, &ks)) {
      it->key.assign(reinterpret_cast<const char*>(k), h.key_len);
    }
  };

  uint64_t pos = 0;
  // True while stepping over what follows something unreadable (the rest of
  // a damaged record): only a valid header, or garbage where a record is
  // `expected`, ends or interrupts it.
  bool resync = false;
  uint64_t expected = 0;  // where a record should start (after zero padding)
  uint64_t next_progress = 0;
  while (pos + kRecordAlign <= size) {
    if (progress && pos >= next_progress) {
      progress(pos);
      next_progress = pos + kProgressEvery;
    }
    if (pos % kIoAlign == 0) {
      const uint64_t data = w.NextData(pos);
      if (data > pos) {  // a hole: punched (freed) or never written
        pos = data;
        resync = true;
        continue;
      }
    }
    const std::byte* wp = w.Get(pos, kRecordAlign, &st);
    if (wp == nullptr) return unreadable(pos);
    uint64_t word;
    std::memcpy(&word, wp, sizeof word);
    if (word == 0) {
      // Padding: after the last record of a slab, zeros run to the next block.
      if (pos == expected) expected = AlignUp(pos + 1, kIoAlign);
      pos += kRecordAlign;
      continue;
    }
    uint32_t magic;
    std::memcpy(&magic, wp, sizeof magic);
    if (magic != kRecordMagic) {
      if (!resync || pos == expected) {
        problem(pos, ScanState::kCorrupt, "unrecognized bytes where a record or zero padding should start");
        resync = true;
      }
      pos += kRecordAlign;
      continue;
    }
    if (pos + kRecordHeaderSize > size) {
      problem(pos, ScanState::kTorn, "record header cut off by the end of the file");
      break;
    }
    // One lseek per candidate record: every hole check below uses it.
    const uint64_t hole = w.NextHole(pos);
    if (hole < pos + kRecordHeaderSize) {
      problem(pos, ScanState::kFreed, "record header partly punched out (an erased object)");
      resync = true;
      pos += kRecordAlign;
      continue;
    }
    const std::byte* hp = w.Get(pos, kRecordHeaderSize, &st);
    if (hp == nullptr) return unreadable(pos);
    auto h = ParseRecordHeader(std::span<const std::byte>(hp, kRecordHeaderSize), RecordSeed(segment_id, pos));
    if (!h.ok()) {
      problem(pos, ScanState::kCorrupt, h.status().message());
      resync = true;
      pos += kRecordAlign;
      continue;
    }
    // The header is valid at this very position. A record that verifies is
    // stepped over whole; after one that does not (torn, freed, corrupt
    // body) the walk goes on 8 bytes at a time with the record's end as the
    // `expected` start, so a length that only a crafted file could hold
    // cannot hide the records behind it.
    const uint64_t len = RecordSize(*h);
    ScanItem it;
    it.offset = pos;
    it.length = len;
    it.has_header = true;
    it.header = *h;
    resync = false;
    expected = 0;
    if (h->flags & kFlagErased) {
      it.state = ScanState::kErased;
      read_key(pos, hole, *h, &it);
      emit(std::move(it));
      pos += len;
      continue;
    }
    if (len > size - pos) {
      it.state = ScanState::kTorn;
      it.message = "record of " + std::to_string(len) + " bytes runs past the end of the file (" +
                   std::to_string(size - pos) + " bytes left)";
      read_key(pos, hole, *h, &it);
      emit(std::move(it));
      resync = true;
      pos += kRecordAlign;
      continue;
    }
    if (hole < pos + len) {
      it.state = ScanState::kFreed;
      it.message = "blocks punched out or never written (an erased object, or an interrupted write)";
      read_key(pos, hole, *h, &it);
      emit(std::move(it));
      resync = true;
      expected = pos + len;
      pos += kRecordAlign;
      continue;
    }
    // Stream the body through the window: memory stays bounded whatever the
    // header claims (it is bounded by the file anyway: checked above).
    const uint64_t body = RecordBodySize(*h);
    Checksum64Stream sum;
    bool read_failed = false;
    for (uint64_t off = pos + kRecordHeaderSize, end = off + body; off < end;) {
      const uint64_t n = std::min(kWindow, end - off);
      const std::byte* p = w.Get(off, n, &st);
      if (p == nullptr) {
        read_failed = true;
        break;
      }
      sum.Update(p, n);
      off += n;
    }
    if (read_failed) return unreadable(pos);
    bool padding_ok = true;
    if (const uint64_t pad_from = pos + kRecordHeaderSize + body; pad_from < pos + len) {
      const std::byte* p = w.Get(pad_from, pos + len - pad_from, &st);
      if (p == nullptr) return unreadable(pos);
      for (uint64_t i = 0; i < pos + len - pad_from; ++i) padding_ok &= p[i] == std::byte{0};
    }
    read_key(pos, hole, *h, &it);
    if (sum.Digest() == h->payload_checksum && padding_ok) {
      it.state = ScanState::kLive;
      emit(std::move(it));
      pos += len;
      continue;
    }
    it.state = ScanState::kCorrupt;
    it.message = padding_ok ? "record payload checksum mismatch" : "record padding is not zero";
    emit(std::move(it));
    resync = true;
    expected = pos + len;
    pos += kRecordAlign;
  }
  if (progress) progress(size);
  return Status::OK();
}

}  // namespace spillway
