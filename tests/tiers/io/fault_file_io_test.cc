// FaultFileIo: each fault kind fires at its probability or on its schedule,
// acts like the real failure (EIO, NoSpace, short and torn writes leaving
// real bytes on disk, latency), and stops once switched off.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>

#include "test_util.h"
#include "tiers/io/fault_file_io.h"

namespace spillway {
namespace {

using testing::RandomBytes;
using testing::TempDir;

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::shared_ptr<std::byte> Aligned(size_t n, uint64_t seed) {
  std::shared_ptr<std::byte> b(static_cast<std::byte*>(std::aligned_alloc(kIoAlign, n)), std::free);
  auto v = RandomBytes(n, seed);
  std::memcpy(b.get(), v.data(), n);
  return b;
}

// A scratch file behind a FaultFileIo over the default implementation.
struct Fixture {
  TempDir dir{"fault"};
  std::unique_ptr<FileIo> real = MakeFileIo();
  FaultFileIo io;
  FileHandle file;
  static constexpr size_t kBlock = 8 * kIoAlign;
  std::shared_ptr<std::byte> data = Aligned(kBlock, 77);

  explicit Fixture(FaultSpec spec = {}) : io(real.get(), std::move(spec)) {
    OpenOptions o;
    o.create = o.write = true;
    auto f = real->Open(dir.sub("file"), o);
    REQUIRE(f.ok());
    file = *f;
  }
  ~Fixture() { (void)real->Close(file); }
  Status WriteBlock(uint64_t i) { return io.Write(file, i * kBlock, data.get(), kBlock); }
  Status ReadBlock(uint64_t i) {
    auto buf = Aligned(kBlock, 1);
    return io.Read(file, i * kBlock, buf.get(), kBlock);
  }
  // The file's bytes as written to disk, read past the wrapper.
  std::vector<std::byte> OnDisk(uint64_t offset, size_t len) {
    auto size = real->FileSize(file);
    REQUIRE(size.ok());
    std::vector<std::byte> out;
    if (offset >= *size) return out;
    len = std::min<size_t>(len, *size - offset);
    size_t padded = (len + kIoAlign - 1) / kIoAlign * kIoAlign;
    auto buf = Aligned(padded, 1);
    IoRequest r{IoRequest::Op::kRead, &file, offset, buf.get(), padded, 0};
    (void)real->SubmitAndWait(std::span<IoRequest>(&r, 1), 1);  // may hit EOF past len
    out.assign(buf.get(), buf.get() + len);
    return out;
  }
};

FaultSpec Spec(std::string_view text) {
  auto s = ParseFaultSpec(text);
  REQUIRE(s.ok());
  return *s;
}

TEST_CASE("no faults: everything is forwarded") {
  Fixture fx;
  CHECK(std::string(fx.io.name()).rfind("fault(", 0) == 0);
  for (int i = 0; i < 20; ++i) REQUIRE(fx.WriteBlock(i).ok());
  for (int i = 0; i < 20; ++i) REQUIRE(fx.ReadBlock(i).ok());
  REQUIRE(fx.io.Sync(fx.file).ok());
  FaultCounts c = fx.io.counts();
  CHECK(c.total_failures() == 0);
  CHECK(c.writes == 20);
  CHECK(c.reads == 20);
  CHECK(c.syncs == 1);
}

TEST_CASE("EIO on read, write and sync fires at about its probability") {
  Fixture fx(Spec("eio_read=0.25,eio_write=0.1,eio_sync=0.5,seed=3"));
  const int kOps = 2000;
  int wfail = 0, rfail = 0, sfail = 0;
  for (int i = 0; i < kOps; ++i) {
    Status s = fx.WriteBlock(i % 16);
    if (!s.ok()) {
      ++wfail;
      CHECK(s.IsIOError());
      CHECK(Contains(s.message(), "injected fault: pwrite"));
      CHECK(Contains(s.message(), fx.dir.sub("file")));
    }
  }
  for (int i = 0; i < kOps; ++i) rfail += !fx.ReadBlock(i % 16).ok();
  for (int i = 0; i < kOps; ++i) sfail += !fx.io.Sync(fx.file).ok();
  FaultCounts c = fx.io.counts();
  CHECK(c.of(FaultKind::kEioWrite) == static_cast<uint64_t>(wfail));
  CHECK(c.of(FaultKind::kEioRead) == static_cast<uint64_t>(rfail));
  CHECK(c.of(FaultKind::kEioSync) == static_cast<uint64_t>(sfail));
  // Binomial: +-5 standard deviations.
  CHECK(wfail > 140);
  CHECK(wfail < 260);
  CHECK(rfail > 400);
  CHECK(rfail < 600);
  CHECK(sfail > 890);
  CHECK(sfail < 1110);
}

TEST_CASE("the same seed injects the same faults") {
  auto pattern = [](uint64_t seed) {
    FaultSpec spec = Spec("eio=0.3,enospc=0.1,torn=0.1,short=0.1");
    spec.seed = seed;
    Fixture fx(spec);
    std::string p;
    for (int i = 0; i < 200; ++i) p += static_cast<char>('0' + static_cast<int>(fx.WriteBlock(i % 4).code()));
    return p;
  };
  CHECK(pattern(5) == pattern(5));
  CHECK(pattern(5) != pattern(6));
}

TEST_CASE("ENOSPC becomes Status NoSpace and writes nothing") {
  Fixture fx(Spec("enospc=1"));
  Status s = fx.WriteBlock(0);
  CHECK(s.IsNoSpace());
  CHECK(Contains(s.message(), fx.dir.sub("file")));
  CHECK(*fx.real->FileSize(fx.file) == 0);
  CHECK(fx.io.counts().of(FaultKind::kNoSpace) == 1);
}

TEST_CASE("a torn write leaves a prefix of the data on disk and fails with EIO") {
  Fixture fx(Spec("torn=1,seed=11"));
  std::vector<IoRequest> r = {{IoRequest::Op::kWrite, &fx.file, 0, fx.data.get(), Fixture::kBlock, 0}};
  Status s = fx.io.SubmitAndWait(r, 1);
  CHECK(s.IsIOError());
  CHECK(Contains(s.message(), "torn write"));
  CHECK(r[0].result == -EIO);
  uint64_t size = *fx.real->FileSize(fx.file);
  CHECK(size > 0);
  CHECK(size < Fixture::kBlock);
  if (fx.file.direct) CHECK(size % kIoAlign == 0);
  auto disk = fx.OnDisk(0, size);
  CHECK(std::memcmp(disk.data(), fx.data.get(), size) == 0);
  CHECK(fx.io.counts().of(FaultKind::kTornWrite) == 1);
}

TEST_CASE("a short write reports its count and fails") {
  Fixture fx(Spec("short=1"));
  std::vector<IoRequest> r = {{IoRequest::Op::kWrite, &fx.file, 0, fx.data.get(), Fixture::kBlock, 0}};
  Status s = fx.io.SubmitAndWait(r, 1);
  CHECK(s.IsIOError());
  CHECK(Contains(s.message(), "short write"));
  REQUIRE(r[0].result > 0);
  CHECK(r[0].result < static_cast<ssize_t>(Fixture::kBlock));
  CHECK(*fx.real->FileSize(fx.file) == static_cast<uint64_t>(r[0].result));
  auto disk = fx.OnDisk(0, r[0].result);
  CHECK(std::memcmp(disk.data(), fx.data.get(), disk.size()) == 0);
  CHECK(!fx.WriteBlock(0).ok());  // FileIo::Write sees the failure too
}

TEST_CASE("schedule: the Nth write fails, and a window of reads") {
  Fixture fx;
  fx.io.FailNth(FaultKind::kEioWrite, 3);
  fx.io.FailWindow(FaultKind::kEioRead, 5, 7);
  std::string w, r;
  for (int i = 0; i < 6; ++i) w += fx.WriteBlock(i).ok() ? '.' : 'X';
  for (int i = 0; i < 10; ++i) r += fx.ReadBlock(i % 3).ok() ? '.' : 'X';
  CHECK(w == "...X..");
  CHECK(r == ".....XXX..");
}

TEST_CASE("a fault stops the batch: earlier requests done, later ones cancelled") {
  Fixture fx;
  fx.io.FailNth(FaultKind::kEioWrite, 4);
  auto buf = Aligned(10 * kIoAlign, 5);
  std::vector<IoRequest> reqs;
  for (uint64_t i = 0; i < 10; ++i) {
    reqs.push_back({IoRequest::Op::kWrite, &fx.file, i * kIoAlign, buf.get() + i * kIoAlign, kIoAlign, 0});
  }
  Status s = fx.io.SubmitAndWait(reqs, 8);
  CHECK(s.IsIOError());
  CHECK(Contains(s.message(), "offset 16384"));
  for (int i = 0; i < 4; ++i) CHECK(reqs[i].result == static_cast<ssize_t>(kIoAlign));
  CHECK(reqs[4].result == -EIO);
  for (int i = 5; i < 10; ++i) CHECK(reqs[i].result == -ECANCELED);
  CHECK(*fx.real->FileSize(fx.file) == 4 * kIoAlign);
}

TEST_CASE("faults stop once cleared and resume when switched on") {
  Fixture fx(Spec("eio=1"));
  CHECK(!fx.WriteBlock(0).ok());
  CHECK(!fx.io.Sync(fx.file).ok());
  fx.io.SetEnabled(false);
  CHECK(!fx.io.enabled());
  for (int i = 0; i < 50; ++i) CHECK(fx.WriteBlock(i % 4).ok());
  CHECK(fx.ReadBlock(0).ok());
  CHECK(fx.io.Sync(fx.file).ok());
  CHECK(fx.io.SyncDir(fx.dir.path()).ok());
  fx.io.SetEnabled(true);
  CHECK(!fx.ReadBlock(0).ok());
  fx.io.SetSpec(FaultSpec{});  // replacing the spec clears it too
  CHECK(fx.ReadBlock(0).ok());
  CHECK(fx.io.counts().total_failures() == 3);
}

TEST_CASE("latency delays calls") {
  Fixture fx(Spec("latency_us=3000"));
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) REQUIRE(fx.WriteBlock(i).ok());
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(elapsed >= std::chrono::milliseconds(15));
  CHECK(fx.io.counts().of(FaultKind::kLatency) == 5);
  CHECK(fx.io.counts().total_failures() == 0);
}

TEST_CASE("Wrap owns its target - counters are consistent across threads") {
  auto io = FaultFileIo::Wrap(MakeFileIo(), Spec("eio_write=0.2,seed=9"));
  TempDir dir("fault");
  OpenOptions o;
  o.create = o.write = true;
  auto f = io->Open(dir.sub("mt"), o);
  REQUIRE(f.ok());
  auto buf = Aligned(kIoAlign, 3);
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 250; ++i) {
        if (!io->Write(*f, (uint64_t(t) * 250 + i) * kIoAlign, buf.get(), kIoAlign).ok()) ++failed;
      }
    });
  }
  for (auto& th : threads) th.join();
  FaultCounts c = io->counts();
  CHECK(c.writes == 1000);
  CHECK(c.of(FaultKind::kEioWrite) == static_cast<uint64_t>(failed.load()));
  CHECK(failed.load() > 100);
  CHECK(failed.load() < 300);
  CHECK(io->Close(*f).ok());
}

}  // namespace
}  // namespace spillway
