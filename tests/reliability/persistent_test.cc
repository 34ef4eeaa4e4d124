// Persistent file tiers: what was flushed survives close and reopen, what was
// erased or replaced stays gone, sequence numbers keep the newest version
// across sessions, and scratch tiers are wiped at Open.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <random>
#include <set>

#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

// A persistent chain: a host tier of `host_cap` over one persistent file tier.
Config PersistentChain(const std::string& root, uint64_t host_cap, CodecKind codec = CodecKind::kNone,
                       int stripes = 1) {
  Config c = RelChain(root, host_cap, {256 << 20}, /*persistent=*/true, codec);
  if (stripes > 1) {
    c.tiers.back().paths.clear();
    for (int i = 0; i < stripes; ++i) c.tiers.back().paths.push_back(root + "/f0/s" + std::to_string(i));
  }
  return c;
}

struct Obj {
  std::vector<std::vector<std::byte>> parts;
  std::vector<std::byte> joined() const {
    std::vector<std::byte> all;
    for (auto& p : parts) all.insert(all.end(), p.begin(), p.end());
    return all;
  }
};

Obj MakeObj(std::mt19937_64& rng, uint64_t min_size, uint64_t max_size, CodecKind codec) {
  Obj o;
  const int n = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < n; ++i) {
    const size_t sz = (min_size + rng() % (max_size - min_size + 1)) / n;
    o.parts.push_back(codec == CodecKind::kNone ? RandomBytes(sz, rng()) : CompressibleBytes(sz, rng()));
  }
  return o;
}

Status PutObj(Engine& e, const std::string& key, const Obj& o) {
  std::vector<std::span<const std::byte>> spans;
  for (auto& p : o.parts) spans.emplace_back(p);
  return e.Put(key, spans);
}

void CheckObj(Engine& e, const std::string& key, const Obj& o) {
  auto h = e.Get(key);
  REQUIRE_MESSAGE(h.ok(), key << ": " << h.status().ToString());
  CHECK_MESSAGE(h->num_buffers() == o.parts.size(), key);
  CHECK_MESSAGE(SameBytes(*h, o.joined()), key);
}

}  // namespace

TEST_CASE("objects in a persistent tier survive close and reopen") {
  for (CodecKind codec : {CodecKind::kNone, CodecKind::kZstd, CodecKind::kLz4}) {
    for (int stripes : {1, 2}) {
      CAPTURE(static_cast<int>(codec));
      CAPTURE(stripes);
      TempDir dir("rel-persist");
      const Config c = PersistentChain(dir.path(), 16 << 10, codec, stripes);
      std::map<std::string, Obj> model;
      std::mt19937_64 rng(42);
      {
        auto e = MustOpen(c);
        for (int i = 0; i < 60; ++i) {
          const std::string key = "p/" + std::to_string(rng() % 40);
          Obj o = MakeObj(rng, 20 << 10, 2 << 20, codec);  // all larger than the host tier
          REQUIRE(PutObj(*e, key, o).ok());
          model[key] = std::move(o);
        }
        REQUIRE(e->Flush().ok());
      }
      for (int session = 0; session < 3; ++session) {
        CAPTURE(session);
        auto e = MustOpen(c);
        CHECK(e->Stats().objects == model.size());
        for (auto& [k, o] : model) CheckObj(*e, k, o);
        // Each session replaces a few objects; the newest must win next time.
        for (int i = 0; i < 5; ++i) {
          const std::string key = "p/" + std::to_string(rng() % 40);
          Obj o = MakeObj(rng, 20 << 10, 300 << 10, codec);
          REQUIRE(PutObj(*e, key, o).ok());
          model[key] = std::move(o);
        }
        REQUIRE(e->Flush().ok());
      }
    }
  }
}

TEST_CASE("objects erased or replaced before close (or before a crash) do not come back") {
  // Sizes straddle the 4 KiB block: small records share blocks with their
  // neighbours, large ones own whole blocks. `crash`: the tier is reopened
  // from a copy taken after the last Flush, as a crash would leave it.
  for (bool crash : {true, false})
  for (uint64_t max_size : {uint64_t{3000}, uint64_t{64 << 10}, uint64_t{1 << 20}}) {
    CAPTURE(crash);
    CAPTURE(max_size);
    TempDir dir("rel-erase");
    Config c = PersistentChain(dir.path(), 1024);
    std::map<std::string, Obj> model;
    std::set<std::string> erased;
    std::mt19937_64 rng(max_size);
    {
      auto e = MustOpen(c);
      for (int i = 0; i < 40; ++i) {
        Obj o = MakeObj(rng, 1100, max_size, CodecKind::kNone);
        REQUIRE(PutObj(*e, "e/" + std::to_string(i), o).ok());
        model["e/" + std::to_string(i)] = std::move(o);
      }
      REQUIRE(e->Flush().ok());
      for (int i = 0; i < 40; i += 2) {
        REQUIRE(e->Erase("e/" + std::to_string(i)).ok());
        model.erase("e/" + std::to_string(i));
        erased.insert("e/" + std::to_string(i));
      }
      // Replaced: the old version must not come back either.
      for (int i = 1; i < 40; i += 4) {
        Obj o = MakeObj(rng, 1100, max_size, CodecKind::kNone);
        REQUIRE(PutObj(*e, "e/" + std::to_string(i), o).ok());
        model["e/" + std::to_string(i)] = std::move(o);
      }
      REQUIRE(e->Flush().ok());
      if (crash) {
        CopySegments(dir.path() + "/f0", dir.path() + "/snap");
        c.tiers.back().paths = {dir.path() + "/snap"};
      }
    }
    for (int session = 0; session < 2; ++session) {
      CAPTURE(session);
      auto e = MustOpen(c);
      for (const std::string& k : erased) CHECK_MESSAGE(!e->Contains(k), k << " came back after Erase");
      for (auto& [k, o] : model) CheckObj(*e, k, o);
      CHECK(e->Stats().objects == model.size());
    }
  }
}

TEST_CASE("an erased key does not fall back to an older version after reopen or a crash") {
  for (bool crash : {true, false}) {
    CAPTURE(crash);
    TempDir dir("rel-erase-old");
    Config c = PersistentChain(dir.path(), 1024);
    {
      auto e = MustOpen(c);
      REQUIRE(e->Put("k", RandomBytes(2000, 1)).ok());        // v1: shares a block
      REQUIRE(e->Put("j", RandomBytes(2000, 3)).ok());
      REQUIRE(e->Flush().ok());
      REQUIRE(e->Put("k", RandomBytes(200 << 10, 2)).ok());   // v2 replaces it
      REQUIRE(e->Flush().ok());
      REQUIRE(e->Erase("k").ok());
      REQUIRE(e->Flush().ok());
      if (crash) {
        CopySegments(dir.path() + "/f0", dir.path() + "/snap");
        c.tiers.back().paths = {dir.path() + "/snap"};
      }
    }
    auto e = MustOpen(c);
    CHECK_MESSAGE(!e->Contains("k"), "an erased key came back (an older version was recovered)");
    auto h = e->Get("j");
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(SameBytes(*h, RandomBytes(2000, 3)));
  }
}

TEST_CASE("objects the mover demoted into a persistent tier survive reopen") {
  TempDir dir("rel-demoted");
  const Config c = PersistentChain(dir.path(), 1 << 20);
  std::map<std::string, std::vector<std::byte>> model;
  uint64_t on_disk = 0;
  {
    auto e = MustOpen(c, nullptr, /*background=*/true);
    for (int i = 0; i < 40; ++i) {
      auto v = RandomBytes(100 << 10, 700 + i);
      REQUIRE(e->Put("d/" + std::to_string(i), v).ok());
      model["d/" + std::to_string(i)] = std::move(v);
    }
    REQUIRE(e->Flush().ok());
    on_disk = TierNamed(e->Stats(), "f0").objects;
    CHECK(on_disk > 20);
  }
  auto e = MustOpen(c);
  uint64_t found = 0;
  for (auto& [k, v] : model) {
    auto h = e->Get(k);
    if (!h.ok()) {
      CHECK_MESSAGE(h.status().IsNotFound(), k << ": " << h.status().ToString());
      continue;
    }
    ++found;
    CHECK_MESSAGE(SameBytes(*h, v), k);
  }
  CHECK(found == on_disk);
}

TEST_CASE("scratch tiers are wiped at open but persistent tiers in the same chain are not") {
  TempDir dir("rel-scratch");
  Config c = RelChain(dir.path(), 64 << 10, {64 << 20, 64 << 20});
  c.tiers[2].persistent = true;
  // f0 is scratch; f1 persistent. f0 takes objects first, f1 when f0 is full.
  c.tiers[1].capacity_bytes = 1 << 20;
  c.tiers[1].capacity_text = "1048576";
  std::map<std::string, std::vector<std::byte>> model;
  {
    auto e = MustOpen(c);
    for (int i = 0; i < 30; ++i) {
      auto v = RandomBytes(100 << 10, 800 + i);
      REQUIRE(e->Put("s/" + std::to_string(i), v).ok());
      model["s/" + std::to_string(i)] = std::move(v);
    }
    REQUIRE(e->Flush().ok());
    CHECK(TierNamed(e->Stats(), "f0").objects > 0);
    CHECK(TierNamed(e->Stats(), "f1").objects > 0);
  }
  // Leftovers from an earlier run of the scratch tier: a segment (wiped) and
  // a file that is not ours (left alone).
  { std::ofstream(dir.path() + "/f0/seg-00000077.spw") << "stale scratch segment"; }
  { std::ofstream(dir.path() + "/f0/notes.txt") << "not a segment"; }
  const auto f1_segments = SegmentFiles(dir.path() + "/f1");
  CHECK_FALSE(f1_segments.empty());
  auto e = MustOpen(c);
  CHECK(SegmentFiles(dir.path() + "/f0").empty());
  CHECK(std::filesystem::exists(dir.path() + "/f0/notes.txt"));
  CHECK(TierNamed(e->Stats(), "f0").objects == 0);
  uint64_t found = 0;
  for (auto& [k, v] : model) {
    auto h = e->Get(k);
    if (h.ok()) {
      ++found;
      CHECK_MESSAGE(SameBytes(*h, v), k);
    } else {
      CHECK(h.status().IsNotFound());
    }
  }
  CHECK(found == TierNamed(e->Stats(), "f1").objects);
  CHECK(found > 0);
}

TEST_CASE("a reopened persistent tier accepts new objects and keeps its space accounting") {
  TempDir dir("rel-reuse");
  const Config c = PersistentChain(dir.path(), 1024);
  {
    auto e = MustOpen(c);
    for (int i = 0; i < 20; ++i) REQUIRE(e->Put("a/" + std::to_string(i), RandomBytes(50 << 10, i)).ok());
    REQUIRE(e->Flush().ok());
  }
  uint64_t used_after_open = 0;
  {
    auto e = MustOpen(c);
    used_after_open = TierNamed(e->Stats(), "f0").used_bytes;
    CHECK(used_after_open >= 20u * (50 << 10));
    for (int i = 0; i < 20; ++i) REQUIRE(e->Erase("a/" + std::to_string(i)).ok());
    CHECK(TierNamed(e->Stats(), "f0").used_bytes == 0);
    for (int i = 0; i < 20; ++i) REQUIRE(e->Put("b/" + std::to_string(i), RandomBytes(50 << 10, 100 + i)).ok());
    REQUIRE(e->Flush().ok());
  }
  auto e = MustOpen(c);
  for (int i = 0; i < 20; ++i) {
    CHECK_FALSE(e->Contains("a/" + std::to_string(i)));
    auto h = e->Get("b/" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(SameBytes(*h, RandomBytes(50 << 10, 100 + i)));
  }
}
