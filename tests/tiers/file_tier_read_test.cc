// FileTier's streamed reads (file_tier_read.cc): a large raw record is read
// as several requests in flight through a ring buffer, each piece verified
// and copied out as it arrives. Objects that fill the ring several times
// over read back intact over every FileIo; a request failing in the middle
// (an injected EIO) fails the Load with an error naming the file and the
// offset and loses nothing (the next Load serves the object); a damaged
// byte past the first ring's worth is Corruption; a record cut short by a
// truncated file is Corruption, never a short object. A batch (LoadBatch)
// streams its large raw records, two at a time, and reads the others'
// windows together, holding each window only until its record is decoded. Streamed
// reads running at once share one ring budget.
#include <doctest/doctest.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "file_tier_test_util.h"
#include "tier_conformance.h"
#include "tiers/file_tier.h"
#include "tiers/io/fault_file_io.h"
#include "tiers/io/mem_file_io.h"
#include "tiers/segment.h"

namespace spillway {
namespace {

using testing::FlipByteAt;
using testing::MakeObj;
using testing::RandomBytes;
using testing::StoreAll;
using testing::TempDir;
using Obj = testing::TestObject;

TierConfig FileConfig(const std::string& dir) {
  TierConfig c;
  c.name = "file";
  c.kind = TierKind::kFile;
  c.capacity_bytes = 4ull << 30;
  c.codec.kind = CodecKind::kNone;
  c.paths = {dir};
  return c;
}

// Loads `loc` and compares it with `o`; the reason in `*why` when it differs.
bool ReadsBack(FileTier& tier, const Location& loc, const Obj& o, std::string* why) {
  auto blob = tier.Load(loc, o.key);
  if (!blob.ok()) {
    *why = blob.status().ToString();
    return false;
  }
  const auto want = o.concat();
  if ((*blob)->size() != want.size() || std::memcmp((*blob)->data(), want.data(), want.size()) != 0) {
    *why = "bytes differ";
    return false;
  }
  std::vector<uint64_t> sizes;
  for (const auto& b : o.bufs) sizes.push_back(b.size());
  if ((*blob)->buffer_sizes() != sizes) {
    *why = "buffer sizes differ";
    return false;
  }
  return true;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// io_uring (where the kernel allows it), POSIX, and with `memory` MemFileIo.
std::vector<std::unique_ptr<FileIo>> AllIo(bool memory = true) {
  std::vector<std::unique_ptr<FileIo>> v;
  if (auto uring = MakeUringFileIo(); uring.ok()) {
    v.push_back(std::move(*uring));
  } else {
    MESSAGE(uring.status().message() << " (io_uring half of this case skipped)");
  }
  v.push_back(MakePosixFileIo());
  if (memory) v.push_back(std::make_unique<MemFileIo>());
  return v;
}

TEST_CASE("large raw records are read piece by piece and arrive intact over every FileIo") {
  for (auto& io : AllIo()) {
    INFO("FileIo: " << std::string(io->name()));
    const bool mem = std::string(io->name()) == "memory";
    TempDir tmp("fread");
    const std::string dir = mem ? "/tier" : tmp.path();
    FileTier tier(FileConfig(dir), 1, io.get(), nullptr);
    REQUIRE(tier.Open().ok());
    std::vector<Obj> objs;
    objs.push_back(MakeObj("quarter-pieces", {300 << 10}, 1));        // 4 pieces of the 64 KiB minimum and more
    objs.push_back(MakeObj("one-mib", {(1 << 20) + 13}, 2));          // in a slab, at an unaligned offset
    objs.push_back(MakeObj("wraps-twice", {40 << 20}, 3));           // 16 MiB ring: reused twice
    objs.push_back(MakeObj("buffers", {3 << 20, 0, 5 << 20, 777}, 4));  // several buffers, one empty
    objs.push_back(MakeObj(std::string(5000, 'k'), {2 << 20}, 5));    // a key longer than a block
    auto locs = StoreAll(tier, objs);
    REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
    for (size_t i = 0; i < objs.size(); ++i) {
      CAPTURE(objs[i].key.substr(0, 16));
      std::string why;
      CHECK_MESSAGE(ReadsBack(tier, (*locs)[i], objs[i], &why), why);
    }
    // The wrong key for a location is Corruption, never another object's bytes.
    CHECK(tier.Load((*locs)[2], "one-mib").status().IsCorruption());
    for (Location& l : *locs) tier.Free(l);
  }
}

TEST_CASE("a read failing in the middle of a streamed record fails the Load and loses nothing") {
  TempDir dir("fread");
  auto base = MakeFileIo(IoEngine::kAuto);
  FaultFileIo io(base.get(), FaultSpec{});
  FileTier tier(FileConfig(dir.path()), 1, &io, nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<Obj> objs;
  objs.push_back(MakeObj("big", {24 << 20}, 9));  // 25 read requests of 1 MiB
  auto locs = StoreAll(tier, objs);
  REQUIRE(locs.ok());
  const Location loc = (*locs)[0];
  // The first, a middle one (past the first ring's worth) and the last.
  for (uint64_t nth : {uint64_t{0}, uint64_t{18}, uint64_t{24}}) {
    CAPTURE(nth);
    io.FailNth(FaultKind::kEioRead, io.counts().reads + nth);
    const uint64_t errors = tier.counters().io_errors.load();
    auto blob = tier.Load(loc, "big");
    REQUIRE_FALSE(blob.ok());
    CHECK(blob.status().IsIOError());
    const std::string msg = blob.status().message();
    CHECK_MESSAGE(Contains(msg, "injected fault"), msg);
    CHECK_MESSAGE(Contains(msg, Segment::FileName(loc.segment)), msg);
    CHECK_MESSAGE(Contains(msg, "offset " + std::to_string(loc.offset / kIoAlign * kIoAlign + nth * (1 << 20))), msg);
    CHECK(tier.counters().io_errors.load() == errors + 1);
    CHECK(io.counts().of(FaultKind::kEioRead) >= 1);
    // The fault clears: the record is untouched and the next Load serves it.
    std::string why;
    CHECK_MESSAGE(ReadsBack(tier, loc, objs[0], &why), why);
  }
  tier.Free((*locs)[0]);
}

TEST_CASE("a damaged byte deep in a streamed record, or a record cut short, is Corruption") {
  TempDir dir("fread");
  auto io = MakeFileIo(IoEngine::kAuto);
  FileTier tier(FileConfig(dir.path()), 1, io.get(), nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<Obj> objs;
  objs.push_back(MakeObj("damaged", {30 << 20}, 11));
  objs.push_back(MakeObj("neighbour", {2 << 20}, 12));
  auto locs = StoreAll(tier, objs);
  REQUIRE(locs.ok());
  REQUIRE(tier.Sync().ok());
  const Location bad = (*locs)[0];
  REQUIRE(FlipByteAt(*io, dir.path(), bad.segment, bad.offset + bad.length - 12345).ok());
  const uint64_t failures = tier.counters().checksum_failures.load();
  auto blob = tier.Load(bad, "damaged");
  REQUIRE_FALSE(blob.ok());
  CHECK_MESSAGE(blob.status().IsCorruption(), blob.status().ToString());
  CHECK(Contains(blob.status().message(), "checksum mismatch"));
  CHECK(tier.counters().checksum_failures.load() == failures + 1);
  std::string why;
  CHECK_MESSAGE(ReadsBack(tier, (*locs)[1], objs[1], &why), why);

  // Stored last, so it is the segment's last record: the truncation cuts only it.
  std::vector<Obj> last;
  last.push_back(MakeObj("cut", {6 << 20}, 13));
  auto cut_locs = StoreAll(tier, last);
  REQUIRE(cut_locs.ok());
  const Location cut = (*cut_locs)[0];
  for (const Location& l : *locs) {
    if (l.segment == cut.segment) REQUIRE(l.offset + l.length <= cut.offset);
  }
  {
    OpenOptions o;
    o.write = true;
    auto f = io->Open(dir.path() + "/" + Segment::FileName(cut.segment), o);
    REQUIRE(f.ok());
    REQUIRE(io->Truncate(*f, cut.offset / kIoAlign * kIoAlign + (3 << 20)).ok());
    (void)io->Close(*f);
  }
  blob = tier.Load(cut, "cut");
  REQUIRE_FALSE(blob.ok());
  CHECK_MESSAGE(blob.status().IsCorruption(), blob.status().ToString());
  CHECK(Contains(blob.status().message(), "past the end of the file"));
  CHECK_MESSAGE(ReadsBack(tier, (*locs)[1], objs[1], &why), why);
  for (Location& l : *locs) tier.Free(l);
  tier.Free((*cut_locs)[0]);
}

// Counts streamed submissions (SubmitAndWaitEach, forwarded so the target's
// own overlap runs) and the largest batch of reads one SubmitAndWait carried.
class SubmissionCountingIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    Note(r);
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  // A streamed read keeps a ring of `max_ahead` pieces; a batch's windows go
  // in one submission, with no bound (0), each decoded as it arrives.
  Status SubmitAndWaitEach(std::span<IoRequest> r, uint32_t qd, size_t max_ahead,
                           const std::function<void(size_t)>& done) override {
    if (max_ahead > 0) {
      ++streamed;
    } else {
      Note(r);
    }
    return target()->SubmitAndWaitEach(r, qd, max_ahead, done);
  }
  void Note(std::span<const IoRequest> r) {
    uint64_t bytes = 0;
    for (const IoRequest& q : r) {
      if (q.op == IoRequest::Op::kRead) bytes += q.len;
    }
    largest_read_submission = std::max(largest_read_submission, bytes);
  }
  uint64_t largest_read_submission = 0;
  std::atomic<int> streamed{0};
};

// A file tier in a fresh directory whose I/O goes through a `Wrapper` of
// the machine's FileIo (io_uring where it can).
template <class Wrapper>
struct WrappedTier {
  TempDir dir{"fread"};
  std::unique_ptr<FileIo> base = MakeFileIo(IoEngine::kAuto);
  Wrapper io{base.get()};
  FileTier tier{FileConfig(dir.path()), 1, &io, nullptr};
};

TEST_CASE("a batch reads its large raw records streamed and the rest in one submission") {
  WrappedTier<SubmissionCountingIo> w;
  auto& [dir, base, io, tier] = w;
  REQUIRE(tier.Open().ok());
  // At the default 1 MiB block size, records of 4 MiB and more are streamed.
  std::vector<Obj> objs;
  objs.push_back(MakeObj("small", {100 << 10}, 21));
  objs.push_back(MakeObj("large", {8 << 20}, 22));
  objs.push_back(MakeObj("medium", {300 << 10}, 23));  // streamed when read alone, batched here
  objs.push_back(MakeObj("two-mib", {2 << 20}, 24));
  objs.push_back(MakeObj("large-odd", {(5 << 20) + 13, 4096}, 25));
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(tier.Sync().ok());
  std::vector<std::string_view> keys;
  for (const Obj& o : objs) keys.push_back(o.key);

  auto check_batch = [&](int bad) {
    io.largest_read_submission = 0;
    io.streamed = 0;
    auto blobs = tier.LoadBatch(*locs, keys);
    REQUIRE(blobs.size() == objs.size());
    for (size_t i = 0; i < objs.size(); ++i) {
      CAPTURE(objs[i].key);
      if (static_cast<int>(i) == bad) {
        CHECK_MESSAGE(blobs[i].status().IsCorruption(), blobs[i].status().ToString());
        continue;
      }
      REQUIRE_MESSAGE(blobs[i].ok(), blobs[i].status().ToString());
      const auto want = objs[i].concat();
      CHECK((*blobs[i])->size() == want.size());
      CHECK(std::memcmp((*blobs[i])->data(), want.data(), want.size()) == 0);
    }
    CHECK(io.streamed == 2);
    // The small records' windows went in submissions that never held a large record's.
    CHECK(io.largest_read_submission > 0);
    CHECK(io.largest_read_submission < (5ull << 20));
  };
  check_batch(-1);
  // A damaged byte deep in a streamed record of the batch fails that record only.
  const Location& large = (*locs)[1];
  REQUIRE(FlipByteAt(*base, dir.path(), large.segment, large.offset + large.length - 4321).ok());
  check_batch(1);
  for (Location& l : *locs) tier.Free(l);
}

// The C library's bytes in use (heap and mapped blocks) at each allocation
// of an object's memory, the highest seen.
class PeakSamplingAllocator final : public HostAllocator {
 public:
  static uint64_t InUse() {
    const struct mallinfo2 m = mallinfo2();
    return m.uordblks + m.hblkhd;
  }
  std::byte* Allocate(uint64_t bytes) override {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(64, (bytes + 63) & ~uint64_t{63}));
    peak = std::max(peak, InUse());
    return p;
  }
  void Free(std::byte* p, uint64_t) override { std::free(p); }
  uint64_t peak = 0;
};

TEST_CASE("a batch read holds each record's window only until the record is decoded") {
#ifdef SPILLWAY_SANITIZED
  SPILLWAY_SKIP_TEST("a sanitizer's allocator keeps freed memory in quarantine");
#endif
  TempDir dir("fread");
  auto io = MakeFileIo(IoEngine::kAuto);
  PeakSamplingAllocator alloc;
  FileTier tier(FileConfig(dir.path()), 1, io.get(), &alloc);
  REQUIRE(tier.Open().ok());
  // 32 records of 1 MiB: batched (below the streamed size), one submission.
  std::vector<Obj> objs;
  for (int i = 0; i < 32; ++i) objs.push_back(MakeObj("k" + std::to_string(i), {1 << 20}, 100 + i));
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(tier.Sync().ok());
  std::vector<std::string_view> keys;
  for (const Obj& o : objs) keys.push_back(o.key);
  const uint64_t batch = 32ull << 20;
  const uint64_t before = PeakSamplingAllocator::InUse();
  alloc.peak = 0;
  auto blobs = tier.LoadBatch(*locs, keys);
  for (size_t i = 0; i < objs.size(); ++i) {
    REQUIRE_MESSAGE(blobs[i].ok(), blobs[i].status().ToString());
    const auto want = objs[i].concat();
    REQUIRE(std::memcmp((*blobs[i])->data(), want.data(), want.size()) == 0);
  }
  // Windows and objects together would be twice the batch by the last
  // object (they were, before each window was freed after its decode).
  const uint64_t held = alloc.peak - before;
  CAPTURE(held);
  CHECK(held >= batch);
  CHECK(held < batch + batch / 4);
  blobs.clear();
  for (Location& l : *locs) tier.Free(l);
}

// Hands a batch's completions back in reverse order, and can fail one
// request of the next batch; counts batches and single reads.
class ReorderingIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    ++single_reads;
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  Status SubmitAndWaitEach(std::span<IoRequest> r, uint32_t qd, size_t max_ahead,
                           const std::function<void(size_t)>& done) override {
    if (max_ahead > 0) return target()->SubmitAndWaitEach(r, qd, max_ahead, done);
    ++batches;
    Status st = target()->SubmitAndWait(r, qd);
    if (!st.ok()) return st;
    Status out;
    for (size_t i = r.size(); i-- > 0;) {
      if (static_cast<long>(i) == fail_request) {
        r[i].result = -EIO;
        out = Status::IOError("injected failure of request " + std::to_string(i));
        continue;
      }
      done(i);
    }
    fail_request = -1;
    return out;
  }
  int single_reads = 0;
  int batches = 0;
  long fail_request = -1;
};

TEST_CASE("a batch decodes each record as its window arrives, in any order, and a failed request re-reads only its record") {
  WrappedTier<ReorderingIo> w;
  auto& [dir, base, io, tier] = w;
  REQUIRE(tier.Open().ok());
  // Six records under the streamed size: one window (one request) each, one batch.
  std::vector<Obj> objs;
  for (int i = 0; i < 6; ++i) objs.push_back(MakeObj("r" + std::to_string(i), {(40u + 30u * i) << 10}, 300 + i));
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(tier.Sync().ok());
  std::vector<std::string_view> keys;
  for (const Obj& o : objs) keys.push_back(o.key);
  auto check = [&](const std::vector<StatusOr<BlobPtr>>& blobs) {
    REQUIRE(blobs.size() == objs.size());
    for (size_t i = 0; i < objs.size(); ++i) {
      CAPTURE(objs[i].key);
      REQUIRE_MESSAGE(blobs[i].ok(), blobs[i].status().ToString());
      const auto want = objs[i].concat();
      REQUIRE((*blobs[i])->size() == want.size());
      CHECK(std::memcmp((*blobs[i])->data(), want.data(), want.size()) == 0);
    }
  };
  io.single_reads = io.batches = 0;
  check(tier.LoadBatch(*locs, keys));
  CHECK(io.batches == 1);
  CHECK(io.single_reads == 0);
  // Request 3 (record r3's window) fails in the batch: r3 alone is read again,
  // and the five records decoded from the batch keep what they got.
  io.single_reads = io.batches = 0;
  io.fail_request = 3;
  check(tier.LoadBatch(*locs, keys));
  CHECK(io.batches == 1);
  CHECK(io.single_reads == 1);
  for (Location& l : *locs) tier.Free(l);
}

// Counts the bytes of every read request it forwards.
class ReadCountingIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    for (const IoRequest& q : r) {
      if (q.op == IoRequest::Op::kRead) read_bytes += q.len;
    }
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  uint64_t read_bytes = 0;
};

// Holds every streamed submission until `expected` have arrived (or five
// seconds pass), so that the reads run at once, and records each one's ring
// (max_ahead, in pieces).
class RingRecordingIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  Status SubmitAndWaitEach(std::span<IoRequest> r, uint32_t qd, size_t max_ahead,
                           const std::function<void(size_t)>& done) override {
    if (max_ahead > 0) {
      std::unique_lock<std::mutex> l(mu);
      rings.push_back(max_ahead);
      cv.notify_all();
      cv.wait_for(l, std::chrono::seconds(5), [&] { return rings.size() >= expected; });
    }
    return target()->SubmitAndWaitEach(r, qd, max_ahead, done);
  }
  size_t expected = 1;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<size_t> rings;
};

TEST_CASE("streamed reads running at once share one ring budget: 16 pieces for one, not 16 each for four") {
  WrappedTier<RingRecordingIo> w;
  auto& [dir, base, io, tier] = w;
  REQUIRE(tier.Open().ok());
  // 20 pieces of 1 MiB each (the default block size): more than one ring.
  std::vector<Obj> objs;
  for (int i = 0; i < 4; ++i) objs.push_back(MakeObj("big-" + std::to_string(i), {20 << 20}, 40 + i));
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(tier.Sync().ok());
  std::string why;
  // Alone: the whole budget, 16 MiB.
  CHECK_MESSAGE(ReadsBack(tier, (*locs)[0], objs[0], &why), why);
  REQUIRE(io.rings.size() == 1);
  CHECK(io.rings[0] == 16);

  io.rings.clear();
  io.expected = 4;
  std::vector<std::string> whys(4);
  std::vector<char> ok(4, 0);
  std::vector<std::thread> readers;
  for (size_t i = 0; i < 4; ++i) {
    readers.emplace_back([&, i] { ok[i] = ReadsBack(tier, (*locs)[i], objs[i], &whys[i]); });
  }
  for (auto& t : readers) t.join();
  for (size_t i = 0; i < 4; ++i) CHECK_MESSAGE(ok[i], whys[i]);
  REQUIRE(io.rings.size() == 4);
  // Each took the budget over the reads running when it started (16, 8,
  // 5 and 4 MiB: at least 4), where each used to take 16.
  std::vector<size_t> got = io.rings;
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<size_t>{4, 5, 8, 16});

  // Each read gives its share back: alone again, a read takes the whole
  // budget, also after a read that failed (a damaged record).
  const Location& bad = (*locs)[3];
  REQUIRE(FlipByteAt(*base, dir.path(), bad.segment, bad.offset + bad.length - 999).ok());
  io.rings.clear();
  io.expected = 1;
  CHECK(tier.Load(bad, objs[3].key).status().IsCorruption());
  CHECK_MESSAGE(ReadsBack(tier, (*locs)[2], objs[2], &why), why);
  REQUIRE(io.rings.size() == 2);
  CHECK(io.rings[1] == 16);
  for (Location& l : *locs) tier.Free(l);
}

// Records how many streamed submissions run at once, the most seen; the
// first one waits (up to five seconds) for a second to start, so two
// readers that can overlap do.
class OverlapRecordingIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  Status SubmitAndWaitEach(std::span<IoRequest> r, uint32_t qd, size_t max_ahead,
                           const std::function<void(size_t)>& done) override {
    if (max_ahead == 0) return target()->SubmitAndWaitEach(r, qd, max_ahead, done);
    {
      std::unique_lock<std::mutex> l(mu);
      ++running;
      ++calls;
      most = std::max(most, running);
      cv.notify_all();
      cv.wait_for(l, std::chrono::seconds(5), [&] { return most >= 2; });
    }
    Status st = target()->SubmitAndWaitEach(r, qd, max_ahead, done);
    std::lock_guard<std::mutex> l(mu);
    --running;
    return st;
  }
  std::mutex mu;
  std::condition_variable cv;
  int running = 0, most = 0, calls = 0;
};

TEST_CASE("a batch reads a run of large raw records two at a time, each intact or failing alone") {
  WrappedTier<OverlapRecordingIo> w;
  auto& [dir, base, io, tier] = w;
  REQUIRE(tier.Open().ok());
  // Five streamed records in a row (4 MiB and more at the default 1 MiB
  // block size), then a small one read in a submission of its own.
  std::vector<Obj> objs;
  for (int i = 0; i < 5; ++i) {
    objs.push_back(MakeObj("big-" + std::to_string(i), {(uint64_t{8} << 20) + 4096 * uint64_t(i)}, 60 + i));
  }
  objs.push_back(MakeObj("small", {64 << 10}, 70));
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(tier.Sync().ok());
  std::vector<std::string_view> keys;
  for (const Obj& o : objs) keys.push_back(o.key);

  auto check_batch = [&](int bad) {
    io.most = io.calls = 0;
    auto blobs = tier.LoadBatch(*locs, keys);
    REQUIRE(blobs.size() == objs.size());
    for (size_t i = 0; i < objs.size(); ++i) {
      CAPTURE(objs[i].key);
      if (static_cast<int>(i) == bad) {
        CHECK_MESSAGE(blobs[i].status().IsCorruption(), blobs[i].status().ToString());
        continue;
      }
      REQUIRE_MESSAGE(blobs[i].ok(), blobs[i].status().ToString());
      const auto want = objs[i].concat();
      CHECK((*blobs[i])->size() == want.size());
      CHECK(std::memcmp((*blobs[i])->data(), want.data(), want.size()) == 0);
    }
    CHECK(io.calls == 5);  // each large record streamed once
    CHECK(io.most == 2);   // two at once, never more
  };
  check_batch(-1);
  // A damaged byte in one of them fails that record only; the others,
  // read beside it, arrive intact.
  const Location& third = (*locs)[2];
  REQUIRE(FlipByteAt(*base, dir.path(), third.segment, third.offset + third.length - 777).ok());
  check_batch(2);
  for (Location& l : *locs) tier.Free(l);
}

TEST_CASE("a read window is in 4 KiB blocks unless the file's finer alignment reads at most 3/4 as much") {
  uint64_t s = 0, e = 0;
  // A 4 KiB object's record (4096 + 70 bytes) inside a 4 KiB block: two
  // blocks, 8 KiB, against 4.5 KiB in 512-byte units.
  ReadWindowBounds(8192 + 200, 4166, 512, &s, &e);
  CHECK(s == 8192);
  CHECK(e == 8192 + 4608);
  // A 64 KiB object's record: 68 KiB in blocks, 65 KiB in 512-byte units,
  // too little saved: blocks.
  ReadWindowBounds(8192 + 200, 65536 + 70, 512, &s, &e);
  CHECK(s == 8192);
  CHECK(e == 8192 + 69632);
  // No finer alignment known: blocks.
  ReadWindowBounds(8192 + 200, 4166, 4096, &s, &e);
  CHECK(s == 8192);
  CHECK(e == 8192 + 8192);
  // Aligned and exactly a block: nothing to round.
  ReadWindowBounds(4096, 4096, 512, &s, &e);
  CHECK(s == 4096);
  CHECK(e == 8192);
}

TEST_CASE("a small record is read in the file's direct-read alignment, not in 4 KiB blocks") {
  for (auto& base : AllIo(/*memory=*/false)) {  // real files: their statx alignment
    INFO("FileIo: " << std::string(base->name()));
    TempDir tmp("falign");
    ReadCountingIo io(base.get());
    FileTier tier(FileConfig(tmp.path()), 1, &io, nullptr);
    REQUIRE(tier.Open().ok());
    // 4 KiB and 64 KiB objects packed into one slab: their records, a little
    // longer than the payload, start at offsets that are not 4 KiB aligned.
    std::vector<Obj> objs;
    for (int i = 0; i < 24; ++i) {
      objs.push_back(MakeObj("small-" + std::to_string(i), {i % 3 == 2 ? size_t{64} << 10 : size_t{4096}}, 40 + i));
    }
    auto locs = StoreAll(tier, objs);
    REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
    // What the file handle says reads may use (kIoAlign without O_DIRECT).
    OpenOptions ro;
    auto probe = base->Open(tmp.path() + "/" + Segment::FileName((*locs)[0].segment), ro);
    REQUIRE(probe.ok());
    const uint64_t align = probe->read_align;
    (void)base->Close(*probe);
    CHECK(align >= 1);
    CHECK(kIoAlign % align == 0);
    uint64_t over_4k = 0;
    for (size_t i = 0; i < objs.size(); ++i) {
      CAPTURE(objs[i].key);
      const Location& loc = (*locs)[i];
      const uint64_t before = io.read_bytes;
      std::string why;
      CHECK_MESSAGE(ReadsBack(tier, loc, objs[i], &why), why);
      const uint64_t read = io.read_bytes - before;
      // The record's own bytes rounded out: the window ReadWindowBounds picks.
      uint64_t ws = 0, we = 0;
      ReadWindowBounds(loc.offset, loc.length, align, &ws, &we);
      CHECK(read == we - ws);
      CHECK(ws <= loc.offset);
      CHECK(we >= loc.offset + loc.length);
      if (objs[i].bufs[0].size() == 4096 && read > 8192 - 1) ++over_4k;
    }
    if (align < kIoAlign) {
      // The point of it: no 4 KiB object needed two whole 4 KiB blocks.
      CHECK(over_4k == 0);
    } else {
      MESSAGE("this filesystem reports no direct-read alignment below " << kIoAlign
              << " (statx STATX_DIOALIGN): windows stay in 4 KiB blocks, the 512-byte half of this case is skipped");
    }
    for (Location& l : *locs) tier.Free(l);
  }
}

}  // namespace
}  // namespace spillway
