// The xxh3-64 implementations behind Checksum64 and Checksum64Stream
// (codec.h), chosen once per process. Internal to codecs/ and its tests.
//
// Debian's libxxhash is built for baseline x86-64, so its xxh3 runs on SSE2:
// about half the speed of AVX2 on data in cache (docs/performance.md). The library's own runtime dispatch
// (xxh_x86dispatch.h) is only in its shared object, not in the static
// archive the GPU build links, so checksum_avx2.cc compiles xxhash.h's
// inline implementation with -mavx2 and Selected() uses it where the CPU
// has AVX2. xxh3 gives the same value whatever the vector width (its
// specification), and tests/codecs/checksum_test.cc checks that both agree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spillway::checksum_internal {

struct Impl {
  const char* name;
  uint64_t (*hash)(const void* data, size_t size, uint64_t seed);
  // A streaming state: made by create, freed by destroy (null: out of memory).
  void* (*create)(uint64_t seed);
  void (*update)(void* state, const void* data, size_t size);
  uint64_t (*digest)(const void* state);
  void (*destroy)(void* state);
};

// The library as Debian builds it.
const Impl& Generic();
// xxhash.h compiled for AVX2; null where the CPU or the build has no AVX2.
const Impl* Avx2();
// Avx2() where there is one, else Generic(). Fixed for the process.
const Impl& Selected();

// checksum_avx2.cc's table: null unless built for x86-64 with -mavx2. Use
// Avx2(), which also asks the CPU.
extern const Impl* const kAvx2Table;

}  // namespace spillway::checksum_internal
