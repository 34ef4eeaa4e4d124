// Blob's large host allocations: 2 MiB aligned, and every whole 2 MiB of
// them marked for transparent huge pages, so filling one faults in 2 MiB at
// a time (see blob.h). The tail past the last whole 2 MiB keeps small
// pages: the object's bytes, not a rounded-up size, are what it costs.
#include "tiers/blob.h"

#include <sys/mman.h>

#include <cstdlib>

namespace spillway {

std::byte* Blob::AllocateLargeHost(uint64_t size) {
  constexpr size_t kHuge = 2u << 20;
  void* p = nullptr;
  if (posix_memalign(&p, kHuge, (size + 63) & ~uint64_t{63}) != 0) return nullptr;
  // Only a hint: where THP is off ("never") the pages stay 4 KiB.
  (void)madvise(p, size & ~uint64_t{kHuge - 1}, MADV_HUGEPAGE);
  return static_cast<std::byte*>(p);
}

}  // namespace spillway
