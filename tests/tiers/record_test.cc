// The on-disk record (tiers/record.h, docs/format.md): round trips over every
// codec and object shape, chunked and not; every single-byte flip and every
// truncation is Corruption; header fields past the limits are rejected before
// anything is allocated; erased records stay valid; a scanner resynchronizes
// after a corrupt record; the fuzzer's seed corpus holds valid records.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiers/record.h"

namespace spillway {
namespace {

using testing::CompressibleBytes;
using testing::RandomBytes;

struct Object {
  std::string key;
  std::vector<std::vector<std::byte>> buffers;
  std::vector<std::span<const std::byte>> spans;

  ObjectView view() {
    spans.assign(buffers.begin(), buffers.end());
    return ObjectView{key, spans};
  }
  std::vector<std::byte> concat() const {
    std::vector<std::byte> all;
    for (const auto& b : buffers) all.insert(all.end(), b.begin(), b.end());
    return all;
  }
};

CodecConfig Config(CodecKind kind, int level = 0, uint64_t chunk_bytes = 1 << 20) {
  CodecConfig c;
  c.kind = kind;
  c.level = level;
  c.chunk_bytes = chunk_bytes;
  return c;
}

std::vector<std::byte> Encode(Object& obj, const CodecConfig& config, uint64_t seq = 7) {
  auto codec = MakeCodec(config);
  ObjectView v = obj.view();
  std::vector<std::byte> out(MaxRecordSize(v.key.size(), v.buffers.size(), v.raw_size(), *codec, config));
  StatusOr<size_t> n = EncodeRecord(v, seq, *codec, config, out);
  REQUIRE(n.ok());
  CHECK(*n % kRecordAlign == 0);
  out.resize(*n);
  return out;
}

// Parses, decodes and compares with the object; returns the header.
RecordHeader CheckRoundTrip(Object& obj, const std::vector<std::byte>& rec, uint64_t seq = 7) {
  StatusOr<RecordInfo> info = ParseRecord(rec);
  REQUIRE(info.ok());
  CHECK(info->record_size == rec.size());
  CHECK(info->key == obj.key);
  CHECK(info->header.sequence == seq);
  REQUIRE(info->buffer_sizes.size() == obj.buffers.size());
  for (size_t i = 0; i < obj.buffers.size(); ++i) CHECK(info->buffer_sizes[i] == obj.buffers[i].size());
  std::vector<std::byte> out(info->header.raw_size);
  Status s = DecodeRecordPayload(*info, rec, out);
  REQUIRE(s.ok());
  CHECK(out == obj.concat());
  return info->header;
}

std::vector<Object> Objects() {
  std::vector<Object> objs;
  objs.push_back({"empty-no-buffers", {}, {}});
  objs.push_back({"empty-zero-buffers", {{}, {}, {}}, {}});
  objs.push_back({"", {CompressibleBytes(100, 1)}, {}});
  objs.push_back({"mixed", {CompressibleBytes(3, 2), {}, CompressibleBytes(5000, 3), {}}, {}});
  // Chunks of 1 MiB crossing buffer boundaries (gathered) and inside one.
  objs.push_back({"chunked", {CompressibleBytes(300000, 4), {}, CompressibleBytes(2700000, 5),
                              RandomBytes(1500000, 6)}, {}});
  objs.push_back({"random", {RandomBytes(3 << 20, 7)}, {}});
  // >= kParallelChunks chunks: the parallel encoder and decoder.
  objs.push_back({"large", {CompressibleBytes(5 << 20, 8), CompressibleBytes(7 << 20, 9)}, {}});
  return objs;
}

TEST_CASE("records round-trip for every codec and object shape") {
  const CodecConfig configs[] = {Config(CodecKind::kNone), Config(CodecKind::kZstd, 1),
                                 Config(CodecKind::kZstd, 3), Config(CodecKind::kLz4, 1)};
  std::vector<Object> objs = Objects();
  for (const CodecConfig& config : configs) {
    for (Object& obj : objs) {
      CAPTURE(static_cast<int>(config.kind));
      CAPTURE(config.level);
      CAPTURE(obj.key);
      std::vector<std::byte> rec = Encode(obj, config);
      RecordHeader h = CheckRoundTrip(obj, rec);
      CHECK(h.codec == static_cast<uint8_t>(config.kind));
      const uint64_t raw = obj.view().raw_size();
      CHECK((h.flags & kFlagEngineSequence) != 0);  // every new record
      const uint8_t flags = h.flags & ~kFlagEngineSequence;
      if (config.kind == CodecKind::kNone) {
        CHECK(flags == 0);
        CHECK(h.stored_size == raw);
      } else if (raw == 0 || obj.key == "random") {
        CHECK(flags == kFlagStoredRaw);
        CHECK(h.stored_size == raw);
      } else if (raw > (1 << 20)) {
        CHECK(flags == kFlagChunked);
        CHECK(h.num_chunks == (raw + (1 << 20) - 1) >> 20);
        CHECK(h.stored_size < raw);
      }
      CHECK(h.stored_size <= raw);
    }
  }
}

TEST_CASE("chunked records mark chunks that did not shrink as raw") {
  Object obj{"mix", {CompressibleBytes(40000, 10), RandomBytes(40000, 11)}, {}};
  std::vector<std::byte> rec = Encode(obj, Config(CodecKind::kZstd, 1, 4096));
  CheckRoundTrip(obj, rec);
  StatusOr<RecordInfo> info = ParseRecord(rec);
  REQUIRE(info.ok());
  REQUIRE(info->header.num_chunks == 20);
  CHECK(info->header.chunk_bytes == 4096);
  size_t raw_chunks = 0;
  for (uint32_t e : info->chunk_sizes) raw_chunks += (e & kChunkStoredRawBit) != 0;
  CHECK(raw_chunks >= 9);  // the random half
  CHECK(raw_chunks <= 11);
}

TEST_CASE("parallel chunk encoding is deterministic") {
  Object obj{"det", {CompressibleBytes(9 << 20, 12), CompressibleBytes(123457, 13)}, {}};
  for (CodecKind kind : {CodecKind::kZstd, CodecKind::kLz4}) {
    CHECK(Encode(obj, Config(kind)) == Encode(obj, Config(kind)));
  }
}

TEST_CASE("chunk size from config is clamped") {
  CHECK(RecordChunkBytes(Config(CodecKind::kZstd, 0, 0)) == kDefaultChunkBytes);
  CHECK(RecordChunkBytes(Config(CodecKind::kZstd, 0, 1)) == kMinChunkBytes);
  CHECK(RecordChunkBytes(Config(CodecKind::kZstd, 0, 1ull << 40)) == kMaxChunkBytes);
}

TEST_CASE("every single-byte flip is Corruption") {
  Object plain{"key", {CompressibleBytes(37, 14), {}, CompressibleBytes(20, 15)}, {}};
  Object chunked{"ck", {CompressibleBytes(9000, 16), RandomBytes(4100, 17)}, {}};
  std::vector<std::vector<std::byte>> recs = {
      Encode(plain, Config(CodecKind::kNone)), Encode(plain, Config(CodecKind::kZstd)),
      Encode(plain, Config(CodecKind::kLz4)), Encode(chunked, Config(CodecKind::kZstd, 1, 4096))};
  for (const auto& rec : recs) {
    REQUIRE(ParseRecord(rec).ok());
    for (size_t i = 0; i < rec.size(); ++i) {
      for (uint8_t mask : {0x01, 0x80, 0xff}) {
        std::vector<std::byte> bad = rec;
        bad[i] ^= std::byte{mask};
        StatusOr<RecordInfo> info = ParseRecord(bad);
        CAPTURE(i);
        CHECK(info.status().IsCorruption());
      }
    }
  }
}

TEST_CASE("truncated records are Corruption") {
  Object obj{"trunc", {CompressibleBytes(3000, 18)}, {}};
  for (CodecKind kind : {CodecKind::kNone, CodecKind::kZstd}) {
    std::vector<std::byte> rec = Encode(obj, Config(kind));
    for (size_t n = 0; n < rec.size(); ++n) {
      CAPTURE(n);
      StatusOr<RecordInfo> info = ParseRecord(std::span<const std::byte>(rec.data(), n));
      CHECK(info.status().IsCorruption());
    }
    // The header alone is enough for ParseRecordHeader, which sizes the rest.
    StatusOr<RecordHeader> h = ParseRecordHeader(std::span<const std::byte>(rec.data(), 64));
    REQUIRE(h.ok());
    CHECK(RecordSize(*h) == rec.size());
  }
}

// Rewrites a u32/u64 header field and re-seals the header checksum, so only
// the validation of that field can reject the record.
template <typename T>
std::vector<std::byte> WithField(std::vector<std::byte> rec, size_t off, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) rec[off + i] = std::byte(uint8_t(uint64_t(value) >> (8 * i)));
  uint64_t sum = Checksum64(rec.data(), 56);
  for (size_t i = 0; i < 8; ++i) rec[56 + i] = std::byte(uint8_t(sum >> (8 * i)));
  return rec;
}

TEST_CASE("header fields beyond the limits are rejected before allocating") {
  Object obj{"limits", {CompressibleBytes(9000, 19)}, {}};
  std::vector<std::byte> rec = Encode(obj, Config(CodecKind::kZstd, 1, 4096));
  std::vector<std::byte> none = Encode(obj, Config(CodecKind::kNone));
  REQUIRE(ParseRecord(WithField<uint64_t>(rec, 40, 99)).ok());  // the resealing itself is fine
  struct Bad {
    const char* what;
    std::vector<std::byte> rec;
  };
  // Values that would ask for terabytes if anything trusted them.
  const Bad bads[] = {
      {"magic", WithField<uint32_t>(rec, 0, 0x12345678)},
      {"version", WithField<uint16_t>(rec, 4, kRecordVersion + 1)},
      {"old version", WithField<uint16_t>(rec, 4, 1)},
      {"codec", WithField<uint8_t>(rec, 6, 3)},
      {"flags", WithField<uint8_t>(rec, 7, 16)},
      {"flags high", WithField<uint8_t>(rec, 7, 0x80)},
      {"both flags", WithField<uint8_t>(rec, 7, 3)},
      {"flags on none", WithField<uint8_t>(none, 7, 1)},
      {"key_len", WithField<uint32_t>(rec, 8, kMaxKeyLen + 1)},
      {"num_buffers", WithField<uint32_t>(rec, 12, kMaxBuffers + 1)},
      {"raw_size", WithField<uint64_t>(rec, 16, kMaxObjectBytes + 1)},
      {"raw_size huge", WithField<uint64_t>(rec, 16, ~0ull)},
      {"stored_size", WithField<uint64_t>(rec, 24, 9001)},
      {"stored_size on none", WithField<uint64_t>(none, 24, 8000)},
      {"chunk_bytes small", WithField<uint32_t>(rec, 32, 1)},
      {"chunk_bytes big", WithField<uint32_t>(rec, 32, 0x80000000u)},
      {"num_chunks", WithField<uint32_t>(rec, 36, 0xffffffffu)},
      {"chunk fields on none", WithField<uint32_t>(none, 36, 1)},
  };
  for (const Bad& b : bads) {
    CAPTURE(b.what);
    StatusOr<RecordHeader> h = ParseRecordHeader(b.rec);
    CHECK(h.status().IsCorruption());
    CHECK(ParseRecord(b.rec).status().IsCorruption());
  }
  CHECK(ParseRecord(WithField<uint32_t>(rec, 0, 0)).status().message() == "bad record magic");
  std::vector<std::byte> flipped = rec;
  flipped[20] ^= std::byte{1};
  CHECK(ParseRecord(flipped).status().message() == "record header checksum mismatch");
  flipped = rec;
  flipped[70] ^= std::byte{1};
  CHECK(ParseRecord(flipped).status().message() == "record payload checksum mismatch");
  // A header that is valid but claims 1 TiB in a 64-byte input: "truncated",
  // never an allocation of the claimed size.
  std::vector<std::byte> huge = WithField<uint64_t>(none, 16, kMaxObjectBytes);
  huge = WithField<uint64_t>(huge, 24, kMaxObjectBytes);
  REQUIRE(ParseRecordHeader(huge).ok());
  StatusOr<RecordInfo> info = ParseRecord(std::span<const std::byte>(huge.data(), 64));
  CHECK(info.status().IsCorruption());
  CHECK(info.status().message().find("truncated") != std::string::npos);
}

TEST_CASE("an erased record stays valid and says so") {
  Object obj{"gone", {CompressibleBytes(9000, 24)}, {}};
  for (const CodecConfig& config : {Config(CodecKind::kNone), Config(CodecKind::kZstd),
                                    Config(CodecKind::kLz4, 1, 4096)}) {
    std::vector<std::byte> rec = Encode(obj, config);
    const uint8_t flags = ParseRecord(rec)->header.flags;
    MarkRecordErased(rec.data());
    StatusOr<RecordHeader> h = ParseRecordHeader(rec);
    REQUIRE(h.ok());
    CHECK(h->flags == (flags | kFlagErased));
    CHECK(RecordSize(*h) == rec.size());
    RecordHeader after = CheckRoundTrip(obj, rec);
    CHECK((after.flags & kFlagErased) != 0);
    // Only the header changed: clearing the flag without resealing is caught.
    rec[7] = std::byte{flags};
    CHECK(ParseRecord(rec).status().IsCorruption());
  }
}

TEST_CASE("EncodeRecord refuses bad arguments") {
  Object obj{"args", {CompressibleBytes(1000, 20)}, {}};
  CodecConfig config = Config(CodecKind::kZstd);
  auto codec = MakeCodec(config);
  std::vector<std::byte> small(100);
  CHECK(EncodeRecord(obj.view(), 1, *codec, config, small).status().code() ==
        StatusCode::kInvalidArgument);
  Object long_key{std::string(kMaxKeyLen + 1, 'k'), {}, {}};
  std::vector<std::byte> out(200000);
  CHECK(EncodeRecord(long_key.view(), 1, *codec, config, out).status().code() ==
        StatusCode::kInvalidArgument);
}

TEST_CASE("a scanner resynchronizes after a corrupt record") {
  // docs/format.md: records start at kRecordAlign-aligned offsets; after a
  // record that fails to parse, try the next aligned offset.
  std::vector<Object> objs = {{"a", {CompressibleBytes(500, 21)}, {}},
                              {"b", {RandomBytes(300, 22)}, {}},
                              {"c", {CompressibleBytes(700, 23)}, {}}};
  std::vector<std::byte> segment;
  for (Object& o : objs) {
    auto rec = Encode(o, Config(CodecKind::kLz4));
    segment.insert(segment.end(), rec.begin(), rec.end());
  }
  const size_t first = ParseRecord(segment)->record_size;
  segment[first + 80] ^= std::byte{0x10};  // corrupt the payload of "b"
  std::vector<std::string> found;
  for (size_t off = 0; off + kRecordHeaderSize <= segment.size();) {
    StatusOr<RecordInfo> info = ParseRecord(std::span<const std::byte>(segment).subspan(off));
    if (!info.ok()) {
      off += kRecordAlign;
      continue;
    }
    found.emplace_back(info->key);
    off += info->record_size;
  }
  CHECK(found == std::vector<std::string>{"a", "c"});
}

TEST_CASE("a run of incompressible objects is stored raw without sampling, until a probe finds compressible data") {
  const CodecConfig config = Config(CodecKind::kZstd, 1);
  auto codec = MakeCodec(config);
  auto encode = [&](const std::vector<std::byte>& value) {
    std::span<const std::byte> parts[1] = {value};
    ObjectView v{"k", parts};
    std::vector<std::byte> out(MaxRecordSize(1, 1, value.size(), *codec, config));
    StatusOr<size_t> n = EncodeRecord(v, 1, *codec, config, out);
    REQUIRE(n.ok());
    out.resize(*n);
    StatusOr<RecordInfo> info = ParseRecord(out);
    REQUIRE(info.ok());
    std::vector<std::byte> back(value.size());
    REQUIRE(DecodeRecordPayload(*info, out, back).ok());
    CHECK(back == value);
    return (info->header.flags & kFlagStoredRaw) != 0;
  };
  for (int i = 0; i < 8; ++i) CHECK(encode(RandomBytes(64 << 10, 900 + i)));
  // The run is long enough: compressible objects may now be stored raw, but
  // a probe within 8 objects notices them and ends the run.
  int raw_before_probe = 0;
  while (encode(CompressibleBytes(64 << 10, 950 + raw_before_probe))) {
    ++raw_before_probe;
    REQUIRE(raw_before_probe < 8);
  }
  CHECK(raw_before_probe > 0);
  CHECK_FALSE(encode(CompressibleBytes(64 << 10, 990)));  // the run is over
  // Another codec object has its own (empty) run.
  for (int i = 0; i < 8; ++i) CHECK(encode(RandomBytes(64 << 10, 1000 + i)));
  auto fresh = MakeCodec(config);
  auto text = CompressibleBytes(64 << 10, 1010);
  std::span<const std::byte> parts[1] = {text};
  std::vector<std::byte> out(MaxRecordSize(1, 1, text.size(), *fresh, config));
  StatusOr<size_t> n = EncodeRecord(ObjectView{"k", parts}, 1, *fresh, config, out);
  REQUIRE(n.ok());
  CHECK((ParseRecord(std::span<const std::byte>(out.data(), *n))->header.flags & kFlagStoredRaw) == 0);
}

TEST_CASE("a record is valid only at the position its header was sealed for") {
  Object obj{"pos", {CompressibleBytes(3000, 41)}, {}};
  std::vector<std::byte> rec = Encode(obj, Config(CodecKind::kZstd, 1));
  REQUIRE(ParseRecord(rec).ok());  // seed 0: no position
  const uint64_t here = RecordSeed(7, 4096);
  ResealRecordHeader(rec.data(), here);
  CHECK(ParseRecord(rec, here).ok());
  CHECK(ParseRecordHeader(rec, here).ok());
  // Anywhere else, including the same offset of another segment or the
  // neighbouring 8-byte slot, the header does not validate.
  for (uint64_t other : {uint64_t{0}, RecordSeed(7, 4104), RecordSeed(7, 4088), RecordSeed(8, 4096),
                         RecordSeed(6, 4096), RecordSeed(0, 0)}) {
    CAPTURE(other);
    StatusOr<RecordInfo> info = ParseRecord(rec, other);
    CHECK(info.status().message() == "record header checksum mismatch");
  }
  // Seeds of nearby positions are all distinct.
  std::set<uint64_t> seeds;
  for (uint32_t seg = 0; seg < 64; ++seg) {
    for (uint64_t off = 0; off < 64 * 1024; off += kRecordAlign) seeds.insert(RecordSeed(seg, off));
  }
  CHECK(seeds.size() == 64u * 8192u);
  // An erase mark keeps the position seal.
  MarkRecordErased(rec.data(), here);
  StatusOr<RecordHeader> h = ParseRecordHeader(rec, here);
  REQUIRE(h.ok());
  CHECK((h->flags & kFlagErased) != 0);
  CHECK_FALSE(ParseRecordHeader(rec).ok());
}

// The fuzzer's seed corpus: small valid records of each codec and shape.
std::vector<std::pair<std::string, std::vector<std::byte>>> SeedRecords() {
  std::vector<std::pair<std::string, std::vector<std::byte>>> seeds;
  auto add = [&](const std::string& name, Object obj, const CodecConfig& config) {
    seeds.emplace_back(name, Encode(obj, config, seeds.size()));
  };
  add("none-empty", {"", {}, {}}, Config(CodecKind::kNone));
  add("none-multi", {"k1", {CompressibleBytes(40, 30), {}, RandomBytes(20, 31)}, {}},
      Config(CodecKind::kNone));
  add("zstd-text", {"zt", {CompressibleBytes(3000, 32)}, {}}, Config(CodecKind::kZstd, 3));
  add("zstd-raw", {"zr", {RandomBytes(1000, 33)}, {}}, Config(CodecKind::kZstd, 1));
  add("lz4-text", {"lt", {CompressibleBytes(2000, 34), CompressibleBytes(900, 35)}, {}},
      Config(CodecKind::kLz4));
  add("zstd-chunked", {"zc", {CompressibleBytes(20000, 36)}, {}}, Config(CodecKind::kZstd, 1, 4096));
  add("lz4-chunked-mixed", {"lc", {CompressibleBytes(9000, 37), RandomBytes(5000, 38)}, {}},
      Config(CodecKind::kLz4, 1, 4096));
  add("zstd-erased", {"ze", {CompressibleBytes(1500, 39)}, {}}, Config(CodecKind::kZstd, 1));
  MarkRecordErased(seeds.back().second.data());
  return seeds;
}

TEST_CASE("the fuzzer's seed corpus holds valid records") {
  const std::filesystem::path dir =
      std::filesystem::path(SPILLWAY_SOURCE_DIR) / "tests/fuzz/corpus/record";
  if (std::getenv("SPILLWAY_WRITE_CORPUS")) {  // regenerate: SPILLWAY_WRITE_CORPUS=1
    std::filesystem::create_directories(dir);
    for (const auto& [name, rec] : SeedRecords()) {
      std::ofstream f(dir / name, std::ios::binary);
      f.write(reinterpret_cast<const char*>(rec.data()), rec.size());
    }
  }
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    CAPTURE(entry.path().string());
    std::ifstream f(entry.path(), std::ios::binary);
    std::vector<char> chars((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::byte> rec(chars.size());
    if (!chars.empty()) std::memcpy(rec.data(), chars.data(), chars.size());
    StatusOr<RecordInfo> info = ParseRecord(rec);
    REQUIRE(info.ok());
    std::vector<std::byte> out(info->header.raw_size);
    CHECK(DecodeRecordPayload(*info, rec, out).ok());
    ++files;
  }
  CHECK(files >= SeedRecords().size());
}

}  // namespace
}  // namespace spillway
