// Blob's large host allocations: mappings of their own, 2 MiB aligned and
// marked for transparent huge pages, so filling one faults in 2 MiB at a time
// (see blob.h), and freeing one hands its memory back to the kernel at once.
//
// They used to come from posix_memalign with MADV_HUGEPAGE on the result.
// Below glibc's mmap threshold (which rises to 32 MiB as mapped blocks are
// freed) those blocks were carved from glibc's heaps, so the hint stayed on
// heap ranges after the free, and khugepaged (max_ptes_none 511 by default)
// filled them with whole huge pages that small allocations then kept
// resident. Dask benchmark, array then groupby in one cluster (2 workers x
// 600 MiB, 7.6 MiB partitions read back): a worker's RSS rose to 580-690 MiB
// at the start of the groupbys with the host tier holding 15-61 MiB, 400+
// MiB of it in 8 MiB huge-page ranges of the heaps
// (bench/results/rss-2026-12-04.md).
#include "tiers/blob.h"

#include <sys/mman.h>

#include <cstdint>

namespace spillway {

namespace {
constexpr uintptr_t kHuge = uintptr_t{2} << 20;
constexpr uint64_t kPage = 4096;
uint64_t MappedBytes(uint64_t size) { return (size + kPage - 1) & ~(kPage - 1); }
}  // namespace

std::byte* Blob::AllocateLargeHost(uint64_t size) {
  const uint64_t len = MappedBytes(size);
  // Map 2 MiB more than needed, then unmap what lies outside the aligned part.
  void* m = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t start = (base + kHuge - 1) & ~(kHuge - 1);
  if (start > base) (void)munmap(m, start - base);
  const uintptr_t end = start + len, mapped_end = base + len + kHuge;
  if (mapped_end > end) (void)munmap(reinterpret_cast<void*>(end), mapped_end - end);
  // The whole mapping, so it stays one mapping: the kernel puts huge pages
  // only on 2 MiB ranges that lie wholly inside it, and the tail past the
  // last whole 2 MiB keeps small pages. Only a hint: where THP is off
  // ("never") every page stays 4 KiB.
  (void)madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return reinterpret_cast<std::byte*>(start);
}

void Blob::FreeLargeHost(std::byte* p, uint64_t size) {
  if (p != nullptr) (void)munmap(p, MappedBytes(size));
}

}  // namespace spillway
