// WritePipeline over a SegmentManager and an in-memory FileIo: a Store of
// small objects (one slab) and of a streamed large one publishes records that
// parse at their locations, numbered from next_sequence() unless the object
// brings its own; a Store that fails releases the slabs it wrote.
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "tiers/io/fault_file_io.h"
#include "tiers/io/mem_file_io.h"
#include "tiers/io_buffer_cache.h"
#include "tiers/record.h"
#include "tiers/record_encoder.h"
#include "tiers/segment_manager.h"
#include "tiers/write_pipeline.h"

namespace spillway {
namespace {

TierConfig Config() {
  TierConfig c;
  c.name = "pipe";
  c.kind = TierKind::kFile;
  c.capacity_bytes = 256ull << 20;
  c.paths = {"/tier"};
  c.io.segment_bytes = 64ull << 20;
  return c;
}

// The record at `loc`, parsed; its key and sequence.
RecordInfo ReadBack(FileIo& io, SegmentManager& m, const Location& loc, std::vector<std::byte>* bytes) {
  SegmentPtr seg = m.Find(loc.stripe, loc.segment);
  REQUIRE(seg != nullptr);
  const uint64_t start = loc.offset / kIoAlign * kIoAlign;
  const uint64_t end = (loc.offset + loc.length + kIoAlign - 1) / kIoAlign * kIoAlign;
  IoBuffer buf(end - start);
  REQUIRE(io.Read(seg->file, start, buf.get(), end - start).ok());
  bytes->assign(buf.get() + (loc.offset - start), buf.get() + (loc.offset - start) + loc.length);
  auto info = ParseRecord(*bytes, RecordSeed(loc.segment, loc.offset));
  REQUIRE_MESSAGE(info.ok(), info.status().ToString());
  return *info;
}

TEST_CASE("records are published where they were written, numbered from next_sequence") {
  MemFileIo io;
  const TierConfig config = Config();
  SegmentManager segments(config, &io);
  REQUIRE(segments.Open().ok());
  const RecordEncoder encoder(config.codec);
  int released = 0;
  WritePipeline pipeline(config, &io, &segments, &encoder, [&](Location&) { ++released; });
  pipeline.set_next_sequence(100);

  const std::vector<std::byte> small(3000, std::byte{1});
  const std::vector<std::byte> large((12 << 20) + 5, std::byte{2});  // over a slab: streamed
  const std::span<const std::byte> small_bufs[] = {small};
  const std::span<const std::byte> large_bufs[] = {large};
  std::vector<ObjectView> objects = {{"a", small_bufs}, {"b", small_bufs, 42}, {"big", large_bufs}};
  auto locs = pipeline.Store(objects);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(locs->size() == 3);
  CHECK(released == 0);

  std::vector<std::byte> bytes;
  RecordInfo a = ReadBack(io, segments, (*locs)[0], &bytes);
  CHECK(a.key == "a");
  RecordInfo b = ReadBack(io, segments, (*locs)[1], &bytes);
  CHECK(b.key == "b");
  CHECK(b.header.sequence == 42);  // its own
  RecordInfo big = ReadBack(io, segments, (*locs)[2], &bytes);
  CHECK(big.key == "big");
  // Numbered from next_sequence(), in whichever order the slabs are encoded.
  CHECK(std::min(a.header.sequence, big.header.sequence) == 100);
  CHECK(std::max(a.header.sequence, big.header.sequence) == 101);
  CHECK(big.header.raw_size == large.size());
  CHECK((*locs)[2].offset % kIoAlign == 0);
  CHECK(pipeline.next_sequence() == 102);
}

TEST_CASE("a Store that fails releases the slabs it wrote") {
  MemFileIo mem;
  FaultSpec spec;
  spec.schedule.push_back(FaultWindow{FaultKind::kEioWrite, 9, 9});  // one request of one slab
  FaultFileIo io(&mem, spec);
  const TierConfig config = Config();
  SegmentManager segments(config, &io);
  REQUIRE(segments.Open().ok());
  const RecordEncoder encoder(config.codec);
  std::vector<Location> released;
  std::mutex mu;
  WritePipeline pipeline(config, &io, &segments, &encoder, [&](Location& loc) {
    std::lock_guard<std::mutex> l(mu);
    released.push_back(loc);
  });
  // 16 records of just over 1 MiB: two slabs (of 9 and 7), written at once.
  const std::vector<std::byte> obj(1 << 20, std::byte{3});
  const std::span<const std::byte> bufs[] = {obj};
  std::vector<std::string> keys;
  for (int i = 0; i < 16; ++i) keys.push_back("k" + std::to_string(i));
  std::vector<ObjectView> objects;
  for (const std::string& k : keys) objects.push_back({k, bufs});
  auto locs = pipeline.Store(objects);
  REQUIRE_FALSE(locs.ok());
  CHECK(locs.status().code() == StatusCode::kIOError);
  // Only the slab that was written is released, each of its records.
  CHECK((released.size() == 9 || released.size() == 7));
  for (const Location& loc : released) CHECK(loc.length > 0);
}

}  // namespace
}  // namespace spillway
