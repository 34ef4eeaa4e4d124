// Injected I/O faults through the public API (EngineOptions.file_io = a
// FaultFileIo): a failed demotion loses nothing and is retried, ENOSPC makes
// the chain fall through, a failed read is IOError and never wrong bytes, short
// and torn writes never surface, and the engine keeps working once faults clear.
#include <doctest/doctest.h>

#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

// Routes I/O on files under `faulty_dir` through a FaultFileIo and everything
// else straight to the target, so one tier of a chain can fail alone.
class OneDirFaultIo : public FileIoWrapper {
 public:
  OneDirFaultIo(FileIo* target, std::string faulty_dir, FaultSpec spec)
      : FileIoWrapper(target), dir_(std::move(faulty_dir) + "/"), fault_(target, std::move(spec)) {}

  FaultFileIo& fault() { return fault_; }

  StatusOr<FileHandle> Open(const std::string& p, const OpenOptions& o) override {
    auto f = target()->Open(p, o);
    if (f.ok()) {
      std::lock_guard<std::mutex> l(mu_);
      if (p.rfind(dir_, 0) == 0) {
        files_.insert(f->object.get());
      } else {
        files_.erase(f->object.get());
      }
    }
    return f;
  }
  Status Close(FileHandle& f) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      files_.erase(f.object.get());
    }
    return target()->Close(f);
  }
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    return Faulty(r) ? fault_.SubmitAndWait(r, qd) : target()->SubmitAndWait(r, qd);
  }
  Status Sync(const FileHandle& f) override {
    return f.path.rfind(dir_, 0) == 0 ? fault_.Sync(f) : target()->Sync(f);
  }

 private:
  bool Faulty(std::span<IoRequest> r) {
    std::lock_guard<std::mutex> l(mu_);
    for (const IoRequest& q : r) {
      if (q.file != nullptr && files_.count(q.file->object.get())) return true;
    }
    return false;
  }
  std::string dir_;
  FaultFileIo fault_;
  std::mutex mu_;
  std::set<const FileObject*> files_;  // open files under dir_
};

uint64_t DemotionFailures(const EngineStats& s) {
  uint64_t n = 0;
  for (const auto& b : s.boundaries) n += b.failures;
  return n;
}

}  // namespace

TEST_CASE("EIO on every write during demotion loses nothing and demotion succeeds once the fault clears") {
  for (bool background : {false, true}) {
    CAPTURE(background);
    TempDir dir("rel-eio-w");
    auto base = MakePosixFileIo();
    FaultSpec spec;
    spec.eio_write = 1.0;
    FaultFileIo io(base.get(), spec);
    auto e = MustOpen(RelChain(dir.path(), 1 << 20, {64 << 20}), &io, background);
    std::vector<std::vector<std::byte>> data;
    for (int i = 0; i < 10; ++i) {
      data.push_back(RandomBytes(100 << 10, 100 + i));
      REQUIRE(e->Put("k" + std::to_string(i), data.back()).ok());
    }
    // Above the high watermark: the mover tries and fails.
    (void)e->Flush();
    auto s = e->Stats();
    CHECK(DemotionFailures(s) > 0);
    CHECK(io.counts().of(FaultKind::kEioWrite) > 0);
    CHECK(s.tiers[1].objects == 0);
    for (int i = 0; i < 10; ++i) {
      auto h = e->Get("k" + std::to_string(i));
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK(SameBytes(*h, data[i]));
    }
    // An object too big for the host tier cannot be written anywhere: an
    // error, and no trace of it.
    auto big = RandomBytes(2 << 20, 7);
    Status st = e->Put("big", big);
    CHECK_FALSE(st.ok());
    CHECK_FALSE(e->Contains("big"));

    io.SetEnabled(false);
    REQUIRE(e->Flush().ok());
    s = e->Stats();
    CHECK(s.tiers[1].objects > 0);
    CHECK(s.tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (1 << 20)));
    for (int i = 0; i < 10; ++i) {
      auto h = e->Get("k" + std::to_string(i));
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK(SameBytes(*h, data[i]));
    }
    REQUIRE(e->Put("big", big).ok());
    auto h = e->Get("big");
    REQUIRE(h.ok());
    CHECK(SameBytes(*h, big));
  }
}

TEST_CASE("a single scheduled write failure during demotion is retried by a later pass") {
  TempDir dir("rel-eio-1");
  auto base = MakePosixFileIo();
  FaultFileIo io(base.get(), FaultSpec{});
  io.FailNth(FaultKind::kTornWrite, 0);  // the very first write request tears
  auto e = MustOpen(RelChain(dir.path(), 1 << 20, {64 << 20}), &io);
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < 10; ++i) {
    data.push_back(RandomBytes(100 << 10, 200 + i));
    REQUIRE(e->Put("k" + std::to_string(i), data.back()).ok());
  }
  (void)e->Flush();
  (void)e->Flush();
  CHECK(io.counts().of(FaultKind::kTornWrite) == 1);
  auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (1 << 20)));
  CHECK(s.tiers[1].objects > 0);
  for (int i = 0; i < 10; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(SameBytes(*h, data[i]));
  }
}

TEST_CASE("ENOSPC from the first file tier: Put falls through to the next file tier") {
  TempDir dir("rel-enospc-put");
  auto base = MakePosixFileIo();
  FaultSpec spec;
  spec.enospc = 1.0;
  OneDirFaultIo io(base.get(), dir.path() + "/f0", spec);
  auto e = MustOpen(RelChain(dir.path(), 64 << 10, {64 << 20, 64 << 20}), &io);
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < 6; ++i) {
    data.push_back(RandomBytes((200 << 10) + i, 300 + i));  // too big for the host tier
    Status st = e->Put("k" + std::to_string(i), data.back());
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  CHECK(io.fault().counts().of(FaultKind::kNoSpace) > 0);
  auto s = e->Stats();
  CHECK(TierNamed(s, "f0").objects == 0);
  CHECK(TierNamed(s, "f1").objects == 6);
  for (int i = 0; i < 6; ++i) {
    CHECK(ServingTier(*e, "k" + std::to_string(i)) == 2);
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(SameBytes(*h, data[i]));
  }
  // The fault clears: the first file tier is used again (after the full mark expires).
  io.fault().SetEnabled(false);
  bool used_again = false;
  for (int attempt = 0; attempt < 40 && !used_again; ++attempt) {
    REQUIRE(e->Put("later" + std::to_string(attempt), RandomBytes(200 << 10, 900 + attempt)).ok());
    used_again = TierNamed(e->Stats(), "f0").objects > 0;
    if (!used_again) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(used_again);
}

TEST_CASE("ENOSPC from the first file tier: demotion falls through to the next file tier within one Flush") {
  for (bool background : {false, true}) {
    CAPTURE(background);
    TempDir dir("rel-enospc-dem");
    auto base = MakePosixFileIo();
    FaultSpec spec;
    spec.enospc = 1.0;
    OneDirFaultIo io(base.get(), dir.path() + "/f0", spec);
    auto e = MustOpen(RelChain(dir.path(), 1 << 20, {64 << 20, 64 << 20}), &io, background);
    std::vector<std::vector<std::byte>> data;
    for (int i = 0; i < 20; ++i) {
      data.push_back(RandomBytes(100 << 10, 400 + i));
      REQUIRE(e->Put("k" + std::to_string(i), data.back()).ok());
    }
    REQUIRE(e->Flush().ok());
    auto s = e->Stats();
    // Flush's contract: no tier above its high watermark afterwards.
    CHECK(s.tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (1 << 20)));
    CHECK(TierNamed(s, "f0").objects == 0);
    CHECK(TierNamed(s, "f1").objects > 0);
    for (int i = 0; i < 20; ++i) {
      auto h = e->Get("k" + std::to_string(i));
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK(SameBytes(*h, data[i]));
    }
  }
}

TEST_CASE("EIO on reading an object's only copy is IOError, and the same Get succeeds once the fault clears") {
  for (CodecKind codec : {CodecKind::kNone, CodecKind::kZstd}) {
    CAPTURE(static_cast<int>(codec));
    TempDir dir("rel-eio-r");
    auto base = MakePosixFileIo();
    FaultFileIo io(base.get(), FaultSpec{});
    auto e = MustOpen(RelChain(dir.path(), 64 << 10, {64 << 20}, false, codec), &io);
    auto v = CompressibleBytes(3 << 20, 5);  // several chunks and read requests
    REQUIRE(e->Put("only", v).ok());
    FaultSpec spec;
    spec.eio_read = 1.0;
    io.SetSpec(spec);
    for (int i = 0; i < 3; ++i) {
      auto h = e->Get("only");
      REQUIRE_FALSE(h.ok());
      CHECK_MESSAGE(h.status().IsIOError(), h.status().ToString());
    }
    CHECK(e->Contains("only"));
    // A single scheduled fault: the next read request.
    io.SetSpec(FaultSpec{});
    io.FailNth(FaultKind::kEioRead, io.counts().reads);
    {
      auto h = e->Get("only");
      REQUIRE_FALSE(h.ok());
      CHECK_MESSAGE(h.status().IsIOError(), h.status().ToString());
    }
    io.SetEnabled(false);
    auto h = e->Get("only");
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(SameBytes(*h, v));
  }
}

TEST_CASE("EIO on sync fails Flush and Flush succeeds again once the fault clears") {
  TempDir dir("rel-eio-s");
  auto base = MakePosixFileIo();
  FaultSpec spec;
  spec.eio_sync = 1.0;
  FaultFileIo io(base.get(), spec);
  auto c = RelChain(dir.path(), 64 << 10, {64 << 20}, /*persistent=*/true);
  auto e = MustOpen(c, &io);
  auto v = RandomBytes(300 << 10, 9);
  REQUIRE(e->Put("k", v).ok());
  Status st = e->Flush();
  CHECK_FALSE(st.ok());
  CHECK_MESSAGE(st.IsIOError(), st.ToString());
  io.SetEnabled(false);
  CHECK(e->Flush().ok());
  auto h = e->Get("k");
  REQUIRE(h.ok());
  CHECK(SameBytes(*h, v));
}

TEST_CASE("short and torn writes never produce wrong bytes and failed puts leave the old value") {
  for (uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    TempDir dir("rel-torn");
    auto base = MakePosixFileIo();
    FaultSpec spec;
    spec.short_write = 0.15;
    spec.torn_write = 0.15;
    spec.seed = seed;
    FaultFileIo io(base.get(), spec);
    auto e = MustOpen(RelChain(dir.path(), 512 << 10, {4 << 20, 8 << 20, 64 << 20}), &io);
    std::map<std::string, std::vector<std::byte>> model;
    std::mt19937_64 rng(seed);
    uint64_t failed_puts = 0, wrong = 0;
    for (int op = 0; op < 600; ++op) {
      const std::string key = "k" + std::to_string(rng() % 60);
      if (rng() % 3 != 0) {
        auto v = RandomBytes(1000 + rng() % (300 << 10), rng());
        Status st = e->Put(key, v);
        if (st.ok()) {
          model[key] = std::move(v);
        } else {
          ++failed_puts;
          CHECK_MESSAGE((st.IsIOError() || st.IsNoSpace()), st.ToString());
        }
      } else {
        auto h = e->Get(key);
        auto it = model.find(key);
        if (it == model.end()) {
          CHECK_FALSE(h.ok());
          continue;
        }
        if (!h.ok()) {
          CHECK_MESSAGE(h.status().IsIOError(), h.status().ToString());
          continue;
        }
        if (!SameBytes(*h, it->second)) ++wrong;
      }
    }
    CHECK(wrong == 0);
    CHECK(io.counts().of(FaultKind::kTornWrite) + io.counts().of(FaultKind::kShortWrite) > 0);
    MESSAGE("seed " << seed << ": " << failed_puts << " puts failed, " << io.counts().total_failures()
                    << " faults injected");
    io.SetEnabled(false);
    REQUIRE(e->Flush().ok());
    for (auto& [k, v] : model) {
      auto h = e->Get(k);
      REQUIRE_MESSAGE(h.ok(), k << ": " << h.status().ToString());
      CHECK_MESSAGE(SameBytes(*h, v), k);
    }
  }
}

TEST_CASE("mixed faults over three file tiers, then the engine works on without a restart") {
  TempDir dir("rel-mixed");
  auto base = MakePosixFileIo();
  auto spec = ParseFaultSpec("eio=0.02,enospc=0.01,short=0.02,torn=0.02,seed=11");
  REQUIRE(spec.ok());
  FaultFileIo io(base.get(), *spec);
  auto e = MustOpen(RelChain(dir.path(), 256 << 10, {2 << 20, 4 << 20, 64 << 20}), &io, /*background=*/true);
  std::map<std::string, std::vector<std::byte>> model;
  std::mt19937_64 rng(11);
  for (int op = 0; op < 1500; ++op) {
    const std::string key = "m" + std::to_string(rng() % 200);
    const int dice = static_cast<int>(rng() % 10);
    if (dice < 5) {
      auto v = RandomBytes(100 + rng() % (64 << 10), rng());
      if (e->Put(key, v).ok()) model[key] = std::move(v);
    } else if (dice < 8) {
      auto h = e->Get(key);
      auto it = model.find(key);
      if (it == model.end()) {
        CHECK(h.status().IsNotFound());
      } else if (h.ok()) {
        CHECK_MESSAGE(SameBytes(*h, it->second), key);
      } else {
        CHECK_MESSAGE(h.status().IsIOError(), key << ": " << h.status().ToString());
      }
    } else if (dice < 9) {
      Status st = e->Erase(key);
      if (st.ok()) {
        CHECK(model.erase(key) == 1);
      } else {
        CHECK(st.IsNotFound());
        CHECK(model.count(key) == 0);
      }
    } else {
      (void)e->Flush();
    }
  }
  CHECK(io.counts().total_failures() > 0);
  io.SetEnabled(false);
  REQUIRE(e->Flush().ok());
  for (auto& [k, v] : model) {
    auto h = e->Get(k);
    REQUIRE_MESSAGE(h.ok(), k << ": " << h.status().ToString());
    CHECK_MESSAGE(SameBytes(*h, v), k);
  }
  // Keeps working: a fresh round of puts, reads, erases and flushes, all clean.
  for (int i = 0; i < 200; ++i) {
    auto v = RandomBytes(50 << 10, 5000 + i);
    Status st = e->Put("after" + std::to_string(i), v);
    REQUIRE_MESSAGE(st.ok(), "after" << i << ": " << st.ToString());
    model["after" + std::to_string(i)] = std::move(v);
  }
  REQUIRE(e->Flush().ok());
  for (auto& [k, v] : model) {
    auto h = e->Get(k);
    REQUIRE_MESSAGE(h.ok(), k << ": " << h.status().ToString());
    CHECK_MESSAGE(SameBytes(*h, v), k);
  }
  for (auto& [k, v] : model) REQUIRE(e->Erase(k).ok());
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.objects == 0);
  for (auto& t : s.tiers) CHECK_MESSAGE(t.used_bytes == 0, t.name);
}

TEST_CASE("torn and short writes on a persistent tier: after a restart nothing torn is served") {
  for (uint64_t seed : {21, 22}) {
    CAPTURE(seed);
    TempDir dir("rel-torn-persist");
    auto base = MakePosixFileIo();
    FaultSpec spec;
    spec.short_write = 0.2;
    spec.torn_write = 0.2;
    spec.seed = seed;
    FaultFileIo io(base.get(), spec);
    Config c = RelChain(dir.path(), 1024, {256 << 20}, /*persistent=*/true);
    // Per key: the acknowledged bytes, and every later attempt that failed
    // (a failed write may still have reached the disk whole).
    std::map<std::string, std::vector<std::byte>> acked;
    std::map<std::string, std::vector<std::vector<std::byte>>> failed_after;
    std::mt19937_64 rng(seed);
    {
      auto e = MustOpen(c, &io);
      for (int op = 0; op < 300; ++op) {
        const std::string key = "t" + std::to_string(rng() % 40);
        auto v = RandomBytes(2000 + rng() % (300 << 10), rng());
        if (e->Put(key, v).ok()) {
          acked[key] = std::move(v);
          failed_after[key].clear();
        } else {
          failed_after[key].push_back(std::move(v));
        }
        if (op % 50 == 49) (void)e->Flush();
      }
      CHECK(io.counts().of(FaultKind::kTornWrite) + io.counts().of(FaultKind::kShortWrite) > 0);
      io.SetEnabled(false);
      REQUIRE(e->Flush().ok());
      // As a crash right after this Flush would leave the tier.
      CopySegments(dir.path() + "/f0", dir.path() + "/snap");
    }
    c.tiers.back().paths = {dir.path() + "/snap"};
    StderrCapture quiet(dir.path() + "/recovery.log");  // torn records are reported there
    auto e = MustOpen(c);
    quiet.Stop();
    uint64_t unknown_outcome = 0;
    for (auto& [key, attempts] : failed_after) {
      auto h = e->Get(key);
      auto it = acked.find(key);
      if (!h.ok()) {
        CHECK_MESSAGE(it == acked.end(), key << ": acknowledged and flushed, but " << h.status().ToString());
        continue;
      }
      if (it != acked.end() && SameBytes(*h, it->second)) continue;
      bool known = false;
      for (auto& a : attempts) known |= SameBytes(*h, a);
      CHECK_MESSAGE(known, key << ": bytes match no version ever written");
      if (known) ++unknown_outcome;
    }
    MESSAGE("seed " << seed << ": " << unknown_outcome << " keys came back with the value of a Put that had failed");
  }
}
