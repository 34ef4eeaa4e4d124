// FileTier's write paths and reclamation: objects larger than a slab are
// streamed piece by piece (alone or mixed with small objects, from several
// threads at once) and read back and recovered intact; a write failing in
// the middle of a streamed record leaves nothing a scan could revive; freed
// blocks are punched in the background but are gone once Sync returns. Two
// streamed records are written one after the other, header included. Each
// segment is preallocated whole before its first write. Slab writes reach
// a path's disk two at a time, in turn.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"
#include "file_tier_test_util.h"
#include "tier_conformance.h"
#include "tiers/file_tier.h"
#include "tiers/io/fault_file_io.h"

namespace spillway {
namespace {

using testing::MakeObj;
using testing::RandomBytes;
using testing::StoreAll;
using testing::TempDir;

TierConfig FileConfig(const std::string& dir, bool persistent) {
  TierConfig c;
  c.name = "file";
  c.kind = TierKind::kFile;
  c.capacity_bytes = 4ull << 30;
  c.codec.kind = CodecKind::kNone;
  c.paths = {dir};
  c.persistent = persistent;
  return c;
}

// The conformance suite's object: a key, its buffers and views of them.
using Obj = testing::TestObject;

void CheckReadsBack(FileTier& tier, const Location& loc, const Obj& o) {
  auto blob = tier.Load(loc, o.key);
  REQUIRE_MESSAGE(blob.ok(), blob.status().ToString());
  const auto want = o.concat();
  REQUIRE((*blob)->size() == want.size());
  CHECK(std::memcmp((*blob)->data(), want.data(), want.size()) == 0);
}

std::unique_ptr<FileIo> Io() {
  auto io = MakeUringFileIo();
  if (io.ok()) return std::move(*io);
  return MakePosixFileIo();
}

TEST_CASE("large objects are streamed and read back, alone or among small ones") {
  TempDir dir("ftier");
  auto io = Io();
  FileTier tier(FileConfig(dir.path(), false), 1, io.get(), nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<Obj> objs;
  objs.push_back(MakeObj("small-a", {5000}, 1));
  objs.push_back(MakeObj("big-1", {20 << 20, 0, 3 << 20, 12345}, 2));  // several pieces, unaligned end
  objs.push_back(MakeObj("small-b", {100, 200}, 3));
  objs.push_back(MakeObj("big-2", {(8 << 20) + 1}, 4));  // just over a slab
  objs.push_back(MakeObj(std::string(3000, 'k'), {17 << 20}, 5));  // header block holds a long key
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  for (size_t i = 0; i < objs.size(); ++i) {
    CAPTURE(objs[i].key.substr(0, 10));
    CHECK((*locs)[i].offset % kIoAlign == (i == 0 || i == 2 ? (*locs)[i].offset % kIoAlign : 0));
    CheckReadsBack(tier, (*locs)[i], objs[i]);
  }
  REQUIRE(tier.Sync().ok());
  for (Location& l : *locs) tier.Free(l);
}

TEST_CASE("concurrent stores of large objects all land intact") {
  TempDir dir("ftier");
  auto io = Io();
  FileTier tier(FileConfig(dir.path(), false), 1, io.get(), nullptr);
  REQUIRE(tier.Open().ok());
  constexpr int kThreads = 3;
  std::vector<std::vector<Obj>> objs(kThreads);
  std::vector<std::vector<Location>> locs(kThreads);
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < 3; ++i) {
      objs[t].push_back(MakeObj("t" + std::to_string(t) + "-" + std::to_string(i), {(10u << 20) + 4096u * i + 8u}, 10 * t + i));
    }
    ts.emplace_back([&, t] {
      auto l = StoreAll(tier, objs[t]);
      if (!l.ok()) failures++;
      else locs[t] = std::move(*l);
    });
  }
  for (auto& th : ts) th.join();
  REQUIRE(failures == 0);
  for (int t = 0; t < kThreads; ++t) {
    for (size_t i = 0; i < objs[t].size(); ++i) CheckReadsBack(tier, locs[t][i], objs[t][i]);
  }
  for (auto& v : locs) {
    for (Location& l : v) tier.Free(l);
  }
}

// Numbers every write submission's start and end on one clock, and holds
// the first few back so a second writer surely arrives mid-record; records
// the thread that made each.
class WriteOrderIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  struct Write {
    uint64_t offset, bytes, start, end;
    std::thread::id thread;
  };
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    if (r.empty() || r[0].op != IoRequest::Op::kWrite) return FileIoWrapper::SubmitAndWait(r, qd);
    const uint64_t start = clock_.fetch_add(1);
    if (start < 6) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    Status st = FileIoWrapper::SubmitAndWait(r, qd);
    uint64_t bytes = 0;
    for (const IoRequest& q : r) bytes += q.len;
    std::lock_guard<std::mutex> l(mu_);
    writes_.push_back({r[0].offset, bytes, start, clock_.fetch_add(1), std::this_thread::get_id()});
    return st;
  }
  std::vector<Write> writes() {
    std::lock_guard<std::mutex> l(mu_);
    return writes_;
  }

 private:
  std::atomic<uint64_t> clock_{0};
  std::mutex mu_;
  std::vector<Write> writes_;
};

TEST_CASE("a streamed record's header waits behind at most four pieces of the next streamed record") {
  // Queued behind the next record's pieces, the header waited for that
  // whole record, so both objects' memory came free only at its end. The
  // next record's first pieces may go ahead (they keep the disk busy while
  // the header is written), no more.
  TempDir dir("ftier");
  auto base = Io();
  WriteOrderIo io(base.get());
  FileTier tier(FileConfig(dir.path(), false), 1, &io, nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<Obj> a, b;
  a.push_back(MakeObj("first", {40u << 20}, 31));  // 20 pieces: more than the buffers
  b.push_back(MakeObj("second", {40u << 20}, 32));
  StatusOr<std::vector<Location>> la = Status::IOError("not run"), lb = Status::IOError("not run");
  std::thread ta([&] { la = StoreAll(tier, a); });
  while (io.writes().empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // the first has a ticket
  std::thread tb([&] { lb = StoreAll(tier, b); });
  ta.join();
  tb.join();
  REQUIRE_MESSAGE(la.ok(), la.status().ToString());
  REQUIRE_MESSAGE(lb.ok(), lb.status().ToString());
  const Location& ra = (*la)[0];
  const Location& rb = (*lb)[0];
  REQUIRE(ra.segment == rb.segment);
  // Which one streamed first: the record whose header (its first block) was written first.
  auto header_end = [&](const Location& r) {
    for (const auto& w : io.writes()) {
      if (w.offset == r.offset && w.bytes == kIoAlign) return w.end;
    }
    return ~uint64_t{0};
  };
  const bool a_first = header_end(ra) < header_end(rb);
  const Location& first = a_first ? ra : rb;
  const Location& second = a_first ? rb : ra;
  REQUIRE(header_end(first) != ~uint64_t{0});
  uint64_t second_pieces = 0, ahead = 0;
  for (const auto& w : io.writes()) {
    if (w.offset < second.offset || w.offset >= second.offset + second.length) continue;
    ++second_pieces;
    if (w.start < header_end(first)) ++ahead;
  }
  CHECK(second_pieces >= 20);
  CHECK_MESSAGE(ahead <= 4, ahead << " writes of the second record started before the first record's header was written");
  CheckReadsBack(tier, ra, a[0]);
  CheckReadsBack(tier, rb, b[0]);
  tier.Free((*la)[0]);
  tier.Free((*lb)[0]);
}

TEST_CASE("a demotion batch of small objects is one slab, written by the storing thread") {
  // 8 MiB of 4 KiB objects (DemotionPolicy's batch into a file tier) makes
  // 9 MiB of records: it used to be split into an 8 MiB slab and a 1 MiB
  // one, both queued for the tier's writer threads while the caller waited.
  TempDir dir("ftier");
  auto base = Io();
  WriteOrderIo io(base.get());
  FileTier tier(FileConfig(dir.path(), false), 1, &io, nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<Obj> batch;
  for (int i = 0; i < 2048; ++i) batch.push_back(MakeObj("k" + std::to_string(i), {4096}, 100 + i));
  auto locs = StoreAll(tier, batch);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  auto writes = io.writes();
  REQUIRE(writes.size() == 1);
  CHECK(writes[0].bytes > (8u << 20));
  CHECK(writes[0].thread == std::this_thread::get_id());
  for (size_t i = 0; i < batch.size(); i += 97) CheckReadsBack(tier, (*locs)[i], batch[i]);

  // A larger Store is cut into slabs of at most 10 MiB, the first written
  // by the caller and the rest by the writer threads.
  std::vector<Obj> big;
  for (int i = 0; i < 8192; ++i) big.push_back(MakeObj("b" + std::to_string(i), {4096}, 5000 + i));
  auto big_locs = StoreAll(tier, big);
  REQUIRE_MESSAGE(big_locs.ok(), big_locs.status().ToString());
  writes = io.writes();
  writes.erase(writes.begin());  // the batch's above
  uint64_t total = 0;
  int by_caller = 0;
  for (const auto& w : writes) {
    CHECK(w.bytes <= (10u << 20));
    total += w.bytes;
    by_caller += w.thread == std::this_thread::get_id();
  }
  CHECK(writes.size() == (total + (10u << 20) - 1) / (10u << 20));
  CHECK(by_caller == 1);
  for (size_t i = 0; i < big.size(); i += 331) CheckReadsBack(tier, (*big_locs)[i], big[i]);
  for (Location& l : *locs) tier.Free(l);
  for (Location& l : *big_locs) tier.Free(l);
}

// Counts write submissions on the disk at once, each held there a while so
// that concurrent ones surely overlap.
class ConcurrentWritesIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    if (r.empty() || r[0].op != IoRequest::Op::kWrite) return FileIoWrapper::SubmitAndWait(r, qd);
    const int now = inside_.fetch_add(1) + 1;
    int m = most_.load();
    while (now > m && !most_.compare_exchange_weak(m, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    Status st = FileIoWrapper::SubmitAndWait(r, qd);
    inside_.fetch_sub(1);
    writes_.fetch_add(1);
    return st;
  }
  int most() const { return most_.load(); }
  int writes() const { return writes_.load(); }

 private:
  std::atomic<int> inside_{0}, most_{0}, writes_{0};
};

TEST_CASE("slab writes go to a path's disk two at a time, whatever the number of storing threads") {
  // Demotion batches that a full tier starts together used to share the
  // disk and finish together, so the tier above emptied by half at once
  // and refilled with nothing in flight (WritePipeline::slab_writes_).
  TempDir dir("ftier");
  auto base = Io();
  ConcurrentWritesIo io(base.get());
  FileTier tier(FileConfig(dir.path(), false), 1, &io, nullptr);
  REQUIRE(tier.Open().ok());
  constexpr int kThreads = 6;
  std::vector<std::vector<Obj>> batches(kThreads);
  std::vector<StatusOr<std::vector<Location>>> locs(kThreads, StatusOr<std::vector<Location>>(Status::IOError("not run")));
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < 64; ++i) batches[t].push_back(MakeObj("t" + std::to_string(t) + "-" + std::to_string(i), {65536}, 1000 * t + i));
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back([&, t] { locs[t] = StoreAll(tier, batches[t]); });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    REQUIRE_MESSAGE(locs[t].ok(), locs[t].status().ToString());
    for (size_t i = 0; i < batches[t].size(); i += 13) CheckReadsBack(tier, (*locs[t])[i], batches[t][i]);
  }
  CHECK(io.writes() == kThreads);  // one slab each
  CHECK(io.most() == 2);
  for (auto& l : locs) {
    for (Location& x : *l) tier.Free(x);
  }
}

TEST_CASE("a persistent tier recovers streamed records at their position") {
  TempDir dir("ftier");
  auto io = Io();
  std::vector<Obj> objs;
  objs.push_back(MakeObj("tiny", {10}, 1));
  objs.push_back(MakeObj("big", {9 << 20, 7 << 20}, 2));
  Location big_loc;
  {
    FileTier tier(FileConfig(dir.path(), true), 1, io.get(), nullptr);
    REQUIRE(tier.Open().ok());
    auto locs = StoreAll(tier, objs);
    REQUIRE(locs.ok());
    big_loc = (*locs)[1];
    REQUIRE(tier.Sync().ok());
  }
  FileTier tier(FileConfig(dir.path(), true), 1, io.get(), nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<RecoveredObject> found;
  uint64_t skipped = 0;
  std::string report;
  REQUIRE(tier.Recover([&](RecoveredObject&& o) { found.push_back(std::move(o)); }, &skipped, &report).ok());
  CHECK_MESSAGE(skipped == 0, report);
  REQUIRE(found.size() == 2);
  for (RecoveredObject& o : found) {
    const Obj& want = o.key == "big" ? objs[1] : objs[0];
    if (o.key == "big") CHECK(o.location.offset == big_loc.offset);
    CheckReadsBack(tier, o.location, want);
  }
}

TEST_CASE("a write failing inside a streamed record leaves nothing to recover") {
  // Write requests are counted per 1 MiB request: fail ones in the first
  // piece, in a middle piece, and the header block written last.
  for (uint64_t nth : {uint64_t{0}, uint64_t{12}, uint64_t{20}}) {
    CAPTURE(nth);
    TempDir dir("ftier");
    auto base = Io();
    FaultFileIo io(base.get(), FaultSpec{});
    std::vector<Obj> objs;
    objs.push_back(MakeObj("big", {(20 << 20) - 4096}, 7));  // 20 data requests, then the header
    {
      FileTier tier(FileConfig(dir.path(), true), 1, &io, nullptr);
      REQUIRE(tier.Open().ok());
      io.FailNth(FaultKind::kTornWrite, io.counts().writes + nth);
      auto locs = StoreAll(tier, objs);
      CHECK_FALSE(locs.ok());
      CHECK(io.counts().of(FaultKind::kTornWrite) == 1);
      REQUIRE(tier.Sync().ok());
    }
    FileTier tier(FileConfig(dir.path(), true), 1, &io, nullptr);
    REQUIRE(tier.Open().ok());
    int found = 0;
    uint64_t skipped = 0;
    std::string report;
    REQUIRE(tier.Recover([&](RecoveredObject&&) { ++found; }, &skipped, &report).ok());
    CHECK(found == 0);
  }
}

TEST_CASE("freed blocks are punched in the background and gone after Sync") {
  TempDir dir("ftier");
  auto io = Io();
  auto first = std::make_unique<FileTier>(FileConfig(dir.path(), true), 1, io.get(), nullptr);
  FileTier& tier = *first;
  REQUIRE(tier.Open().ok());
  std::vector<Obj> objs;
  objs.push_back(MakeObj("keep", {1 << 20}, 1));
  objs.push_back(MakeObj("drop", {32 << 20}, 2));
  auto locs = StoreAll(tier, objs);
  REQUIRE(locs.ok());
  REQUIRE(tier.Sync().ok());
  const uint64_t before = tier.allocated_bytes();
  Location dropped = (*locs)[1];
  tier.Free((*locs)[1]);
  REQUIRE(tier.Sync().ok());
  const uint64_t after = tier.allocated_bytes();
  CHECK(before - after >= (31u << 20));
  CheckReadsBack(tier, (*locs)[0], objs[0]);
  // The erase mark, written before the punch, survives it: the header block
  // was not punched. (The first tier closes first: it holds the directory's LOCK.)
  first.reset();
  uint64_t skipped = 0;
  std::string report;
  FileTier again(FileConfig(dir.path(), true), 1, io.get(), nullptr);
  REQUIRE(again.Open().ok());
  std::vector<std::string> keys;
  REQUIRE(again.Recover([&](RecoveredObject&& o) { keys.push_back(o.key); }, &skipped, &report).ok());
  CHECK(keys == std::vector<std::string>{"keep"});
  CHECK_MESSAGE(skipped == 0, report);
  (void)dropped;
}

// Records every Allocate (fallocate) with the bytes written to that file
// before it; refuses, as a full disk would, those longer than refuse_above.
class AllocateLogIo final : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  struct Call {
    std::string path;
    uint64_t offset, len, written_before;
    bool ok;
  };
  uint64_t refuse_above = ~uint64_t{0};
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    if (!r.empty() && r[0].op == IoRequest::Op::kWrite) {
      std::lock_guard<std::mutex> l(mu_);
      for (const IoRequest& q : r) written_[q.file->path] += q.len;
    }
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  Status Allocate(const FileHandle& f, uint64_t offset, uint64_t len) override {
    const bool refuse = len > refuse_above;
    Status st = refuse ? Status::NoSpace("fallocate: No space left on device (test)") : FileIoWrapper::Allocate(f, offset, len);
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back({f.path, offset, len, written_[f.path], st.ok()});
    return st;
  }
  std::vector<Call> calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, uint64_t> written_;
  std::vector<Call> calls_;
};

TEST_CASE("each segment is preallocated whole when it is created, before anything is written to it") {
  // fallocate waits for every direct write in flight on its file (ext4 and
  // XFS), so growing a segment while it is written drains the disk queue.
  TempDir dir("ftier");
  auto base = Io();
  AllocateLogIo io(base.get());
  TierConfig c = FileConfig(dir.path(), false);
  c.io.segment_bytes = 256ull << 20;  // the default: more than the 64 MiB steps it used to grow by
  FileTier tier(c, 1, &io, nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<std::vector<Obj>> batches(5);
  for (size_t b = 0; b < batches.size(); ++b) {
    for (int i = 0; i < 24; ++i) batches[b].push_back(MakeObj("b" + std::to_string(b) + "-" + std::to_string(i), {1u << 20}, b * 100 + i));
    auto locs = StoreAll(tier, batches[b]);
    REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
    CheckReadsBack(tier, (*locs)[0], batches[b][0]);
    CheckReadsBack(tier, locs->back(), batches[b].back());
  }
  // 120 MiB in one segment: one call, at its creation, for all of it.
  const auto calls = io.calls();
  REQUIRE(calls.size() == 1);
  CHECK(calls[0].offset == 0);
  CHECK(calls[0].len == 256ull << 20);
  CHECK(calls[0].written_before == 0);
  CHECK(calls[0].ok);
  CHECK(tier.allocated_bytes() >= 256ull << 20);
}

TEST_CASE("a tier smaller than a segment preallocates its capacity, and a disk without room for that what each write needs") {
  TempDir dir("ftier");
  auto base = Io();
  AllocateLogIo io(base.get());
  TierConfig c = FileConfig(dir.path(), false);
  c.io.segment_bytes = 256ull << 20;
  c.capacity_bytes = 48ull << 20;
  FileTier small(c, 1, &io, nullptr);
  REQUIRE(small.Open().ok());
  std::vector<Obj> one{MakeObj("one", {1u << 20}, 7)};
  auto l1 = StoreAll(small, one);
  REQUIRE_MESSAGE(l1.ok(), l1.status().ToString());
  REQUIRE(io.calls().size() == 1);
  CHECK(io.calls()[0].len == 48ull << 20);

  // A nearly full disk refuses the whole segment: each write still gets its
  // blocks reserved before it is written.
  TempDir dir2("ftier");
  AllocateLogIo full(base.get());
  full.refuse_above = 8ull << 20;
  TierConfig c2 = FileConfig(dir2.path(), false);
  c2.io.segment_bytes = 256ull << 20;
  FileTier tier(c2, 1, &full, nullptr);
  REQUIRE(tier.Open().ok());
  std::vector<Obj> objs;
  for (int i = 0; i < 4; ++i) objs.push_back(MakeObj("n" + std::to_string(i), {1u << 20}, 20 + i));
  auto locs = StoreAll(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  const auto calls = full.calls();
  REQUIRE(calls.size() == 2);
  CHECK_FALSE(calls[0].ok);
  CHECK(calls[0].len == 256ull << 20);
  CHECK(calls[1].ok);
  CHECK(calls[1].offset == 0);
  CHECK(calls[1].len >= 4ull << 20);
  CHECK(calls[1].len <= 8ull << 20);
  CHECK(calls[1].written_before == 0);
  for (size_t i = 0; i < objs.size(); ++i) CheckReadsBack(tier, (*locs)[i], objs[i]);
}

}  // namespace
}  // namespace spillway
