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

namespace spillway {
namespace {

using testing::RandomBytes;
using testing::TempDir;

void ForEachIo(const std::function<void(FileIo&)>& body) {
  std::vector<std::unique_ptr<FileIo>> impls;
  impls.push_back(MakePosixFileIo());
  if (auto uring = MakeUringFileIo(); uring.ok()) {
    impls.push_back(std::move(uring).value());
  } else {
    MESSAGE(uring.status().message() << " (io_uring half of this case skipped)");
  }
  for (auto& io : impls) {
    INFO("FileIo implementation: " << std::string(io->name()));
    body(*io);
  }
}

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

mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

TEST_CASE("PunchHole frees blocks and reads back zeros") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
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
    mode_t old = umask(0);  // the modes must come from spillway, not the umask
    auto f = io.Open(dir.sub("f"), Create());
    Status d = io.CreateDir(dir.sub("d1/d2"));
    umask(old);
    REQUIRE(f.ok());
    REQUIRE(d.ok());
    CHECK(ModeOf(dir.sub("f")) == 0600);
    CHECK(ModeOf(dir.sub("d1")) == 0700);
    CHECK(ModeOf(dir.sub("d1/d2")) == 0700);
  });
}

TEST_CASE("a symlink is never followed") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
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
  });
}

TEST_CASE("exclusive create of an existing file fails") {
  ForEachIo([](FileIo& io) {
    TempDir dir("io");
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
    std::string deep = dir.sub("a/b/c/d");
    REQUIRE(io.CreateDir(deep).ok());
    struct stat st;
    REQUIRE(stat(deep.c_str(), &st) == 0);
    CHECK(S_ISDIR(st.st_mode));
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
          w[i] = {IoRequest::Op::kWrite, f->fd, off, data[t].get() + i * kLen, kLen, 0};
          r[i] = {IoRequest::Op::kRead, f->fd, off, back.get() + i * kLen, kLen, 0};
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
