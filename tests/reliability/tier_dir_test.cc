// Durability of a tier's directory: one engine per
// directory (LOCK), aliased directories refused at Open, a persistent
// directory never wiped by a chain that forgot `persistent:`, non-regular
// files left alone, and a scratch directory deleted under a running engine.
#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

// One persistent (or scratch) file tier under `dir`, no host tier, so every
// Put lands on the disk.
Config DiskOnly(const std::string& dir, bool persistent) {
  Config c;
  c.source = "<tier dir test>";
  c.tiers.push_back(RelFileTier("f0", dir, 64 << 20, persistent));
  return c;
}

bool IsFifo(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace

TEST_CASE("a second engine on the same tier directory is refused, naming the directory and the holder") {
  for (bool persistent : {true, false}) {
    CAPTURE(persistent);
    TempDir dir("rel-lock");
    const Config c = DiskOnly(dir.path() + "/f0", persistent);
    auto first = MustOpen(c);
    for (int i = 0; i < 10; ++i) REQUIRE(first->Put("k" + std::to_string(i), RandomBytes(3000, i)).ok());
    REQUIRE(first->Flush().ok());
    auto second = Engine::Open(c);
    CHECK_MESSAGE(!second.ok(), "a second engine opened the directory the first one holds");
    if (!second.ok()) {
      const std::string msg = second.status().ToString();
      CHECK_MESSAGE(msg.find(dir.path() + "/f0") != std::string::npos, msg);
      CHECK_MESSAGE(msg.find("pid " + std::to_string(::getpid())) != std::string::npos, msg);
    }
    for (int i = 0; i < 10; ++i) {
      auto h = first->Get("k" + std::to_string(i));
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK(SameBytes(*h, RandomBytes(3000, i)));
    }
    first.reset();
    CHECK(Engine::Open(c).ok());  // the lock goes with the engine
  }
}

TEST_CASE("tier directories aliased through a symlinked parent are refused at Open") {
  TempDir dir("rel-alias");
  REQUIRE(std::filesystem::create_directory(dir.path() + "/real"));
  REQUIRE(::symlink((dir.path() + "/real").c_str(), (dir.path() + "/link").c_str()) == 0);
  Config persistent = DiskOnly(dir.path() + "/real/d", true);
  {
    auto e = MustOpen(persistent);
    for (int i = 0; i < 20; ++i) REQUIRE(e->Put("p" + std::to_string(i), RandomBytes(5000, i)).ok());
    REQUIRE(e->Flush().ok());
  }
  for (const char* scratch_dir : {"/link/d", "/link/d/inner", "/link"}) {
    CAPTURE(scratch_dir);
    Config c;
    c.source = "<alias test>";
    c.tiers.push_back(RelFileTier("scratch", dir.path() + scratch_dir, 64 << 20, false));
    c.tiers.push_back(RelFileTier("keep", dir.path() + "/real/d", 64 << 20, true));
    auto e = Engine::Open(c);
    CHECK_MESSAGE(!e.ok(), "aliased tier directories were accepted");
    if (!e.ok()) CHECK_MESSAGE(e.status().ToString().find(dir.path() + "/real/d") != std::string::npos,
                               e.status().ToString());
  }
  auto e = MustOpen(persistent);
  for (int i = 0; i < 20; ++i) {
    auto h = e->Get("p" + std::to_string(i));
    REQUIRE_MESSAGE(h.ok(), "p" << i << ": " << h.status().ToString());
    CHECK(SameBytes(*h, RandomBytes(5000, i)));
  }
}

TEST_CASE("a persistent directory reopened without persistent: is refused unless wipe_persistent") {
  TempDir dir("rel-wipe");
  Config c = DiskOnly(dir.path() + "/f0", true);
  {
    auto e = MustOpen(c);
    for (int i = 0; i < 10; ++i) REQUIRE(e->Put("w" + std::to_string(i), RandomBytes(5000, i)).ok());
    REQUIRE(e->Flush().ok());
  }
  c.tiers[0].persistent = false;
  {
    auto e = Engine::Open(c);
    CHECK_MESSAGE(!e.ok(), "a scratch tier wiped a directory of persistent records");
    if (!e.ok()) {
      CHECK_MESSAGE(e.status().ToString().find("wipe_persistent") != std::string::npos, e.status().ToString());
    }
  }
  c.tiers[0].persistent = true;
  {
    auto e = MustOpen(c);
    CHECK(e->Stats().objects == 10);
  }
  c.tiers[0].persistent = false;
  c.tiers[0].wipe_persistent = true;
  {
    auto e = MustOpen(c);
    CHECK(e->Stats().objects == 0);
  }
  CHECK(SegmentFiles(dir.path() + "/f0").empty());
}

TEST_CASE("Open leaves a FIFO named like a segment alone") {
  for (bool persistent : {false, true}) {
    CAPTURE(persistent);
    TempDir dir("rel-fifo");
    const std::string tier = dir.path() + "/f0";
    REQUIRE(std::filesystem::create_directory(tier));
    REQUIRE(::chmod(tier.c_str(), 0700) == 0);
    const std::string fifo = tier + "/seg-00000001.spw";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    {
      auto e = Engine::Open(DiskOnly(tier, persistent));  // refusing is fine; deleting is not
      if (e.ok()) {
        REQUIRE((*e)->Put("k", RandomBytes(5000, 1)).ok());
        REQUIRE((*e)->Flush().ok());
      } else {
        MESSAGE("Open refused: " << e.status().ToString());
      }
    }
    CHECK_MESSAGE(IsFifo(fifo), "Open deleted a FIFO it did not create");
  }
}

TEST_CASE("a scratch tier whose directory was deleted keeps working: Flush recreates it") {
  TempDir dir("rel-rmdir");
  const std::string tier = dir.path() + "/f0";
  auto e = MustOpen(DiskOnly(tier, false));
  for (int i = 0; i < 5; ++i) REQUIRE(e->Put("a" + std::to_string(i), RandomBytes(5000, i)).ok());
  REQUIRE(e->Flush().ok());
  std::filesystem::remove_all(tier);
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    const std::string key = "b" + std::to_string(round);
    Status put = e->Put(key, RandomBytes(5000, 100 + round));
    CHECK_MESSAGE(put.ok(), put.ToString());
    Status flushed = e->Flush();
    CHECK_MESSAGE(flushed.ok(), flushed.ToString());
    if (put.ok()) {
      auto h = e->Get(key);
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK(SameBytes(*h, RandomBytes(5000, 100 + round)));
    }
  }
  CHECK(std::filesystem::is_directory(tier));
}
