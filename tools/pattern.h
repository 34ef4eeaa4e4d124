// Deterministic object contents for the stress test, demo and benchmarks: the
// bytes of an object are a function of a 64-bit seed, so a reference model
// only stores the seed and size, never the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace spillway::cli {

inline uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Fills `out` with the pattern of `seed` starting at byte `offset` of the
// object (so several buffers of one object continue one stream).
inline void FillPattern(uint64_t seed, uint64_t offset, std::span<std::byte> out) {
  size_t i = 0;
  while (i < out.size()) {
    const uint64_t word_index = (offset + i) / 8;
    uint64_t x = seed ^ (word_index * 0xD6E8FEB86659FD93ull);
    const uint64_t w = SplitMix64(x);
    const size_t in_word = (offset + i) % 8;
    const size_t n = std::min<size_t>(8 - in_word, out.size() - i);
    std::memcpy(out.data() + i, reinterpret_cast<const std::byte*>(&w) + in_word, n);
    i += n;
  }
}

// True when `data` equals the pattern of `seed` at `offset`.
inline bool CheckPattern(uint64_t seed, uint64_t offset, std::span<const std::byte> data) {
  std::byte tmp[4096];
  for (size_t i = 0; i < data.size(); i += sizeof(tmp)) {
    const size_t n = std::min(sizeof(tmp), data.size() - i);
    FillPattern(seed, offset + i, std::span<std::byte>(tmp, n));
    if (std::memcmp(tmp, data.data() + i, n) != 0) return false;
  }
  return true;
}

}  // namespace spillway::cli
