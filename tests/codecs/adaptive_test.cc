// EncodeAdaptive (sample, then compress or store raw), MakeCodec's level
// defaults, Checksum64, and thread safety of shared codecs.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "codecs/codec.h"
#include "test_util.h"

namespace spillway {
namespace {

using testing::CompressibleBytes;
using testing::RandomBytes;

std::unique_ptr<Codec> Make(CodecKind kind, int level = 0) {
  CodecConfig config;
  config.kind = kind;
  config.level = level;
  return MakeCodec(config);
}

// Wraps a codec and counts the input bytes given to Encode, so a test can
// see whether EncodeAdaptive compressed the whole input or only a sample.
class CountingCodec final : public Codec {
 public:
  explicit CountingCodec(std::unique_ptr<Codec> inner) : inner_(std::move(inner)) {}
  CodecKind kind() const override { return inner_->kind(); }
  size_t MaxEncodedSize(size_t n) const override { return inner_->MaxEncodedSize(n); }
  StatusOr<size_t> Encode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    encoded_bytes += in.size();
    return inner_->Encode(in, out);
  }
  Status Decode(std::span<const std::byte> in, std::span<std::byte> out) const override {
    return inner_->Decode(in, out);
  }
  mutable std::atomic<size_t> encoded_bytes{0};

 private:
  std::unique_ptr<Codec> inner_;
};

std::vector<std::byte> OutFor(const Codec& codec, size_t n) {
  return std::vector<std::byte>(std::max(codec.MaxEncodedSize(n), n));
}

TEST_CASE("EncodeAdaptive stores random data raw after only a sample") {
  for (CodecKind kind : {CodecKind::kZstd, CodecKind::kLz4}) {
    CAPTURE(static_cast<int>(kind));
    CountingCodec codec(Make(kind));
    auto random = RandomBytes(4 << 20, 11);
    auto out = OutFor(codec, random.size());
    StatusOr<EncodeResult> r = EncodeAdaptive(codec, 0.10, random, out);
    REQUIRE(r.ok());
    CHECK(r->stored_raw);
    REQUIRE(r->size == random.size());
    CHECK(std::memcmp(out.data(), random.data(), random.size()) == 0);
    // Only the sample was compressed, not the 4 MiB.
    CHECK(codec.encoded_bytes.load() <= kSampleSlices * SampleSliceBytes(random.size()));
  }
}

TEST_CASE("EncodeAdaptive compresses text and it decodes back") {
  for (CodecKind kind : {CodecKind::kZstd, CodecKind::kLz4}) {
    for (size_t n : {size_t{1000}, size_t{300} << 10, size_t{3} << 20}) {
      CAPTURE(static_cast<int>(kind));
      CAPTURE(n);
      auto codec = Make(kind);
      auto text = CompressibleBytes(n, 12);
      auto out = OutFor(*codec, n);
      StatusOr<EncodeResult> r = EncodeAdaptive(*codec, 0.10, text, out);
      REQUIRE(r.ok());
      CHECK_FALSE(r->stored_raw);
      CHECK(r->size <= n * 9 / 10);
      std::vector<std::byte> back(n);
      REQUIRE(codec->Decode(std::span<const std::byte>(out.data(), r->size), back).ok());
      CHECK(back == text);
    }
  }
}

// Uniform bytes from an alphabet of `symbols` values: order-0 entropy
// log2(symbols) bits per byte, and no repeats a match finder could use.
std::vector<std::byte> AlphabetBytes(size_t n, unsigned symbols, uint64_t seed) {
  auto random = RandomBytes(n, seed);
  for (auto& b : random) b = std::byte(static_cast<uint8_t>(b) % symbols);
  return random;
}

TEST_CASE("EncodeAdaptive stores raw when the full encode does not save enough") {
  // Small inputs that pass the entropy screen are compressed whole: 180
  // symbols (7.5 bits per byte) pass it, but no codec saves 10% on them.
  CountingCodec codec(Make(CodecKind::kZstd, 1));
  auto spread = AlphabetBytes(100 << 10, 180, 13);
  auto out = OutFor(codec, spread.size());
  StatusOr<EncodeResult> r = EncodeAdaptive(codec, 0.10, spread, out);
  REQUIRE(r.ok());
  CHECK(r->stored_raw);
  CHECK(r->size == spread.size());
  CHECK(codec.encoded_bytes.load() == spread.size());
  // Text that shrinks, but not by 99%, is raw under min_savings 0.99.
  auto text = CompressibleBytes(100 << 10, 14);
  r = EncodeAdaptive(codec, 0.99, text, out);
  REQUIRE(r.ok());
  CHECK(r->stored_raw);
  CHECK(std::memcmp(out.data(), text.data(), text.size()) == 0);
}

TEST_CASE("the entropy screen rejects random bytes before any codec runs, and only them") {
  auto slices_of = [](const std::vector<std::byte>& v, std::span<const std::byte>* slices) {
    const size_t slice = SampleSliceBytes(v.size());
    for (size_t i = 0; i < kSampleSlices; ++i) {
      slices[i] = std::span<const std::byte>(v).subspan(SampleSliceOffset(v.size(), i), slice);
    }
  };
  for (size_t n : {size_t{4} << 10, size_t{64} << 10, size_t{1} << 20, size_t{64} << 20}) {
    CAPTURE(n);
    std::span<const std::byte> slices[kSampleSlices];
    auto random = RandomBytes(n, 21);
    slices_of(random, slices);
    const double h = SampleEntropyBits(slices);
    CHECK(h > 7.9);
    CHECK(h < 8.1);
    CHECK(LooksIncompressible(slices, 0.10));
    for (CodecKind kind : {CodecKind::kZstd, CodecKind::kLz4}) {
      CountingCodec codec(Make(kind));
      auto out = OutFor(codec, n);
      StatusOr<EncodeResult> r = EncodeAdaptive(codec, 0.10, random, out);
      REQUIRE(r.ok());
      CHECK(r->stored_raw);
      CHECK(codec.encoded_bytes.load() == 0);
      CHECK(std::memcmp(out.data(), random.data(), n) == 0);
    }
    // Compressible shapes pass the screen.
    auto text = CompressibleBytes(n, 22);
    slices_of(text, slices);
    CHECK_FALSE(LooksIncompressible(slices, 0.10));
    std::vector<std::byte> zeros(n);
    slices_of(zeros, slices);
    CHECK(SampleEntropyBits(slices) < 0.01);
    CHECK_FALSE(LooksIncompressible(slices, 0.10));
    auto half = AlphabetBytes(n, 16, 23);  // 4 bits per byte: halves under any codec
    slices_of(half, slices);
    CHECK(SampleEntropyBits(slices) == doctest::Approx(4.0).epsilon(0.02));
    CHECK_FALSE(LooksIncompressible(slices, 0.10));
  }
  // The threshold follows min_savings: 7.5 bits per byte saves about 6%.
  auto spread = AlphabetBytes(64 << 10, 180, 24);
  std::span<const std::byte> slices[kSampleSlices];
  slices_of(spread, slices);
  CHECK_FALSE(LooksIncompressible(slices, 0.10));
  CHECK(LooksIncompressible(slices, 0.50));
}

TEST_CASE("EncodeAdaptive edge cases") {
  auto zstd = Make(CodecKind::kZstd);
  std::vector<std::byte> out(64);
  StatusOr<EncodeResult> r = EncodeAdaptive(*zstd, 0.10, {}, out);
  REQUIRE(r.ok());
  CHECK(r->size == 0);
  CHECK(r->stored_raw);
  // kNone always copies.
  auto none = Make(CodecKind::kNone);
  auto text = CompressibleBytes(1000, 15);
  std::vector<std::byte> nout(1000);
  r = EncodeAdaptive(*none, 0.10, text, nout);
  REQUIRE(r.ok());
  CHECK(r->stored_raw);
  CHECK(nout == text);
  // An output buffer below max(MaxEncodedSize, n) is refused up front.
  std::vector<std::byte> small(10);
  r = EncodeAdaptive(*zstd, 0.10, text, small);
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("sample slices are spread over the input and stay inside it") {
  for (size_t n : {kSampleThreshold, size_t{1} << 20, size_t{64} << 20, size_t{1} << 30}) {
    CAPTURE(n);
    size_t slice = SampleSliceBytes(n);
    CHECK(slice >= 4096);
    CHECK(slice <= 16384);
    CHECK(SampleSliceOffset(n, 0) == 0);
    CHECK(SampleSliceOffset(n, kSampleSlices - 1) + slice <= n);
    CHECK(SampleSliceOffset(n, kSampleSlices - 1) + slice > n - n / 64);
  }
  CHECK(WorthKeeping(89, 100, 0.10));
  CHECK_FALSE(WorthKeeping(91, 100, 0.10));
  CHECK_FALSE(WorthKeeping(100, 100, 0.0));
  CHECK(WorthKeeping(99, 100, -1.0));
}

TEST_CASE("level 0 means the codec default") {
  auto text = CompressibleBytes(256 << 10, 16);
  auto encode = [&](CodecKind kind, int level) {
    auto codec = Make(kind, level);
    auto out = OutFor(*codec, text.size());
    StatusOr<size_t> n = codec->Encode(text, out);
    REQUIRE(n.ok());
    out.resize(*n);
    return out;
  };
  CHECK(encode(CodecKind::kZstd, 0) == encode(CodecKind::kZstd, 3));
  CHECK(encode(CodecKind::kZstd, 0) != encode(CodecKind::kZstd, 19));
  CHECK(encode(CodecKind::kLz4, 0) == encode(CodecKind::kLz4, 1));
  CHECK(encode(CodecKind::kLz4, 0) != encode(CodecKind::kLz4, 50));
  CHECK(Make(static_cast<CodecKind>(99))->kind() == CodecKind::kNone);
}

TEST_CASE("Checksum64 is xxh3-64") {
  // Reference values of XXH3_64bits_withSeed from the xxHash sources.
  CHECK(Checksum64("", 0) == 0x2D06800538D394C2ull);
  const char abc[] = "abc";
  CHECK(Checksum64(abc, 3) != Checksum64(abc, 3, 1));
  CHECK(Checksum64(abc, 3) != Checksum64(abc, 2));
  auto data = RandomBytes(10000, 17);
  uint64_t h = Checksum64(data.data(), data.size());
  for (size_t step : {size_t{1}, size_t{7}, size_t{1000}, size_t{4096}}) {
    Checksum64Stream stream;
    for (size_t off = 0; off < data.size(); off += step) {
      stream.Update(data.data() + off, std::min(step, data.size() - off));
    }
    CHECK(stream.Digest() == h);
  }
  Checksum64Stream seeded(5);
  seeded.Update(abc, 3);
  CHECK(seeded.Digest() == Checksum64(abc, 3, 5));
  data[5000] ^= std::byte{1};
  CHECK(Checksum64(data.data(), data.size()) != h);
}

TEST_CASE("one codec object is safe to share between threads") {
  for (CodecKind kind : {CodecKind::kZstd, CodecKind::kLz4}) {
    auto codec = Make(kind);
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20; ++i) {
          auto text = CompressibleBytes(50000 + 1000 * t + i, 100 * t + i);
          auto out = OutFor(*codec, text.size());
          StatusOr<size_t> n = codec->Encode(text, out);
          std::vector<std::byte> back(text.size());
          if (!n.ok() || !codec->Decode({out.data(), *n}, back).ok() || back != text) ++failures;
        }
      });
    }
    for (auto& th : threads) th.join();
    CHECK(failures.load() == 0);
  }
}

}  // namespace
}  // namespace spillway
