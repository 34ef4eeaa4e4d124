// Engine::SetProcessMemoryLimit: a host tier that yields to the process's
// resident memory (engine/memory_governor.cc), with the background mover.
#include <doctest/doctest.h>

#include <chrono>
#include <thread>

#include "base/process_memory.h"
#include "engine/engine_core.h"
#include "tiers/file_tier.h"
#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

constexpr uint64_t kMiB = 1 << 20;

uint64_t HostUsed(Engine& e) { return e.Stats().tiers[0].used_bytes; }

}  // namespace

TEST_CASE("base: the process's resident memory grows with memory it touches") {
  const uint64_t before = ProcessResidentBytes();
  REQUIRE(before > 0);
  std::vector<std::byte> block(64 * kMiB, std::byte{1});  // value-initialized: every page touched
  const uint64_t after = ProcessResidentBytes();
  CHECK(after >= before + 48 * kMiB);
  CHECK(block[block.size() / 2] == std::byte{1});
}

TEST_CASE("a process memory limit demotes from the host tier below its watermarks, and 0 turns it off") {
  TempDir dir("procmem");
  auto opened = Engine::Open(HostFileChain(dir.path(), 512 * kMiB, 1024 * kMiB));
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  Engine& e = **opened;
  // Memory earlier cases in this process freed may sit in the heap, and the
  // Puts below would reuse it without the resident set growing.
  TrimProcessHeap();
  const uint64_t base = ProcessResidentBytes();
  for (int i = 0; i < 64; ++i) REQUIRE(e.Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e.Flush().ok());
  // 64 MiB of 512: far below the high watermark, so nothing moved.
  CHECK(HostUsed(e) == 64 * kMiB);
  CHECK(e.Stats().tiers[0].demotions_out == 0);
  CHECK(e.Stats().process_memory_limit == 0);

  // A limit 16 MiB above where the process started: the tier gives up (at
  // least) the excess, about 48 MiB, whatever its watermarks say.
  e.SetProcessMemoryLimit(base + 16 * kMiB);
  REQUIRE(e.Flush().ok());  // Flush asks the mover to act on the pressure, and waits for it
  const auto s = e.Stats();
  CHECK(s.process_memory_limit == base + 16 * kMiB);
  CHECK(s.process_resident_bytes > 0);
  CHECK(s.tiers[0].demotions_out >= 40);
  CHECK(HostUsed(e) <= 24 * kMiB);
  for (int i = 0; i < 64; ++i) {
    auto h = e.Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(kMiB, i)));
  }

  // Off again: new objects stay in memory.
  e.SetProcessMemoryLimit(0);
  REQUIRE(e.Flush().ok());
  const uint64_t demoted = e.Stats().tiers[0].demotions_out;
  for (int i = 0; i < 32; ++i) REQUIRE(e.Put("n" + std::to_string(i), Bytes(kMiB, 100 + i)).ok());
  REQUIRE(e.Flush().ok());
  CHECK(e.Stats().tiers[0].demotions_out == demoted);
  CHECK(e.Stats().process_memory_excess_bytes == 0);
}

TEST_CASE("RelieveMemory makes room for incoming bytes at once, not at the mover's next tick") {
  TempDir dir("procmem");
  auto opened = Engine::Open(HostFileChain(dir.path(), 512 * kMiB, 1024 * kMiB));
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  Engine& e = **opened;
  CHECK(e.RelieveMemory(1ull << 40));  // no limit: nothing to do
  for (int i = 0; i < 64; ++i) REQUIRE(e.Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e.Flush().ok());
  REQUIRE(HostUsed(e) == 64 * kMiB);
  // What RelieveMemory frees before it demotes (the file tier's idle I/O
  // buffers, the heap's free memory) is freed here first, so that the
  // resident set below is the one it finds.
  static_cast<internal::EngineCore&>(e).tier(1).ReleaseCachedMemory();
  TrimProcessHeap();
  const uint64_t rss = ProcessResidentBytes();
  REQUIRE(rss > 64 * kMiB);
  // 20 MiB over the limit, and 16 MiB about to arrive: about 36 MiB go
  // before the call returns (more where freed memory stays in the heap).
  // The mover's tick knows only of the 20 MiB.
  e.SetProcessMemoryLimit(rss - 20 * kMiB);
  e.RelieveMemory(16 * kMiB);
  CHECK(HostUsed(e) <= 32 * kMiB);
  CHECK(e.Stats().tiers[0].demotions_out >= 32);
  for (int i = 0; i < 64; ++i) {
    auto h = e.Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(kMiB, i)));
  }
  e.SetProcessMemoryLimit(0);
}

TEST_CASE("a process memory limit leaves a host tier over another memory tier alone") {
  Config c;
  c.source = "<test>";
  c.tiers.push_back(HostTierConfig("a", 256 * kMiB));
  c.tiers.push_back(HostTierConfig("b", 256 * kMiB));
  auto opened = Engine::Open(c);
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  Engine& e = **opened;
  for (int i = 0; i < 16; ++i) REQUIRE(e.Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  e.SetProcessMemoryLimit(1);  // far below any resident set
  REQUIRE(e.Flush().ok());
  // Moving bytes from one memory tier to another frees nothing.
  CHECK(e.Stats().tiers[0].demotions_out == 0);
  CHECK(HostUsed(e) == 16 * kMiB);
}

TEST_CASE("setting a limit frees the file tier's idle I/O buffers at once, and a check above it once a second") {
  TempDir dir("procmem");
  Config c = HostFileChain(dir.path(), 16 * kMiB, 1024 * kMiB);
  c.policy.promote_on_read = false;  // reads leave nothing in the host tier to demote
  auto opened = Engine::Open(c);
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  Engine& e = **opened;
  for (int i = 0; i < 64; ++i) REQUIRE(e.Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e.Flush().ok());
  auto& file = static_cast<FileTier&>(static_cast<internal::EngineCore&>(e).tier(1));
  const auto read_back = [&](int i) {  // spilled: read through a cached read buffer
    auto h = e.Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(kMiB, i)));
  };
  // A limit far above the process, and every object moved down (a check
  // asking room for nearly the whole limit), so that no demotion's slab
  // buffer is left idle below.
  constexpr uint64_t kFar = uint64_t{1} << 50;
  e.SetProcessMemoryLimit(kFar);
  CHECK_FALSE(e.RelieveMemory(kFar - 1, /*wait=*/true));
  REQUIRE(e.Flush().ok());
  REQUIRE(HostUsed(e) == 0);
  const uint64_t demoted = e.Stats().tiers[0].demotions_out;

  // Setting a limit: what is kept idle goes at once, so the resident set the
  // caller measures next is the data.
  read_back(0);
  REQUIRE(file.idle_io_buffers() > 0);
  e.SetProcessMemoryLimit(kFar);
  CHECK(file.idle_io_buffers() == 0);

  // Below the limit the buffers stay for reuse, whatever the mover's ticks.
  read_back(1);
  REQUIRE(file.idle_io_buffers() > 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // and the last release a second ago
  CHECK(file.idle_io_buffers() > 0);
  // Above it they go at the first check.
  CHECK_FALSE(e.RelieveMemory(kFar - 1, /*wait=*/false));
  CHECK(file.idle_io_buffers() == 0);
  CHECK(e.Stats().tiers[0].demotions_out == demoted);

  e.SetProcessMemoryLimit(0);
  REQUIRE(e.Flush().ok());
  for (int i = 0; i < 64; ++i) read_back(i);
}

TEST_CASE("the mover demotes a limit's excess once, not again for the freed objects still in the heap") {
#if defined(SPILLWAY_SANITIZED)
  // Under a sanitizer every one of the 128 objects was demoted.
  SPILLWAY_SKIP_TEST("a sanitizer's allocator keeps freed memory resident (its quarantine), and trimming the heap "
                     "does not return it: the resident set cannot fall by what the engine frees");
#endif
  TempDir dir("procmem");
  auto opened = Engine::Open(HostFileChain(dir.path(), 512 * kMiB, 1024 * kMiB));
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  Engine& e = **opened;
  for (int i = 0; i < 128; ++i) REQUIRE(e.Put("k" + std::to_string(i), Bytes(kMiB, i)).ok());
  REQUIRE(e.Flush().ok());
  REQUIRE(HostUsed(e) == 128 * kMiB);
  // The process starts with no idle I/O buffer and a trimmed heap (setting a
  // limit does both), 8 MiB over the limit.
  e.SetProcessMemoryLimit(uint64_t{1} << 50);
  e.SetProcessMemoryLimit(ProcessResidentBytes() - 8 * kMiB);
  // The 1 MiB objects a demotion frees stay in the C library's heap until
  // the next trim (a second after the last): counted as resident, they made
  // every 100 ms tick see the excess again and demote it again (all 128).
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  REQUIRE(e.Flush().ok());
  const uint64_t demoted = e.Stats().tiers[0].demotions_out;
  MESSAGE("demoted ", demoted, " objects of 1 MiB for an 8 MiB excess");
  CHECK(demoted >= 8);
  // The 8 MiB, and the slab buffer the demotions write through (resident
  // memory too: 10 MiB for 8 MiB of objects; a limit alone runs one batch
  // at a time), and what the test's own allocations add meanwhile.
  CHECK(demoted <= 56);
  e.SetProcessMemoryLimit(0);
  for (int i = 0; i < 128; ++i) {
    auto h = e.Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(kMiB, i)));
  }
}
