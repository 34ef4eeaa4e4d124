// xxh3-64 compiled for AVX2 (this file alone gets -mavx2: codecs/CMakeLists.txt),
// run only where the CPU has AVX2 (checksum.cc asks before choosing it).
//
// Nothing here but xxhash.h's own functions, inlined and file-local
// (XXH_INLINE_ALL): an inline C++ function emitted here would be compiled
// for AVX2 and could be the copy the linker keeps for the whole program,
// which would then fault on a CPU without AVX2. Keep C++ library headers out.
#include "codecs/checksum_impl.h"

#if defined(__x86_64__) && defined(__AVX2__)

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace spillway::checksum_internal {
namespace {

uint64_t Hash(const void* data, size_t size, uint64_t seed) { return XXH3_64bits_withSeed(data, size, seed); }

void* Create(uint64_t seed) {
  XXH3_state_t* s = XXH3_createState();
  if (s != nullptr) XXH3_64bits_reset_withSeed(s, seed);
  return s;
}

void Update(void* state, const void* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

uint64_t Digest(const void* state) { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state)); }

void Destroy(void* state) { XXH3_freeState(static_cast<XXH3_state_t*>(state)); }

constexpr Impl kImpl = {"avx2", Hash, Create, Update, Digest, Destroy};

}  // namespace

const Impl* const kAvx2Table = &kImpl;

}  // namespace spillway::checksum_internal

#else

namespace spillway::checksum_internal {
const Impl* const kAvx2Table = nullptr;
}  // namespace spillway::checksum_internal

#endif
