// The FileIo conformance suite, part two: everything that is not a data
// transfer (hole punching, preallocation, permissions, symlinks, exclusive
// create, directories) plus concurrent use from several threads. Runs over
// every implementation like file_io_conformance_test.cc.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "test_util.h"
#include "spillway/file_io.h"
#include "tiers/io/file_io_test_util.h"
#include "tiers/io/posix_file_io.h"

namespace spillway {
namespace {

using testing::RandomBytes;
using testing::ForEachIo;
using testing::IoSet;
using testing::TempDir;

OpenOptions Create(bool exclusive = false) {
  OpenOptions o;
  o.create = true;
  o.exclusive = exclusive;
  o.write = true;
  return o;
}

// Page-aligned copy of random bytes, as O_DIRECT wants.
std::shared_ptr<std::byte> AlignedRandom(size_t n, uint64_t seed) {
  std::shared_ptr<std::byte> b(static_cast<std::byte*>(std::aligned_alloc(kIoAlign, n)), std::free);
  auto v = RandomBytes(n, seed);
  std::memcpy(b.get(), v.data(), n);
  return b;
}

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

mode_t ModeOf(FileIo& io, const std::string& path) {
  auto st = io.Stat(path);
  REQUIRE(st.ok());
  return st->mode;
}

TEST_CASE("PunchHole frees blocks and reads back zeros") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    auto f = io.Open(dir.sub("holes"), Create());
    REQUIRE(f.ok());
    const size_t n = 1 << 20;
    auto data = AlignedRandom(n, 21);
    REQUIRE(io.Write(*f, 0, data.get(), n).ok());
    REQUIRE(io.Sync(*f).ok());
    uint64_t before = *io.AllocatedBytes(*f);
    CHECK(before >= n);
    Status s = io.PunchHole(*f, 256 * 1024, 512 * 1024);
    if (s.code() == StatusCode::kNotSupported) {
      MESSAGE("skipped: " << s.message());
      return;
    }
    REQUIRE(s.ok());
    uint64_t after = *io.AllocatedBytes(*f);
    CHECK(after + 512 * 1024 <= before);
    CHECK(*io.FileSize(*f) == n);  // KEEP_SIZE
    auto back = AlignedRandom(n, 1);
    REQUIRE(io.Read(*f, 0, back.get(), n).ok());
    std::vector<std::byte> zeros(512 * 1024);
    CHECK(std::memcmp(back.get() + 256 * 1024, zeros.data(), zeros.size()) == 0);
    CHECK(std::memcmp(back.get(), data.get(), 256 * 1024) == 0);
    CHECK(std::memcmp(back.get() + 768 * 1024, data.get() + 768 * 1024, 256 * 1024) == 0);
  });
}

TEST_CASE("Allocate reserves blocks - Truncate and FileSize agree") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    auto f = io.Open(dir.sub("alloc"), Create());
    REQUIRE(f.ok());
    Status s = io.Allocate(*f, 0, 4 << 20);
    if (s.code() == StatusCode::kNotSupported) {
      MESSAGE("skipped Allocate: " << s.message());
    } else {
      REQUIRE(s.ok());
      CHECK(*io.FileSize(*f) == (4u << 20));
      CHECK(*io.AllocatedBytes(*f) >= (4u << 20));
    }
    REQUIRE(io.Truncate(*f, 12345).ok());
    CHECK(*io.FileSize(*f) == 12345);
    REQUIRE(io.Truncate(*f, 0).ok());
    CHECK(*io.FileSize(*f) == 0);
  });
}

TEST_CASE("created files are 0600 and directories 0700 whatever the umask") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    mode_t old = umask(0);  // the modes must come from spillway, not the umask
    auto f = io.Open(dir.sub("f"), Create());
    Status d = io.CreateDir(dir.sub("d1/d2"));
    umask(old);
    REQUIRE(f.ok());
    REQUIRE(d.ok());
    CHECK(ModeOf(io, dir.sub("f")) == 0600);
    CHECK(ModeOf(io, dir.sub("d1")) == 0700);
    CHECK(ModeOf(io, dir.sub("d1/d2")) == 0700);
  });
}

TEST_CASE("a symlink is never followed") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    std::string target = dir.sub("target"), link = dir.sub("link");
    { std::ofstream(target) << "precious"; }
    REQUIRE(symlink(target.c_str(), link.c_str()) == 0);
    auto f = io.Open(link, Create());
    REQUIRE(!f.ok());
    CHECK(Contains(f.status().message(), link));
    CHECK(Contains(f.status().message(), "symlink"));
    OpenOptions ro;
    CHECK(!io.Open(link, ro).ok());
    std::ifstream in(target);
    std::string content;
    in >> content;
    CHECK(content == "precious");
  }, IoSet::kKernel);
}

TEST_CASE("Stat reports type, size, mode and owner without following symlinks") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    auto f = io.Open(dir.sub("f"), Create());
    REQUIRE(f.ok());
    auto data = AlignedRandom(3 * kIoAlign, 2);
    REQUIRE(io.Write(*f, 0, data.get(), 3 * kIoAlign).ok());
    auto st = io.Stat(dir.sub("f"));
    REQUIRE(st.ok());
    CHECK(st->type == FileInfo::Type::kRegular);
    CHECK(st->size == 3 * kIoAlign);
    CHECK(st->owned);
    auto d = io.Stat(dir.path());
    REQUIRE(d.ok());
    CHECK(d->type == FileInfo::Type::kDirectory);
    auto missing = io.Stat(dir.sub("nope"));
    CHECK(missing.status().IsNotFound());
    CHECK(Contains(missing.status().message(), dir.sub("nope")));
    Status link = Status::OK();
    if (auto* mem = dynamic_cast<MemFileIo*>(&io)) {
      link = mem->Symlink(dir.sub("f"), dir.sub("link"));
    } else if (symlink(dir.sub("f").c_str(), dir.sub("link").c_str()) != 0) {
      link = Status::IOError("symlink");
    }
    REQUIRE(link.ok());
    auto l = io.Stat(dir.sub("link"));
    REQUIRE(l.ok());
    CHECK(l->type == FileInfo::Type::kSymlink);
    auto opened = io.Open(dir.sub("link"), Create());
    CHECK(!opened.ok());
    CHECK(Contains(opened.status().message(), "symlink"));
  });
}

TEST_CASE("NextData and NextHole see written, punched, preallocated and never written ranges") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    auto f = io.Open(dir.sub("sparse"), Create());
    REQUIRE(f.ok());
    const uint64_t mib = 1 << 20;
    auto data = AlignedRandom(mib, 3);
    // data [0, 1M), never written [1M, 2M), data [2M, 3M) with [2M+256K, 2M+512K) punched.
    REQUIRE(io.Write(*f, 0, data.get(), mib).ok());
    REQUIRE(io.Write(*f, 2 * mib, data.get(), mib).ok());
    REQUIRE(io.Sync(*f).ok());
    CHECK(*io.NextData(*f, 0) == 0);
    CHECK(*io.NextData(*f, 4096) == 4096);
    CHECK(*io.NextData(*f, 3 * mib) == 3 * mib);  // at the end: the size
    CHECK(*io.NextHole(*f, 3 * mib - 4096) == 3 * mib);  // the end of the file is a hole
    const uint64_t hole = *io.NextHole(*f, 0);
    const uint64_t data2 = *io.NextData(*f, mib);
    if (hole == 3 * mib) {
      MESSAGE("skipped: " << dir.path() << " reports no holes (SEEK_HOLE unsupported)");
      return;
    }
    CHECK(hole == mib);
    CHECK(data2 == 2 * mib);
    Status p = io.PunchHole(*f, 2 * mib + 256 * 1024, 256 * 1024);
    if (p.code() == StatusCode::kNotSupported) return;
    REQUIRE(p.ok());
    CHECK(*io.NextHole(*f, 2 * mib) == 2 * mib + 256 * 1024);
    CHECK(*io.NextData(*f, 2 * mib + 256 * 1024) == 2 * mib + 512 * 1024);
    // Preallocated, never written: allocated on disk, yet no data to find.
    Status a = io.Allocate(*f, 3 * mib, mib);
    if (a.code() == StatusCode::kNotSupported) return;
    REQUIRE(a.ok());
    CHECK(*io.FileSize(*f) == 4 * mib);
    CHECK(*io.NextData(*f, 3 * mib) == 4 * mib);
  });
}

TEST_CASE("exclusive create of an existing file fails") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    std::string path = dir.sub("once");
    auto a = io.Open(path, Create(/*exclusive=*/true));
    REQUIRE(a.ok());
    auto b = io.Open(path, Create(/*exclusive=*/true));
    REQUIRE(!b.ok());
    CHECK(b.status().IsIOError());
    CHECK(Contains(b.status().message(), path));
    CHECK(Contains(b.status().message(), "exists"));
    CHECK(io.Open(path, Create(/*exclusive=*/false)).ok());
  });
}

TEST_CASE("CreateDir makes nested directories and is idempotent") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    std::string deep = dir.sub("a/b/c/d");
    REQUIRE(io.CreateDir(deep).ok());
    auto st = io.Stat(deep);
    REQUIRE(st.ok());
    CHECK(st->type == FileInfo::Type::kDirectory);
    CHECK(io.CreateDir(deep).ok());
    CHECK(io.CreateDir(deep + "/").ok());
    CHECK(io.SyncDir(deep).ok());
    // A file in the way is an error naming it.
    auto f = io.Open(dir.sub("a/file"), Create());
    REQUIRE(f.ok());
    Status s = io.CreateDir(dir.sub("a/file/x"));
    CHECK(!s.ok());
    CHECK(Contains(s.message(), dir.sub("a/file")));
  });
}

TEST_CASE("ListDir lists names only, sorted - Remove deletes") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    for (const char* name : {"seg-2", "seg-10", "seg-1"}) {
      auto f = io.Open(dir.sub(name), Create());
      REQUIRE(f.ok());
      REQUIRE(io.Close(*f).ok());
    }
    REQUIRE(io.CreateDir(dir.sub("sub")).ok());
    auto names = io.ListDir(dir.path());
    REQUIRE(names.ok());
    CHECK(*names == std::vector<std::string>{"seg-1", "seg-10", "seg-2", "sub"});
    REQUIRE(io.Remove(dir.sub("seg-10")).ok());
    CHECK(io.Remove(dir.sub("seg-10")).IsNotFound());
    CHECK(io.ListDir(dir.path())->size() == 3);
    auto missing = io.ListDir(dir.sub("nope"));
    CHECK(missing.status().IsNotFound());
    CHECK(Contains(missing.status().message(), dir.sub("nope")));
    CHECK(io.SyncDir(dir.sub("nope")).IsIOError());
  });
}

TEST_CASE("many threads share one FileIo") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    auto f = io.Open(dir.sub("shared"), Create());
    REQUIRE(f.ok());
    const int kThreads = 4, kReqs = 64;
    const size_t kLen = 8 * kIoAlign;
    std::vector<std::shared_ptr<std::byte>> data;
    for (int t = 0; t < kThreads; ++t) data.push_back(AlignedRandom(kReqs * kLen, 1000 + t));
    std::vector<int> failures(kThreads, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        // Each thread owns a stripe of the file and writes, then reads it.
        auto back = AlignedRandom(kReqs * kLen, 1);
        std::vector<IoRequest> w(kReqs), r(kReqs);
        for (int i = 0; i < kReqs; ++i) {
          uint64_t off = (uint64_t(i) * kThreads + t) * kLen;
          w[i] = {IoRequest::Op::kWrite, &*f, off, data[t].get() + i * kLen, kLen, 0};
          r[i] = {IoRequest::Op::kRead, &*f, off, back.get() + i * kLen, kLen, 0};
        }
        if (!io.SubmitAndWait(w, 16).ok() || !io.SubmitAndWait(r, 16).ok() ||
            std::memcmp(back.get(), data[t].get(), kReqs * kLen) != 0) {
          failures[t] = 1;
        }
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < kThreads; ++t) CHECK(failures[t] == 0);
  });
}

}  // namespace
}  // namespace spillway

namespace spillway {
namespace {

TEST_CASE("AppendFile appends, refuses symlinks and non-files - WriteFileAtomic replaces by rename") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
    REQUIRE(io.CreateDir(dir.path()).ok());
    const std::string log = dir.sub("events.log");
    {
      auto f = io.NewAppendFile(log, AppendOptions{});
      REQUIRE(f.ok());
      REQUIRE((*f)->Append("one\n").ok());
      REQUIRE((*f)->Append("").ok());
      REQUIRE((*f)->Sync().ok());
      REQUIRE((*f)->Close().ok());
    }
    auto again = io.NewAppendFile(log, AppendOptions{});  // appends after what is there
    REQUIRE(again.ok());
    REQUIRE((*again)->Append("two\n").ok());
    (*again).reset();
    auto st = io.Stat(log);
    REQUIRE(st.ok());
    CHECK(st->size == 8);
    CHECK(st->mode == 0600);
    auto dirfile = io.NewAppendFile(dir.path(), AppendOptions{});
    CHECK(!dirfile.ok());
    // Atomic replace: the old contents until the rename, the new after; no temp left.
    AppendOptions o;
    o.mode = 0644;
    REQUIRE(WriteFileAtomic(io, log, dir.sub(".events.tmp"), "replaced\n", o).ok());
    st = io.Stat(log);
    REQUIRE(st.ok());
    CHECK(st->size == 9);
    CHECK(st->mode == 0644);
    CHECK(io.Stat(dir.sub(".events.tmp")).status().IsNotFound());
    CHECK(!io.Rename(dir.sub("missing"), log).ok());
    CHECK(!WriteFileAtomic(io, log, dir.sub("no/such/dir/tmp"), "x", o).ok());
    CHECK(io.Stat(log)->size == 9);  // a failed replace leaves the old file
  });
}

}  // namespace
}  // namespace spillway
