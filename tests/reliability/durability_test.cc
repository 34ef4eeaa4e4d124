// What a returned Flush promises on persistent tiers:
// an erase made while a Handle holds the old value, an erase mark whose write
// fails, and an overwrite that lands in another persistent tier than the
// value a reader holds. "SIGKILL" here is CrashFileIo's: every call after the
// crash fails and changes nothing, and the page cache is kept.
#include <doctest/doctest.h>

#include "reliability_util.h"
#include "tiers/io/crash_file_io.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

Config OnePersistent(const std::string& root) {
  Config c;
  c.source = "<durability test>";
  c.tiers = {RelFileTier("disk", root + "/disk", 64 << 20, /*persistent=*/true)};
  return c;
}

// upper (small) -> lower, both persistent.
Config TwoPersistent(const std::string& root, uint64_t upper_cap) {
  Config c;
  c.source = "<durability test>";
  c.tiers = {RelFileTier("upper", root + "/upper", upper_cap, true),
             RelFileTier("lower", root + "/lower", 64 << 20, true)};
  return c;
}

// Ends a session the way a crash does: CrashFileIo stops every call, the
// handles and the engine go, then the files are left as SIGKILL (page cache
// kept) or a power loss (unsynced writes dropped) leaves them.
void Crash(CrashFileIo& io, std::unique_ptr<Engine>& e, std::vector<Handle>& held, bool power_loss) {
  io.CrashNow();
  held.clear();
  StderrCapture quiet("/dev/null");  // the closing engine reports its failed writes
  e.reset();
  REQUIRE((power_loss ? io.LosePower() : io.KeepPageCache()).ok());
}

// Fails the first write request that rewrites bytes already written through
// the same fd (an erase mark: slabs only ever append), once, after Arm().
class RewriteFailer : public FileIoWrapper {
 public:
  using FileIoWrapper::FileIoWrapper;
  void Arm() { armed_ = true; }
  int fired() const { return fired_; }
  Status SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      for (IoRequest& r : requests) {
        if (r.op != IoRequest::Op::kWrite) continue;
        uint64_t& end = written_end_[r.file->object.get()];
        if (armed_ && r.offset < end) {
          armed_ = false;
          ++fired_;
          r.result = -EIO;
          return Status::IOError("injected EIO on an in-place rewrite");
        }
        end = std::max<uint64_t>(end, r.offset + r.len);
      }
    }
    return FileIoWrapper::SubmitAndWait(requests, queue_depth);
  }

 private:
  std::mutex mu_;
  std::map<const FileObject*, uint64_t> written_end_;
  bool armed_ = false;
  int fired_ = 0;
};

}  // namespace

TEST_CASE("an Erase made while a Handle holds the old value is durable once Flush returns (item 1)") {
  for (bool power_loss : {false, true}) {
    CAPTURE(power_loss);
    TempDir dir("dur-erase-held");
    Config c = OnePersistent(dir.path());
    auto base = MakePosixFileIo();
    CrashFileIo io(base.get());
    {
      auto e = MustOpen(c, &io);
      std::vector<Handle> held;
      REQUIRE(e->Put("k", RandomBytes(3000, 1)).ok());
      REQUIRE(e->Flush().ok());
      auto h = e->Get("k");
      REQUIRE(h.ok());
      held.push_back(std::move(*h));
      REQUIRE(e->Put("k", RandomBytes(5000, 2)).ok());
      REQUIRE(e->Erase("k").ok());
      REQUIRE(e->Flush().ok());
      CHECK(SameBytes(held[0], RandomBytes(3000, 1)));  // the reader still has its bytes
      Crash(io, e, held, power_loss);
    }
    auto e = MustOpen(c);
    auto h = e->Get("k");
    CHECK_MESSAGE(!h.ok(), "the erased key came back after a returned Flush and a crash"
                               << std::string(h.ok() && SameBytes(*h, RandomBytes(3000, 1)) ? " (with v1, the value the Handle held)" : ""));
  }
}

TEST_CASE("a failed erase-mark write is reported by Flush and retried (item 2)") {
  TempDir dir("dur-mark-eio");
  Config c = OnePersistent(dir.path());
  auto base = MakePosixFileIo();
  RewriteFailer io(base.get());
  {
    auto e = MustOpen(c, &io);
    REQUIRE(e->Put("k", RandomBytes(3000, 1)).ok());
    REQUIRE(e->Flush().ok());
    io.Arm();  // the next in-place rewrite (the mark flagging v1 erased) fails once
    Status put = e->Put("k", RandomBytes(3000, 2));
    Status erase = e->Erase("k");
    Status flush = e->Flush();
    REQUIRE(io.fired() == 1);
    CHECK_MESSAGE((!put.ok() || !erase.ok() || !flush.ok()),
                  "one erase mark could not be written, yet Put, Erase and Flush all returned OK");
    CHECK_MESSAGE(e->Flush().ok(), "the failed mark is retried once the disk recovers");
  }
  auto e = MustOpen(c);
  auto h = e->Get("k");
  CHECK_MESSAGE(!h.ok(), "erased key served after reopen"
                             << std::string(h.ok() && SameBytes(*h, RandomBytes(3000, 1)) ? " (the replaced value v1)" : ""));
}

TEST_CASE("two persistent tiers: the newest version wins at reopen whatever the tier order (item 3)") {
  for (bool power_loss : {false, true}) {
    CAPTURE(power_loss);
    SUBCASE("overwrite lands in the lower tier while the upper copy is held") {
      TempDir dir("dur-two-tiers");
      Config c = TwoPersistent(dir.path(), 64 << 10);
      auto base = MakePosixFileIo();
      CrashFileIo io(base.get());
      const auto v1 = RandomBytes(20 << 10, 1), v2 = RandomBytes(60 << 10, 2);
      {
        auto e = MustOpen(c, &io);
        std::vector<Handle> held;
        REQUIRE(e->Put("k", v1).ok());
        REQUIRE(e->Flush().ok());
        REQUIRE(TierNamed(e->Stats(), "upper").objects == 1);
        auto h = e->Get("k");  // pinned: v1 cannot be demoted, so v2 does not fit above
        REQUIRE(h.ok());
        held.push_back(std::move(*h));
        REQUIRE(e->Put("k", v2).ok());
        REQUIRE(TierNamed(e->Stats(), "lower").objects == 1);
        REQUIRE(e->Flush().ok());
        Crash(io, e, held, power_loss);
      }
      auto e = MustOpen(c);
      auto h = e->Get("k");
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK_MESSAGE(SameBytes(*h, v2), std::string(SameBytes(*h, v1) ? "the stale upper-tier value v1 was served" : "wrong bytes"));
    }
    SUBCASE("overwrite lands in the upper tier while the lower copy is held") {
      TempDir dir("dur-two-tiers-rev");
      Config c = TwoPersistent(dir.path(), 64 << 10);
      auto base = MakePosixFileIo();
      CrashFileIo io(base.get());
      const auto v1 = RandomBytes(20 << 10, 1), v2 = RandomBytes(20 << 10, 2);
      {
        auto e = MustOpen(c, &io);
        std::vector<Handle> held;
        REQUIRE(e->Put("filler", RandomBytes(50 << 10, 3)).ok());
        auto f = e->Get("filler");  // pinned: k cannot make room above
        REQUIRE(f.ok());
        REQUIRE(e->Put("k", v1).ok());
        REQUIRE(TierNamed(e->Stats(), "lower").objects == 1);
        REQUIRE(e->Flush().ok());
        f->Release();
        REQUIRE(e->Erase("filler").ok());
        auto h = e->Get("k");
        REQUIRE(h.ok());
        held.push_back(std::move(*h));
        REQUIRE(e->Put("k", v2).ok());
        REQUIRE(TierNamed(e->Stats(), "upper").objects == 1);
        REQUIRE(e->Flush().ok());
        Crash(io, e, held, power_loss);
      }
      auto e = MustOpen(c);
      auto h = e->Get("k");
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK_MESSAGE(SameBytes(*h, v2), std::string(SameBytes(*h, v1) ? "the stale lower-tier value v1 was served" : "wrong bytes"));
      CHECK(!e->Contains("filler"));
    }
  }
}
