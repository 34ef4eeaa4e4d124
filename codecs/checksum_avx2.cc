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
#define SPILLWAY_CHECKSUM_NAME "avx2"
#include "codecs/checksum_table.inc"
#undef SPILLWAY_CHECKSUM_NAME
}  // namespace

const Impl* const kAvx2Table = &kTable;

}  // namespace spillway::checksum_internal

#else

namespace spillway::checksum_internal {
const Impl* const kAvx2Table = nullptr;
}  // namespace spillway::checksum_internal

#endif
