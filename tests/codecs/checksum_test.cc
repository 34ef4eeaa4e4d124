// xxh3-64 behind Checksum64: every implementation the build has gives the
// same values, one-shot and streamed in pieces, and the AVX2 one is chosen
// where the CPU has AVX2 (codecs/checksum_impl.h).
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codecs/checksum_impl.h"
#include "codecs/codec.h"
#include "test_util.h"

namespace spillway {
namespace {

using checksum_internal::Impl;

// Lengths around xxh3's internal boundaries (16, 128, 240 bytes, 64-byte
// stripes, 1 KiB blocks, the 256-byte streaming buffer) and long inputs.
const size_t kSizes[] = {0,   1,   3,    4,    8,    9,    16,   17,   128,   129,    240,     241,
                         255, 256, 257,  511,  1023, 1024, 1025, 4096, 65536, 100003, 1 << 20, (1 << 20) + 4093};
const uint64_t kSeeds[] = {0, 1, 0x9E3779B185EBCA87ull};

std::vector<std::byte> Bytes(size_t n, uint32_t seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

uint64_t Streamed(const Impl& impl, const std::vector<std::byte>& data, uint64_t seed, std::mt19937* rng) {
  void* s = impl.create(seed);
  REQUIRE(s != nullptr);
  size_t off = 0;
  while (off < data.size()) {
    // Pieces from 1 byte to a little over 4 KiB, so updates start and end
    // inside and across the implementation's buffers.
    const size_t n = std::min<size_t>(data.size() - off, 1 + (*rng)() % 4200);
    impl.update(s, data.data() + off, n);
    off += n;
  }
  const uint64_t h = impl.digest(s);
  impl.destroy(s);
  return h;
}

std::vector<const Impl*> Impls() {
  std::vector<const Impl*> v = {&checksum_internal::Generic()};
  if (checksum_internal::Avx2() != nullptr) v.push_back(checksum_internal::Avx2());
  return v;
}

TEST_CASE("xxh3-64 of the empty input is the specification's value") {
  // XXH3_64bits(""), seed 0: the xxHash reference value.
  for (const Impl* impl : Impls()) {
    CAPTURE(impl->name);
    CHECK(impl->hash(nullptr, 0, 0) == 0x2D06800538D394C2ull);
  }
  CHECK(Checksum64(nullptr, 0) == 0x2D06800538D394C2ull);
}

TEST_CASE("every implementation gives the generic library's value, one-shot and streamed") {
  const Impl& generic = checksum_internal::Generic();
  std::mt19937 rng(11);
  for (size_t size : kSizes) {
    const std::vector<std::byte> data = Bytes(size, static_cast<uint32_t>(size));
    for (uint64_t seed : kSeeds) {
      CAPTURE(size);
      CAPTURE(seed);
      const uint64_t want = generic.hash(data.data(), data.size(), seed);
      for (const Impl* impl : Impls()) {
        CAPTURE(impl->name);
        CHECK(impl->hash(data.data(), data.size(), seed) == want);
        CHECK(Streamed(*impl, data, seed, &rng) == want);
      }
      // The public entry points, through whichever implementation was chosen.
      CHECK(Checksum64(data.data(), data.size(), seed) == want);
      Checksum64Stream stream(seed);
      stream.Update(data.data(), data.size() / 3);
      stream.Update(data.data() + data.size() / 3, data.size() - data.size() / 3);
      CHECK(stream.Digest() == want);
    }
  }
}

TEST_CASE("a changed byte changes the checksum in every implementation") {
  std::vector<std::byte> data = Bytes(70000, 3);
  for (const Impl* impl : Impls()) {
    CAPTURE(impl->name);
    const uint64_t before = impl->hash(data.data(), data.size(), 0);
    for (size_t at : {size_t{0}, size_t{4095}, size_t{69999}}) {
      data[at] ^= std::byte{1};
      CHECK(impl->hash(data.data(), data.size(), 0) != before);
      data[at] ^= std::byte{1};
    }
  }
}

TEST_CASE("the AVX2 build of xxh3 is chosen where the CPU has AVX2") {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("avx2")) SPILLWAY_SKIP_TEST("this CPU has no AVX2");
  REQUIRE(checksum_internal::Avx2() != nullptr);
  CHECK(std::string(checksum_internal::Selected().name) == "avx2");
  CHECK(std::string(Checksum64Implementation()) == "avx2");
#else
  SPILLWAY_SKIP_TEST("not an x86-64 build");
#endif
}

}  // namespace
}  // namespace spillway
