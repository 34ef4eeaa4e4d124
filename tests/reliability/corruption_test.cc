// Corruption: bytes flipped in a persistent tier's segment files, with the
// engine closed (recovery must skip and report) or open (reads must fail with
// Corruption). Never wrong bytes; unaffected objects read back intact; and
// `spillway inspect` finds the damage (exit 1) but passes a clean tier (exit 0)
// without writing to it.
#include <doctest/doctest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "reliability_util.h"
#include "tiers/record.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

std::string FileName(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// A host tier over one persistent file tier in `tier_dir`.
Config Chain(const std::string& root, CodecKind codec, const std::string& tier_dir = "") {
  Config c = RelChain(root, 1024, {512 << 20}, /*persistent=*/true, codec);
  if (!tier_dir.empty()) c.tiers.back().paths = {tier_dir};
  return c;
}

// Fills a persistent tier with `n` objects of mixed sizes and flushes it;
// copies its segments to `snapshot` (when given) before closing. Returns
// the objects' bytes.
std::map<std::string, std::vector<std::byte>> Fill(const Config& c, int n, uint64_t seed,
                                                   const std::string& snapshot = "") {
  std::map<std::string, std::vector<std::byte>> model;
  std::mt19937_64 rng(seed);
  auto e = MustOpen(c);
  for (int i = 0; i < n; ++i) {
    const uint64_t r = rng() % 10;
    const size_t size = r < 6 ? 1100 + rng() % 3000 : (r < 9 ? 4096 + rng() % (60 << 10) : (1 << 20) + rng() % (1 << 20));
    auto v = c.tiers.back().codec.kind == CodecKind::kNone ? RandomBytes(size, rng()) : CompressibleBytes(size, rng());
    const std::string key = "c/" + std::to_string(i);
    REQUIRE(e->Put(key, v).ok());
    model[key] = std::move(v);
  }
  REQUIRE(e->Flush().ok());
  if (!snapshot.empty()) CopySegments(c.tiers.back().paths[0], snapshot);
  return model;
}

std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> s;
  for (const std::string& f : AllFiles(dir)) s[f] = ReadFile(f);
  return s;
}

}  // namespace

TEST_CASE("spillway inspect passes a clean persistent tier and does not write to it") {
  TempDir dir("rel-inspect-clean");
  const std::string tier = dir.path() + "/snap";
  auto model = Fill(Chain(dir.path(), CodecKind::kLz4), 200, 5, tier);
  const Config c = Chain(dir.path(), CodecKind::kLz4, tier);
  const auto before = Snapshot(tier);
  auto r = RunCli("inspect " + tier);
  CHECK(r.rc == 0);
  CHECK(r.out.find("corrupt 0") != std::string::npos);
  r = RunCli("inspect --json " + tier);
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["totals"]["live"] == model.size());
  CHECK(j["totals"]["keys"] == model.size());
  CHECK(j["totals"]["corrupt"] == 0);
  CHECK(j["records"].size() == model.size());
  CHECK(j["ok"] == true);
  CHECK(Snapshot(tier) == before);
  // Erased and replaced objects leave erased, freed and stale records, not
  // corruption; neither does closing the engine.
  {
    auto e = MustOpen(c);
    for (int i = 0; i < 200; i += 3) REQUIRE(e->Erase("c/" + std::to_string(i)).ok());
    for (int i = 1; i < 200; i += 3) REQUIRE(e->Put("c/" + std::to_string(i), RandomBytes(5000, i)).ok());
    REQUIRE(e->Flush().ok());
    r = RunCli("inspect --json --summary " + tier);
    CHECK_MESSAGE(r.rc == 0, r.out);
    j = nlohmann::json::parse(r.out);
    CHECK(j["totals"]["corrupt"] == 0);
    CHECK(j["totals"]["unreadable"] == 0);
    CHECK(j["totals"]["keys"] == 200 - 67);
  }
  r = RunCli("inspect --json --summary " + tier);
  CHECK_MESSAGE(r.rc == 0, r.out);
  j = nlohmann::json::parse(r.out);
  CHECK(j["totals"]["corrupt"] == 0);
  CHECK(j["totals"]["unreadable"] == 0);
}

TEST_CASE("spillway inspect usage and unreadable input exit 2") {
  TempDir dir("rel-inspect-usage");
  CHECK(RunCli("inspect").rc == 2);
  CHECK(RunCli("inspect " + dir.path() + "/missing").rc == 2);
  { std::ofstream(dir.path() + "/file") << "x"; }
  CHECK(RunCli("inspect " + dir.path() + "/file").rc == 2);
  auto r = RunCli("inspect --json " + dir.path());  // no segment files: not a tier (a wrong path, most likely)
  CHECK(r.rc == 2);
}

TEST_CASE("1,000+ random bytes flipped across a closed persistent tier: detected, never served") {
  for (CodecKind codec : {CodecKind::kNone, CodecKind::kZstd}) {
    CAPTURE(static_cast<int>(codec));
    TempDir dir("rel-flip");
    // The damage is done to a snapshot taken after Flush: the test is about
    // what recovery makes of damaged files, not about closing.
    const std::string tier = dir.path() + "/snap";
    auto model = Fill(Chain(dir.path(), codec), 400, 17 + static_cast<int>(codec), tier);
    const Config c = Chain(dir.path(), codec, tier);
    auto recs = ScanRecords(tier);
    REQUIRE(recs.size() == model.size());
    CHECK(RunCli("inspect --summary " + tier).rc == 0);

    // Flip >= 1,000 distinct bytes chosen uniformly over all segment bytes.
    std::vector<std::pair<std::string, uint64_t>> files;
    uint64_t total = 0;
    for (const std::string& f : SegmentFiles(tier)) {
      const uint64_t sz = std::filesystem::file_size(f);
      files.emplace_back(f, sz);
      total += sz;
    }
    std::mt19937_64 rng(1234 + static_cast<int>(codec));
    std::set<std::pair<std::string, uint64_t>> flips;
    while (flips.size() < 1200) {
      uint64_t at = rng() % total;
      for (auto& [f, sz] : files) {
        if (at < sz) {
          flips.emplace(f, at);
          break;
        }
        at -= sz;
      }
    }
    for (auto& [f, at] : flips) {
      const int fd = ::open(f.c_str(), O_RDWR);
      REQUIRE(fd >= 0);
      unsigned char b;
      REQUIRE(::pread(fd, &b, 1, static_cast<off_t>(at)) == 1);
      b ^= static_cast<unsigned char>(1 + rng() % 255);
      REQUIRE(::pwrite(fd, &b, 1, static_cast<off_t>(at)) == 1);
      ::close(fd);
    }
    std::set<std::string> affected;
    for (auto& [key, loc] : recs) {
      auto lo = flips.lower_bound({loc.file, loc.offset});
      if (lo != flips.end() && lo->first == loc.file && lo->second < loc.offset + loc.length) affected.insert(key);
    }
    MESSAGE(flips.size() << " bytes flipped over " << total << " bytes; " << affected.size() << " of "
                         << recs.size() << " objects affected");
    CHECK(affected.size() > 50);
    CHECK(affected.size() < recs.size());

    // inspect first (reopening may rewrite the files): exit 1, every affected key gone from the live records, every
    // unaffected one listed.
    auto r = RunCli("inspect --json " + tier);
    CHECK(r.rc == 1);
    auto j = nlohmann::json::parse(r.out);
    CHECK(j["totals"]["corrupt"].get<uint64_t>() > 0);
    CHECK(j["ok"] == false);
    std::set<std::string> listed;
    for (auto& rec : j["records"]) {
      if (rec["state"] == "live") listed.insert(rec["key"].get<std::string>());
    }
    for (auto& [key, v] : model) {
      if (affected.count(key)) {
        CHECK_MESSAGE(!listed.count(key), "inspect lists damaged " << key << " as live");
      } else {
        CHECK_MESSAGE(listed.count(key), "inspect misses intact " << key);
      }
    }
    // Every affected record is reported by inspect (a problem at its offset)
    // or lies in a region inspect reported as damaged before it.
    std::map<std::string, std::vector<uint64_t>> problem_at;
    for (auto& p : j["problems"]) problem_at[p["segment"].get<std::string>()].push_back(p["offset"].get<uint64_t>());
    uint64_t missed = 0;
    for (const std::string& key : affected) {
      const RecLoc& loc = recs[key];
      auto& v = problem_at[FileName(loc.file)];
      bool found = false;
      for (uint64_t off : v) found |= off >= loc.offset && off < loc.offset + loc.length;
      if (!found) ++missed;
    }
    MESSAGE("inspect: " << j["problems"].size() << " problems; " << missed
                        << " affected records without a problem at their own offset");
    CHECK(j["problems"].size() >= affected.size() - missed);
    // Reopen: affected objects are Corruption or (skipped at recovery) NotFound.
    StderrCapture cap(dir.path() + "/recovery.log");
    auto e = MustOpen(c);
    const std::string report = cap.Stop();
    uint64_t wrong = 0, corrupt = 0, skipped = 0, unreported = 0, intact = 0;
    std::vector<std::string> unreported_keys;
    for (auto& [key, v] : model) {
      auto h = e->Get(key);
      if (affected.count(key)) {
        if (h.ok()) {
          ++wrong;
          continue;
        }
        if (h.status().IsCorruption()) {
          ++corrupt;
        } else {
          CHECK_MESSAGE(h.status().IsNotFound(), key << ": " << h.status().ToString());
          ++skipped;
          const RecLoc& loc = recs[key];
          const std::string where = FileName(loc.file) + " offset " + std::to_string(loc.offset) + ":";
          auto m = flips.lower_bound({loc.file, loc.offset});
          const bool magic_hit = m != flips.end() && m->first == loc.file && m->second < loc.offset + 4;
          if (!magic_hit && report.find(where) == std::string::npos) {
            ++unreported;
            if (unreported_keys.size() < 5) unreported_keys.push_back(where);
          }
        }
      } else {
        REQUIRE_MESSAGE(h.ok(), key << " was not affected but: " << h.status().ToString());
        CHECK_MESSAGE(SameBytes(*h, v), key);
        ++intact;
      }
    }
    MESSAGE(corrupt << " Corruption, " << skipped << " skipped at recovery, " << intact << " intact");
    CHECK(wrong == 0);
    CHECK(intact == model.size() - affected.size());
    // Every skipped record must be in the recovery report (records whose
    // magic was hit: see the next test case).
    CHECK_MESSAGE(unreported == 0, "skipped without a report, e.g. " << (unreported_keys.empty() ? "" : unreported_keys[0]));
  }
}

TEST_CASE("a record whose header magic is destroyed is reported as skipped at recovery") {
  TempDir dir("rel-magic");
  const std::string tier = dir.path() + "/snap";
  auto model = Fill(Chain(dir.path(), CodecKind::kNone), 30, 99, tier);
  const Config c = Chain(dir.path(), CodecKind::kNone, tier);
  auto recs = ScanRecords(tier);
  // Destroy the magic of three records (first of a slab, middle, last).
  std::vector<std::string> victims = {"c/0", "c/7", "c/29"};
  for (const std::string& k : victims) {
    const RecLoc& loc = recs[k];
    const int fd = ::open(loc.file.c_str(), O_RDWR);
    REQUIRE(fd >= 0);
    const char junk[4] = {'J', 'U', 'N', 'K'};
    REQUIRE(::pwrite(fd, junk, 4, static_cast<off_t>(loc.offset)) == 4);
    ::close(fd);
  }
  auto r = RunCli("inspect --json " + tier);
  CHECK(r.rc == 1);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["problems"].size() >= victims.size());
  StderrCapture cap(dir.path() + "/recovery.log");
  auto e = MustOpen(c);
  const std::string report = cap.Stop();
  for (const std::string& k : victims) {
    const RecLoc& loc = recs[k];
    auto h = e->Get(k);
    CHECK_FALSE(h.ok());
    const std::string where = FileName(loc.file) + " offset " + std::to_string(loc.offset) + ":";
    CHECK_MESSAGE(report.find(where) != std::string::npos,
                  k << " (" << where << ") was dropped without a report; recovery said:\n" << report);
  }
  for (auto& [k, v] : model) {
    if (std::find(victims.begin(), victims.end(), k) != victims.end()) continue;
    auto h = e->Get(k);
    REQUIRE(h.ok());
    CHECK(SameBytes(*h, v));
  }
}

TEST_CASE("bytes flipped under an open engine: reads fail with Corruption, never wrong bytes") {
  for (CodecKind codec : {CodecKind::kNone, CodecKind::kZstd, CodecKind::kLz4}) {
    for (bool persistent : {false, true}) {
      CAPTURE(static_cast<int>(codec));
      CAPTURE(persistent);
      TempDir dir("rel-flip-open");
      Config c = RelChain(dir.path(), 1024, {256 << 20}, persistent, codec);
      auto e = MustOpen(c);
      std::map<std::string, std::vector<std::byte>> model;
      for (int i = 0; i < 40; ++i) {
        const size_t size = i % 4 == 0 ? (2 << 20) + i : 2000 + i * 997;
        auto v = codec == CodecKind::kNone ? RandomBytes(size, i) : CompressibleBytes(size, i);
        REQUIRE(e->Put("o/" + std::to_string(i), v).ok());
        model["o/" + std::to_string(i)] = std::move(v);
      }
      REQUIRE(e->Flush().ok());
      auto recs = ScanRecords(dir.path() + "/f0");
      REQUIRE(recs.size() == model.size());
      std::mt19937_64 rng(77);
      uint64_t checked = 0;
      for (auto& [key, loc] : recs) {
        // Header, key, buffer table or payload: one byte anywhere in the record.
        const uint64_t at = loc.offset + rng() % (loc.length);
        const int fd = ::open(loc.file.c_str(), O_RDWR);
        REQUIRE(fd >= 0);
        unsigned char orig, b;
        REQUIRE(::pread(fd, &orig, 1, static_cast<off_t>(at)) == 1);
        b = orig ^ static_cast<unsigned char>(1 + rng() % 255);
        REQUIRE(::pwrite(fd, &b, 1, static_cast<off_t>(at)) == 1);
        {
          auto h = e->Get(key);
          CHECK_MESSAGE(!h.ok(), key << ": flipped byte at record offset " << at - loc.offset << " was served");
          if (!h.ok()) CHECK_MESSAGE(h.status().IsCorruption(), key << ": " << h.status().ToString());
        }
        // Undo: the object reads correctly again (nothing sticky, nothing lost).
        REQUIRE(::pwrite(fd, &orig, 1, static_cast<off_t>(at)) == 1);
        ::close(fd);
        auto h = e->Get(key);
        REQUIRE_MESSAGE(h.ok(), key << ": " << h.status().ToString());
        CHECK(SameBytes(*h, model[key]));
        ++checked;
      }
      CHECK(checked == model.size());
      CHECK(TierNamed(e->Stats(), "f0").checksum_failures >= model.size());
    }
  }
}
