// The codec conformance suite: every codec and level must round-trip every
// data set byte for byte, and must turn truncated, garbled or mis-sized input
// into Corruption (never a crash, never bytes outside `out`).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "test_util.h"

namespace spillway {
namespace {

using testing::CompressibleBytes;
using testing::RandomBytes;

struct CodecCase {
  const char* name;
  CodecKind kind;
  int level;
};

const CodecCase kCodecs[] = {
    {"none", CodecKind::kNone, 0}, {"zstd-1", CodecKind::kZstd, 1},
    {"zstd-3", CodecKind::kZstd, 3}, {"zstd-19", CodecKind::kZstd, 19},
    {"lz4-1", CodecKind::kLz4, 1},   {"lz4-8", CodecKind::kLz4, 8},
};

std::unique_ptr<Codec> Make(const CodecCase& c) {
  CodecConfig config;
  config.kind = c.kind;
  config.level = c.level;
  return MakeCodec(config);
}

struct DataSet {
  const char* name;
  std::vector<std::byte> bytes;
};

std::vector<DataSet> DataSets() {
  std::vector<DataSet> sets;
  sets.push_back({"empty", {}});
  sets.push_back({"one byte", {std::byte{0x5a}}});
  sets.push_back({"random 1 MiB", RandomBytes(1 << 20, 1)});
  sets.push_back({"compressible 5 MiB", CompressibleBytes(5 << 20, 2)});
  sets.push_back({"zeros 1 MiB", std::vector<std::byte>(1 << 20)});
  return sets;
}

std::vector<std::byte> EncodeAll(const Codec& codec, std::span<const std::byte> in) {
  std::vector<std::byte> out(codec.MaxEncodedSize(in.size()));
  StatusOr<size_t> n = codec.Encode(in, out);
  REQUIRE(n.ok());
  REQUIRE(*n <= out.size());
  out.resize(*n);
  return out;
}

TEST_CASE("every codec round-trips every data set") {
  const std::vector<DataSet> sets = DataSets();
  for (const CodecCase& c : kCodecs) {
    auto codec = Make(c);
    CHECK(codec->kind() == c.kind);
    for (const DataSet& d : sets) {
      CAPTURE(c.name);
      CAPTURE(d.name);
      std::vector<std::byte> enc = EncodeAll(*codec, d.bytes);
      // Guard bytes after `out` catch a decoder writing past the end.
      std::vector<std::byte> dec(d.bytes.size() + 16, std::byte{0xee});
      Status s = codec->Decode(enc, std::span<std::byte>(dec.data(), d.bytes.size()));
      REQUIRE(s.ok());
      CHECK(std::equal(d.bytes.begin(), d.bytes.end(), dec.begin()));
      CHECK(std::all_of(dec.end() - 16, dec.end(), [](std::byte b) { return b == std::byte{0xee}; }));
      if (c.kind != CodecKind::kNone && std::string(d.name) == "zeros 1 MiB") {
        CHECK(enc.size() < d.bytes.size() / 50);
      }
    }
  }
}

TEST_CASE("stronger zstd levels compress text at least as well") {
  auto text = CompressibleBytes(1 << 20, 3);
  size_t z1 = EncodeAll(*Make(kCodecs[1]), text).size();
  size_t z19 = EncodeAll(*Make(kCodecs[3]), text).size();
  CHECK(z19 <= z1);
  CHECK(z1 < text.size() / 2);
}

TEST_CASE("decode of a truncated frame is Corruption") {
  auto text = CompressibleBytes(64 << 10, 4);
  for (const CodecCase& c : kCodecs) {
    CAPTURE(c.name);
    auto codec = Make(c);
    std::vector<std::byte> enc = EncodeAll(*codec, text);
    std::vector<std::byte> out(text.size());
    for (size_t cut : {size_t{0}, size_t{1}, enc.size() / 2, enc.size() - 1}) {
      CAPTURE(cut);
      Status s = codec->Decode(std::span<const std::byte>(enc.data(), cut), out);
      CHECK(s.IsCorruption());
    }
  }
}

TEST_CASE("decode into the wrong size is Corruption") {
  auto text = CompressibleBytes(64 << 10, 5);
  for (const CodecCase& c : kCodecs) {
    CAPTURE(c.name);
    auto codec = Make(c);
    std::vector<std::byte> enc = EncodeAll(*codec, text);
    std::vector<std::byte> bigger(text.size() + 1), smaller(text.size() - 1);
    CHECK(codec->Decode(enc, bigger).IsCorruption());
    CHECK(codec->Decode(enc, smaller).IsCorruption());
  }
}

TEST_CASE("decode of garbage is Corruption") {
  for (const CodecCase& c : kCodecs) {
    if (c.kind == CodecKind::kNone) continue;  // any bytes are a valid "none" payload
    CAPTURE(c.name);
    auto codec = Make(c);
    for (uint64_t seed = 0; seed < 50; ++seed) {
      CAPTURE(seed);
      auto garbage = RandomBytes(1 + seed * 37, 100 + seed);
      std::vector<std::byte> out(4096);
      CHECK(codec->Decode(garbage, out).IsCorruption());
    }
  }
}

TEST_CASE("decode of bit-flipped frames never crashes or overruns") {
  // A flip may still decode (lz4 has no checksum of its own; the record's
  // xxh3 catches it), but it must end in OK or Corruption within bounds.
  auto text = CompressibleBytes(16 << 10, 6);
  for (const CodecCase& c : kCodecs) {
    CAPTURE(c.name);
    auto codec = Make(c);
    std::vector<std::byte> enc = EncodeAll(*codec, text);
    std::vector<std::byte> out(text.size() + 8);
    int rejected = 0;
    for (size_t i = 0; i < enc.size(); i += std::max<size_t>(1, enc.size() / 300)) {
      std::vector<std::byte> bad = enc;
      bad[i] ^= std::byte{0x41};
      std::fill(out.end() - 8, out.end(), std::byte{0xee});
      Status s = codec->Decode(bad, std::span<std::byte>(out.data(), text.size()));
      CHECK((s.ok() || s.IsCorruption()));
      CHECK(std::all_of(out.end() - 8, out.end(), [](std::byte b) { return b == std::byte{0xee}; }));
      rejected += !s.ok();
    }
    if (c.kind == CodecKind::kZstd) CHECK(rejected > 0);
  }
}

TEST_CASE("encode into a too small buffer fails cleanly") {
  auto random = RandomBytes(64 << 10, 7);
  for (const CodecCase& c : kCodecs) {
    CAPTURE(c.name);
    auto codec = Make(c);
    std::vector<std::byte> out(1000);
    StatusOr<size_t> n = codec->Encode(random, out);
    CHECK_FALSE(n.ok());
  }
}

}  // namespace
}  // namespace spillway
