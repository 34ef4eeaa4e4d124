// Deterministic object contents for the stress test, the demo, the benchmarks
// and the tests: the bytes of an object are a function of a 64-bit seed, so a
// reference model only stores the seed and size, never the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace spillway {

inline uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Byte p of an object's pattern is byte p % 8 (in memory order) of the word
// PatternWord(seed, p / 8).
inline uint64_t PatternWord(uint64_t seed, uint64_t word_index) {
  uint64_t x = seed ^ (word_index * 0xD6E8FEB86659FD93ull);
  return SplitMix64(x);
}

// Fills `out` with the pattern of `seed` starting at byte `offset` of the
// object (so several buffers of one object continue one stream). Whole
// words are stored directly; only a partial word at either end goes byte by
// byte. The demo fills and checks every byte of what it writes and reads on
// the caller's thread, so this runs at memory speed rather than at a byte
// loop's (a profile of `spillway demo` had the old byte-loop fill and check at
// 36% of the process's samples).
inline void FillPattern(uint64_t seed, uint64_t offset, std::span<std::byte> out) {
  std::byte* p = out.data();
  size_t n = out.size();
  uint64_t pos = offset;
  auto partial = [&](size_t count) {  // the bytes [pos % 8, pos % 8 + count) of pos's word
    const uint64_t w = PatternWord(seed, pos / 8);
    std::memcpy(p, reinterpret_cast<const std::byte*>(&w) + pos % 8, count);
    p += count, pos += count, n -= count;
  };
  if (pos % 8 != 0 && n > 0) partial(std::min<size_t>(8 - pos % 8, n));
  for (uint64_t word = pos / 8; n >= 8; ++word, p += 8, pos += 8, n -= 8) {
    const uint64_t w = PatternWord(seed, word);
    std::memcpy(p, &w, 8);
  }
  if (n > 0) partial(n);
}

// True when `data` holds the pattern of `seed` from byte `offset` on.
inline bool CheckPattern(uint64_t seed, uint64_t offset, std::span<const std::byte> data) {
  const std::byte* p = data.data();
  size_t n = data.size();
  uint64_t pos = offset;
  auto partial = [&](size_t count) {  // count < 8: a partial word at either end
    std::byte want[8];
    FillPattern(seed, pos, std::span<std::byte>(want, count));
    const bool same = std::memcmp(p, want, count) == 0;
    p += count, pos += count, n -= count;
    return same;
  };
  if (pos % 8 != 0 && n > 0 && !partial(std::min<size_t>(8 - pos % 8, n))) return false;
  // Words compared in blocks, the branch taken once per block: the words of
  // a block are independent, so their hashes overlap in the pipeline.
  constexpr size_t kBlock = 64;
  uint64_t word = pos / 8;
  while (n >= 8) {
    const size_t words = std::min<size_t>(kBlock, n / 8);
    uint64_t diff = 0;
    for (size_t k = 0; k < words; ++k) {
      uint64_t got;
      std::memcpy(&got, p + 8 * k, 8);
      diff |= got ^ PatternWord(seed, word + k);
    }
    if (diff != 0) return false;
    word += words, p += 8 * words, pos += 8 * words, n -= 8 * words;
  }
  return n == 0 || partial(n);
}

}  // namespace spillway
