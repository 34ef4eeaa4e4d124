// SegmentManager alone, over an in-memory FileIo: space reserved in the active
// segment, sealing a full one and deleting it once its records are freed, an
// abandoned write giving its records back, and a persistent tier's frees
// held until CommitFrees (its record still recoverable before, not after).
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "base/align.h"
#include "codecs/codec.h"
#include "tiers/io/mem_file_io.h"
#include "tiers/io_buffer_cache.h"
#include "tiers/record.h"
#include "tiers/segment_manager.h"

namespace spillway {
namespace {

TierConfig Config(bool persistent) {
  TierConfig c;
  c.name = "seg";
  c.kind = TierKind::kFile;
  c.capacity_bytes = 64ull << 20;
  c.paths = {"/tier"};
  c.persistent = persistent;
  c.io.segment_bytes = 1ull << 20;
  return c;
}

// Reserves `len` bytes for one record and publishes it (no bytes written:
// the manager never looks at them on a scratch tier).
Location Place(SegmentManager& m, uint64_t len) {
  auto stripe = m.PickStripe(len);
  REQUIRE(stripe.ok());
  SegmentPtr seg;
  uint64_t offset = 0;
  REQUIRE(m.Reserve(*stripe, len, 1, &seg, &offset).ok());
  Location loc;
  m.Publish(*stripe, *seg, offset, len, &loc);
  CHECK(m.Find(loc.stripe, loc.segment) == seg);
  return loc;
}

TEST_CASE("records are appended to the active segment and a full one is sealed") {
  MemFileIo io;
  const TierConfig config = Config(false);
  SegmentManager m(config, &io);
  REQUIRE(m.Open().ok());
  const Location a = Place(m, 256 << 10);
  const Location b = Place(m, 256 << 10);
  CHECK(a.segment == b.segment);
  CHECK(a.offset == 0);
  CHECK(b.offset == a.length);
  CHECK(m.segment_count() == 1);
  // Past segment_bytes: a new segment; the first is sealed and goes once
  // its records are freed.
  const Location c = Place(m, 768 << 10);
  CHECK(c.segment != a.segment);
  CHECK(m.segment_count() == 2);
  m.Free(a);
  CHECK(m.Find(a.stripe, a.segment) != nullptr);
  m.Free(b);
  CHECK(m.Find(a.stripe, a.segment) == nullptr);
  CHECK(m.segment_count() == 1);
  CHECK(m.Where(c).find("seg-") != std::string::npos);
  REQUIRE(m.SyncData().ok());
}

TEST_CASE("an abandoned write gives its records back") {
  MemFileIo io;
  const TierConfig config = Config(false);
  SegmentManager m(config, &io);
  REQUIRE(m.Open().ok());
  SegmentPtr seg;
  uint64_t offset = 0;
  REQUIRE(m.Reserve(0, 900 << 10, 3, &seg, &offset).ok());
  CHECK(seg->live_records.load() == 3);
  Status st = m.AbandonWrite(0, seg, offset, 900 << 10, 3, Status::IOError("disk"));
  CHECK(st.code() == StatusCode::kIOError);
  CHECK(st.message().find("disk") != std::string::npos);
  CHECK(seg->live_records.load() == 0);
}

// Writes one real record into a persistent tier and frees it; commits the
// free when `commit`. Returns how many records a recovery then finds.
int FreeThenRecover(bool commit) {
  MemFileIo io;
  const TierConfig config = Config(true);
  {
    SegmentManager m(config, &io);
    REQUIRE(m.Open().ok());
    const std::string key = "k";
    const std::vector<std::byte> payload(5000, std::byte{7});
    const std::span<const std::byte> bufs[] = {payload};
    const ObjectView v{key, bufs};
    const CodecConfig codec;
    const auto none = MakeCodec(codec);
    const uint64_t len = AlignUp(MaxRecordSize(1, 1, payload.size(), *none, codec), kIoAlign);
    SegmentPtr seg;
    uint64_t offset = 0;
    REQUIRE(m.Reserve(0, len, 1, &seg, &offset).ok());
    IoBuffer buf(len);
    std::memset(buf.get(), 0, len);
    auto n = EncodeRecord(v, 1, *none, codec, std::span<std::byte>(buf.get(), len), RecordSeed(seg->id, offset));
    REQUIRE(n.ok());
    REQUIRE(io.Write(seg->file, offset, buf.get(), len).ok());
    seg->dirty.store(true);
    Location loc;
    m.Publish(0, *seg, offset, *n, &loc);
    REQUIRE(m.SyncData().ok());

    m.Free(loc);
    CHECK(m.pending_free_bytes() == loc.length);
    CHECK(m.Find(loc.stripe, loc.segment) != nullptr);
    if (commit) {
      m.PrepareFrees();
      bool wrote = false;
      uint64_t failed = 0;
      REQUIRE(m.CommitFrees(&wrote, &failed).ok());
      CHECK(wrote);
      CHECK(failed == 0);
      CHECK(m.pending_free_bytes() == 0);
      REQUIRE(m.SyncData().ok());
    }
  }
  SegmentManager again(config, &io);
  REQUIRE(again.Open().ok());
  int found = 0;
  uint64_t skipped = 0, missing = 0;
  std::string report;
  REQUIRE(again.Recover([&](RecoveredObject&& o) { found += o.key == "k"; }, &skipped, &report, &missing).ok());
  CHECK(skipped == 0);
  CHECK(missing == 0);
  return found;
}

TEST_CASE("a persistent tier's frees wait for CommitFrees") {
  CHECK(FreeThenRecover(/*commit=*/false) == 1);  // freed, not committed: still on disk
  CHECK(FreeThenRecover(/*commit=*/true) == 0);   // the commit wrote the erase mark
}

}  // namespace
}  // namespace spillway
