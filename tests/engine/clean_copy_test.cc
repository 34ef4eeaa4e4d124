// Clean copies: an object promoted from a scratch file tier keeps its record
// there, so demoting it again re-points the entry and writes nothing; the
// copy goes with the entry (erase, overwrite) and is never read stale.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/engine_test_util.h"

namespace spillway {
namespace {

using testing::Bytes;
using testing::HandleEquals;
using testing::HostFileChain;
using testing::MustOpen;
using testing::TempDir;

constexpr uint64_t kObj = 64 << 10;

// 64 objects of 64 KiB (4 MiB) through a 1 MiB host tier: most go to disk.
std::vector<std::vector<std::byte>> Fill(Engine& e, int n = 64) {
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < n; ++i) {
    data.push_back(Bytes(kObj, i));
    REQUIRE(e.Put("k" + std::to_string(i), data.back()).ok());
  }
  REQUIRE(e.Flush().ok());
  return data;
}

// Gets every object once, in key order, checking its bytes.
void ReadInOrder(Engine& e, const std::vector<std::vector<std::byte>>& data) {
  for (size_t i = 0; i < data.size(); ++i) {
    auto h = e.Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, data[i]));
  }
}

TEST_CASE("clean copies: reading a spilled set back through a full host tier writes nothing") {
  TempDir dir("clean");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  auto data = Fill(*e);
  const EngineStats before = e->Stats();
  REQUIRE(before.tiers[1].objects > 40);
  // Two passes: every read promotes, and the promoted objects are demoted
  // again to make room for the next ones.
  for (int pass = 0; pass < 2; ++pass) {
    ReadInOrder(*e, data);
    REQUIRE(e->Flush().ok());
  }
  const EngineStats after = e->Stats();
  CHECK(after.tiers[0].promotions_in > before.tiers[0].promotions_in + 40);
  // demotions_out counts moves that wrote; these went back to their copies.
  CHECK(after.clean_demotions >= 40);
  // Nothing promoted was written a second time: only what the reads
  // demoted for the first time (objects that had never left the host tier).
  const uint64_t rewritten = after.tiers[1].raw_bytes_written - before.tiers[1].raw_bytes_written;
  CHECK(rewritten <= 20 * kObj);
  CHECK(after.objects == 64);  // an object with a clean copy counts once
}

TEST_CASE("clean copies: a scan read back through a full host tier leaves what it has not read yet in memory") {
  TempDir dir("clean");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  auto data = Fill(*e);
  const EngineStats before = e->Stats();
  const uint64_t in_host = before.tiers[0].objects;
  REQUIRE(in_host >= 4);  // the newest objects, never written below
  // One pass in key order, as a consumer reads a spilled set back: each read
  // promotes, and the room for the next comes from the promoted objects
  // already read (clean copies: dropping them writes nothing), not from the
  // newest objects, which would be written now and read back from disk later.
  ReadInOrder(*e, data);
  REQUIRE(e->Flush().ok());
  const EngineStats after = e->Stats();
  CHECK(after.tiers[1].raw_bytes_written == before.tiers[1].raw_bytes_written);
  // The objects that were in the host tier were read there.
  CHECK(after.tiers[1].hits - before.tiers[1].hits <= 64 - in_host);
}

TEST_CASE("clean copies: erase and overwrite free them, the new value is read, never the copy") {
  TempDir dir("clean");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  auto data = Fill(*e);
  // Promote k0..k7 (each keeps its record as a clean copy).
  for (int i = 0; i < 8; ++i) REQUIRE(e->Get("k" + std::to_string(i)).ok());
  CHECK(e->Stats().clean_copies > 0);
  // Overwrite k0 with new bytes and erase k1; then push everything down.
  const auto fresh = Bytes(kObj, 999);
  REQUIRE(e->Put("k0", fresh).ok());
  REQUIRE(e->Erase("k1").ok());
  for (int i = 64; i < 96; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(kObj, i)).ok());
  REQUIRE(e->Flush().ok());
  auto h0 = e->Get("k0");
  REQUIRE(h0.ok());
  CHECK(HandleEquals(*h0, fresh));
  h0->Release();
  CHECK_FALSE(e->Get("k1").ok());
  for (int i = 2; i < 8; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, data[i]));
  }
  // Erasing everything leaves no record behind: the copies went with their entries.
  for (int i = 0; i < 96; ++i) (void)e->Erase("k" + std::to_string(i));
  REQUIRE(e->Flush().ok());
  const EngineStats s = e->Stats();
  CHECK(s.clean_copies == 0);
  CHECK(s.tiers[1].objects == 0);
  CHECK(s.tiers[1].used_bytes == 0);
  CHECK(s.tiers[0].used_bytes == 0);
}

TEST_CASE("clean copies: none is kept when the file tier is above its high watermark") {
  TempDir dir("clean");
  const uint64_t file_cap = (7 << 20) / 2;  // 3.5 MiB for about 3.2 MiB of spilled objects
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, file_cap));
  Fill(*e);
  const EngineStats full = e->Stats();
  INFO("file tier used " << full.tiers[1].used_bytes << " of " << file_cap);
  REQUIRE(full.tiers[1].used_bytes * 10 > file_cap * 9);  // the premise: above high (0.9)
  // k0 was among the first to spill; its promotion leaves no copy behind.
  REQUIRE(testing::ServingTier(*e, "k0") == 1);
  CHECK(e->Stats().tiers[0].promotions_in == full.tiers[0].promotions_in + 1);
  CHECK(e->Stats().clean_copies == 0);
}

}  // namespace
}  // namespace spillway
