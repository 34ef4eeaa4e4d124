// The Tier conformance suite (tests/tiers/tier_conformance.h) over the gpu
// tier, in device memory. Without CUDA or without a usable device every case
// skips visibly (SKIPPED: ...), as the other GPU tests do.
#include "gpu_test_util.h"
#include "tiers/tier_conformance.h"

#ifdef SPILLWAY_HAVE_CUDA
#include "tiers/gpu_tier.h"
#endif

namespace spillway {
namespace {

testing::TierUnderTest MakeGpu(const testing::TierSpec& spec) {
  testing::TierUnderTest t;
  if (!testing::NoGpuReason().empty()) {
    t.skip = "no CUDA device: " + testing::NoGpuReason();
    return t;
  }
#ifdef SPILLWAY_HAVE_CUDA
  TierConfig c;
  c.name = "gpu0";
  c.kind = TierKind::kGpu;
  c.capacity_bytes = spec.capacity_bytes;
  c.device = 0;
  c.memory = GpuMemory::kDevice;
  auto tier = std::make_unique<GpuTier>(c, 0);
  Status st = tier->Open();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  t.tier = std::move(tier);
#else
  (void)spec;
#endif
  return t;
}

}  // namespace

SPILLWAY_TIER_CONFORMANCE("gpu", MakeGpu)

}  // namespace spillway
