// base/pattern.h: the byte pattern the demo, the stress tool and the crash
// tests write and verify. Its definition (byte p of an object is byte p % 8
// of PatternWord(seed, p / 8)) is what stays fixed; the word-at-a-time
// FillPattern and CheckPattern are checked against it byte by byte here.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "base/pattern.h"

using spillway::CheckPattern;
using spillway::FillPattern;
using spillway::PatternWord;

namespace {

std::byte ReferenceByte(uint64_t seed, uint64_t p) {
  const uint64_t w = PatternWord(seed, p / 8);
  return reinterpret_cast<const std::byte*>(&w)[p % 8];
}

}  // namespace

TEST_CASE("pattern: FillPattern writes the defined byte at every offset and length") {
  std::mt19937_64 rng(12345);
  for (int round = 0; round < 400; ++round) {
    const uint64_t seed = rng();
    const uint64_t offset = round < 200 ? round % 17 : rng() % (1u << 20);
    const size_t len = round % 3 == 0 ? rng() % 5000 : rng() % 40;
    std::vector<std::byte> out(len + 16, std::byte{0xAB});
    FillPattern(seed, offset, std::span<std::byte>(out.data() + 8, len));
    for (size_t i = 0; i < len; ++i) {
      REQUIRE(out[8 + i] == ReferenceByte(seed, offset + i));
    }
    // Nothing outside the span is written.
    for (size_t i = 0; i < 8; ++i) {
      REQUIRE(out[i] == std::byte{0xAB});
      REQUIRE(out[8 + len + i] == std::byte{0xAB});
    }
  }
}

TEST_CASE("pattern: buffers filled piece by piece continue one stream") {
  const uint64_t seed = 0x5eed;
  std::vector<std::byte> whole(1000), pieces(1000);
  FillPattern(seed, 3, whole);
  size_t at = 0;
  for (size_t len : {1u, 7u, 8u, 9u, 100u, 875u}) {
    FillPattern(seed, 3 + at, std::span<std::byte>(pieces.data() + at, len));
    at += len;
  }
  REQUIRE(at == pieces.size());
  CHECK(whole == pieces);
}

TEST_CASE("pattern: CheckPattern accepts the pattern and finds one changed byte anywhere") {
  for (uint64_t offset : {0u, 1u, 5u, 8u, 64u, 4099u}) {
    for (size_t len : {0u, 1u, 7u, 8u, 13u, 64u, 517u, 600u}) {
      std::vector<std::byte> b(len);
      FillPattern(99 + offset, offset, b);
      REQUIRE(CheckPattern(99 + offset, offset, b));
      if (len > 0) {
        CHECK_FALSE(CheckPattern(100 + offset, offset, b));  // another seed
      }
      for (size_t i = 0; i < len; ++i) {
        b[i] ^= std::byte{0x10};
        REQUIRE_FALSE(CheckPattern(99 + offset, offset, b));
        b[i] ^= std::byte{0x10};
      }
      REQUIRE(CheckPattern(99 + offset, offset, b));
    }
  }
}
