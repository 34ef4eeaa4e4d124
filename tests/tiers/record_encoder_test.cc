// RecordEncoder: the same records as EncodeRecord with the codec and config
// it was built from, over every codec, a chunked object and one that does not
// shrink; its records parse and decode back to the object.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "test_util.h"
#include "tiers/record_encoder.h"

namespace spillway {
namespace {

std::vector<std::byte> EncodeWith(const RecordEncoder& enc, const ObjectView& v, uint64_t seq) {
  std::vector<std::byte> out(enc.MaxSize(v));
  StatusOr<size_t> n = enc.Encode(v, seq, out, RecordSeed(3, 4096));
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

TEST_CASE("RecordEncoder encodes as EncodeRecord with its settings") {
  const std::vector<std::byte> compressible = testing::CompressibleBytes(3 << 20, 1);
  const std::vector<std::byte> random = testing::RandomBytes(256 << 10, 2);
  for (CodecKind kind : {CodecKind::kNone, CodecKind::kZstd, CodecKind::kLz4}) {
    for (const std::vector<std::byte>* data : {&compressible, &random}) {
      CodecConfig config;
      config.kind = kind;
      config.chunk_bytes = 1 << 20;
      config.min_savings = 0.2;
      const RecordEncoder enc(config);
      CHECK(enc.kind() == kind);
      const std::span<const std::byte> buffers[] = {*data};
      const ObjectView v{"key", buffers};
      const auto codec = MakeCodec(config);
      CHECK(enc.MaxSize(v) == MaxRecordSize(3, 1, data->size(), *codec, config));

      const std::vector<std::byte> rec = EncodeWith(enc, v, 9);
      std::vector<std::byte> expected(MaxRecordSize(3, 1, data->size(), *codec, config));
      StatusOr<size_t> n = EncodeRecord(v, 9, *codec, config, expected, RecordSeed(3, 4096));
      REQUIRE(n.ok());
      expected.resize(*n);
      CHECK(rec == expected);

      StatusOr<RecordInfo> info = ParseRecord(rec, RecordSeed(3, 4096));
      REQUIRE(info.ok());
      CHECK(info->key == "key");
      CHECK(info->header.sequence == 9);
      if (kind != CodecKind::kNone && data == &compressible) CHECK((info->header.flags & kFlagChunked) != 0);
      if (kind != CodecKind::kNone && data == &random) CHECK((info->header.flags & kFlagStoredRaw) != 0);
      std::vector<std::byte> back(data->size());
      REQUIRE(DecodeRecordPayload(*info, rec, back).ok());
      CHECK(back == *data);
    }
  }
}

}  // namespace
}  // namespace spillway
