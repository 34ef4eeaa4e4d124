// RawRecordStream (tiers/record.h): a record produced piece by piece is byte
// for byte the record EncodeRecord makes with codec none, whatever the piece
// sizes and the object's shape (several buffers, empty ones, long keys).
#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiers/record.h"

namespace spillway {
namespace {

using testing::RandomBytes;

std::vector<std::byte> EncodeWhole(const ObjectView& v, uint64_t seq, uint64_t seed) {
  CodecConfig cc;
  cc.kind = CodecKind::kNone;
  auto codec = MakeCodec(cc);
  std::vector<std::byte> out(MaxRecordSize(v.key.size(), v.buffers.size(), v.raw_size(), *codec, cc));
  auto n = EncodeRecord(v, seq, *codec, cc, out, seed);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

// Streams `v` in pieces of the sizes `next_piece` returns, then seals it.
template <typename PieceFn>
std::vector<std::byte> EncodeStreamed(const ObjectView& v, uint64_t seq, uint64_t seed, PieceFn next_piece) {
  RawRecordStream rec;
  REQUIRE(rec.Start(v, seq).ok());
  std::vector<std::byte> out(rec.size(), std::byte{0xee});
  while (rec.produced() < rec.size()) {
    const uint64_t at = rec.produced();
    const uint64_t n = std::min<uint64_t>(next_piece(), rec.size() - at);
    rec.Next(std::span<std::byte>(out.data() + at, n));
    REQUIRE(rec.produced() == at + n);
  }
  rec.FinishHeader(out.data(), seed);
  return out;
}

TEST_CASE("a streamed raw record equals EncodeRecord's, for any piece sizes") {
  std::mt19937_64 rng(11);
  const std::vector<std::vector<size_t>> shapes = {
      {0}, {1}, {4096}, {3 << 20}, {100, 0, 5000, 0}, {0, 0}, {1 << 20, 1, (1 << 20) + 7}, {13, 17, 19, 23}};
  for (const auto& shape : shapes) {
    for (size_t key_len : {size_t{0}, size_t{5}, size_t{4000}}) {
      std::vector<std::vector<std::byte>> bufs;
      std::vector<std::span<const std::byte>> spans;
      for (size_t i = 0; i < shape.size(); ++i) bufs.push_back(RandomBytes(shape[i], 100 + i));
      spans.assign(bufs.begin(), bufs.end());
      const std::string key(key_len, 'k');
      const ObjectView v{key, spans};
      const uint64_t seed = RecordSeed(3, 8192);
      const auto whole = EncodeWhole(v, 42, seed);
      CAPTURE(shape.size());
      CAPTURE(key_len);
      for (uint64_t piece : {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{4096}, uint64_t{1} << 20, uint64_t{1} << 30}) {
        CAPTURE(piece);
        CHECK(EncodeStreamed(v, 42, seed, [&] { return piece; }) == whole);
      }
      CHECK(EncodeStreamed(v, 42, seed, [&] { return 1 + rng() % 9000; }) == whole);
      auto parsed = ParseRecord(whole, seed);
      REQUIRE(parsed.ok());
      CHECK(parsed->key == key);
    }
  }
}

TEST_CASE("RawRecordStream refuses what EncodeRecord refuses") {
  const std::string key(kMaxKeyLen + 1, 'k');
  RawRecordStream rec;
  CHECK(rec.Start(ObjectView{key, {}}, 1).code() == StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace spillway
