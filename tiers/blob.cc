// Blob's large host allocations: mappings of their own, 2 MiB aligned and
// marked for transparent huge pages, so filling one faults in 2 MiB at a time
// (see blob.h), and freeing one hands its memory back to the kernel at once.
//
// They used to come from posix_memalign with MADV_HUGEPAGE on the result.
// Below glibc's mmap threshold (which rises to 32 MiB as mapped blocks are
// freed) those blocks were carved from glibc's heaps, so the hint stayed on
// heap ranges after the free, and khugepaged (max_ptes_none 511 by default)
// filled them with whole huge pages that small allocations then kept
// resident: hundreds of MiB of a Dask worker's RSS with little in its host
// tier (docs/performance.md#tuning-constants-file-tier).
#include "tiers/blob.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/align.h"

namespace spillway {

namespace {
constexpr uintptr_t kHuge = uintptr_t{2} << 20;
constexpr uint64_t kPage = 4096;
uint64_t MappedBytes(uint64_t size) { return AlignUp(size, kPage); }
}  // namespace

std::byte* Blob::AllocateLargeHost(uint64_t size, bool huge_pages) {
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
  if (huge_pages) (void)madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return reinterpret_cast<std::byte*>(start);
}

namespace {

// Whether a virtio balloon device offers free page reporting
// (VIRTIO_BALLOON_F_REPORTING, feature bit 5): its `features` file lists the
// negotiated bits as '0'/'1' from bit 0.
bool BalloonReportsFreePages(std::string* device) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/sys/bus/virtio/devices", ec)) {
    std::ifstream id(entry.path() / "device");
    std::string kind;
    if (!(id >> kind) || kind != "0x0005") continue;  // VIRTIO_ID_BALLOON
    std::ifstream f(entry.path() / "features");
    std::string bits;
    if (f >> bits && bits.size() > 5 && bits[5] == '1') {
      *device = entry.path().filename().string();
      return true;
    }
  }
  return false;
}

Blob::HugePagePolicy DecideHugePages() {
  Blob::HugePagePolicy p;
  const char* env = std::getenv("SPILLWAY_HUGE_PAGES");
  const std::string want = env != nullptr ? env : "";
  if (want == "always" || want == "never") {
    p.enabled = want == "always";
    p.reason = "SPILLWAY_HUGE_PAGES=" + want;
    return p;
  }
  if (!want.empty() && want != "auto") {
    p.reason = "SPILLWAY_HUGE_PAGES='" + want + "' ignored (always, never or auto); ";
  }
  std::string device;
  if (BalloonReportsFreePages(&device)) {
    p.enabled = false;
    p.reason += "virtio balloon " + device +
                " reports free pages to the hypervisor: a 2 MiB page free for 2 s costs its whole fault again";
    return p;
  }
  p.reason += "no free page reporting found";
  return p;
}

}  // namespace

const Blob::HugePagePolicy& Blob::ObjectHugePages() {
  static const HugePagePolicy policy = DecideHugePages();
  return policy;
}

void Blob::FreeLargeHost(std::byte* p, uint64_t size) {
  if (p != nullptr) (void)munmap(p, MappedBytes(size));
}

}  // namespace spillway
