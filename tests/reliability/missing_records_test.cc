// Records lost below the last Flush: a read error while
// recovering, a zeroed 4 KiB block, a truncated segment. Recovery and
// `spillway inspect` must say records are missing (the segment manifest),
// never delete what could not be read, and still serve the intact records.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

Config DiskOnly(const std::string& dir, uint64_t segment_bytes = 4ull << 20) {
  Config c;
  c.source = "<missing records test>";
  c.tiers.push_back(RelFileTier("f0", dir, 256 << 20, /*persistent=*/true));
  c.tiers[0].io.segment_bytes = segment_bytes;
  return c;
}

// `n` objects of `size` bytes, one Put each: each record starts a 4 KiB
// block of its own (one slab per Put), record i at offset 4096 * i.
void WriteSmall(const Config& c, int n, size_t size) {
  auto e = MustOpen(c);
  for (int i = 0; i < n; ++i) REQUIRE(e->Put("s" + std::to_string(i), RandomBytes(size, i)).ok());
  REQUIRE(e->Flush().ok());
}

void ZeroBlock(const std::string& file, uint64_t offset) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::vector<char> zeros(4096, 0);
  REQUIRE(::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(offset)) == 4096);
  ::close(fd);
}

void TruncateTo(const std::string& file, uint64_t size) { REQUIRE(::truncate(file.c_str(), static_cast<off_t>(size)) == 0); }

// True when `spillway inspect --json` output lists a "missing" problem.
bool InspectSaysMissing(const std::string& out) {
  auto j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.contains("problems")) return false;
  for (const auto& p : j["problems"]) {
    if (p.value("state", "") == "missing") return true;
  }
  return false;
}

// What reopening reports on stderr, and the engine.
std::string ReopenReport(const Config& c, std::unique_ptr<Engine>* out, const std::string& scratch) {
  StderrCapture cap(scratch);
  *out = MustOpen(c);
  return cap.Stop();
}

}  // namespace

TEST_CASE("a read error while recovering fails Open and deletes nothing") {
  // Read requests at Open: the manifest (once there is one), then the scan's
  // 4 MiB windows. Fail the first window, and one in the middle of the segment.
  for (uint64_t nth : {uint64_t{1}, uint64_t{2}}) {
    CAPTURE(nth);
    TempDir dir("rel-readerr");
    const Config c = DiskOnly(dir.path() + "/f0", 64ull << 20);  // one segment of 10 MiB
    {
      auto e = MustOpen(c);
      for (int i = 0; i < 10; ++i) REQUIRE(e->Put("r" + std::to_string(i), RandomBytes(1 << 20, i)).ok());
      REQUIRE(e->Flush().ok());
    }
    {
      auto real = MakePosixFileIo();
      FaultFileIo faulty(real.get(), FaultSpec{});
      faulty.FailNth(FaultKind::kEioRead, nth);
      EngineOptions o;
      o.file_io = &faulty;
      auto e = Engine::Open(c, o);
      CHECK_MESSAGE(!e.ok(), "Open went on after a read error while recovering");
      if (e.ok()) {
        // What the issue did next: replace every object the partial scan found.
        for (int i = 0; i < 10; ++i) {
          if ((*e)->Contains("r" + std::to_string(i))) {
            REQUIRE((*e)->Put("r" + std::to_string(i), RandomBytes(1 << 20, 100 + i)).ok());
          }
        }
        REQUIRE((*e)->Flush().ok());
      } else {
        MESSAGE("Open refused: " << e.status().ToString());
        CHECK(e.status().ToString().find("nothing was deleted") != std::string::npos);
      }
    }
    auto e = MustOpen(c);
    int lost = 0;
    for (int i = 0; i < 10; ++i) {
      auto h = e->Get("r" + std::to_string(i));
      if (!h.ok()) {
        ++lost;
        continue;
      }
      CHECK((SameBytes(*h, RandomBytes(1 << 20, i)) || SameBytes(*h, RandomBytes(1 << 20, 100 + i))));
    }
    CHECK_MESSAGE(lost == 0, lost << " of 10 flushed objects lost after a read error during recovery");
  }
}

TEST_CASE("a zeroed 4 KiB block holding a whole record is reported missing by recovery and inspect") {
  TempDir dir("rel-zeroed");
  const std::string tier = dir.path() + "/f0";
  const Config c = DiskOnly(tier);
  WriteSmall(c, 8, 1500);
  const auto segs = SegmentFiles(tier);
  REQUIRE(segs.size() == 1);
  ZeroBlock(segs[0], 3 * 4096);  // record s3, whole
  auto r = RunCli("inspect --json --summary " + tier);
  CHECK_MESSAGE(r.rc == 1, "inspect exit " << r.rc << ": " << r.out);
  CHECK_MESSAGE(InspectSaysMissing(r.out), r.out);
  std::unique_ptr<Engine> e;
  const std::string report = ReopenReport(c, &e, dir.path() + "/stderr");
  CHECK_MESSAGE(report.find("missing") != std::string::npos, "recovery said: '" << report << "'");
  for (int i = 0; i < 8; ++i) {
    if (i == 3) continue;
    auto h = e->Get("s" + std::to_string(i));
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(SameBytes(*h, RandomBytes(1500, i)));
  }
  // Reported at every reopen and by inspect until the segment goes away.
  e.reset();
  r = RunCli("inspect --summary " + tier);
  CHECK_MESSAGE(r.rc == 1, r.out);
}

TEST_CASE("a segment truncated at a 4 KiB boundary or mid-record: the loss is reported, intact records are served") {
  for (uint64_t cut : {uint64_t{8192}, uint64_t{5000}}) {
    CAPTURE(cut);
    TempDir dir("rel-trunc");
    const std::string tier = dir.path() + "/f0";
    const Config c = DiskOnly(tier);
    WriteSmall(c, 6, 700);  // records of 776 bytes at 0, 4096, 8192, ...: s1 ends at 4872
    const auto segs = SegmentFiles(tier);
    REQUIRE(segs.size() == 1);
    TruncateTo(segs[0], cut);
    auto r = RunCli("inspect --json --summary " + tier);
    CHECK_MESSAGE(r.rc == 1, "inspect exit " << r.rc << ": " << r.out);
    CHECK_MESSAGE(InspectSaysMissing(r.out), r.out);
    std::unique_ptr<Engine> e;
    const std::string report = ReopenReport(c, &e, dir.path() + "/stderr");
    CHECK_MESSAGE(report.find("missing") != std::string::npos, "recovery said: '" << report << "'");
    for (int i = 0; i < 2; ++i) {  // s0 and s1 lie wholly below both cuts
      auto h = e->Get("s" + std::to_string(i));
      REQUIRE_MESSAGE(h.ok(), "s" << i << ": " << h.status().ToString());
      CHECK(SameBytes(*h, RandomBytes(700, i)));
    }
  }
}
