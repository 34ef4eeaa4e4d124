// DemotionPolicy: watermark arithmetic and batch sizes.
#include "engine/demotion_policy.h"

#include <algorithm>

namespace spillway::internal {
namespace {
constexpr uint64_t kFileBatchBytes = 8ull << 20;
constexpr uint64_t kMemoryBatchBytes = 32ull << 20;
}  // namespace

uint64_t DemotionPolicy::Want(const Tier& from, const BoundaryLoad& load) const {
  const uint64_t used = from.used_bytes(), cap = from.capacity_bytes();
  uint64_t target = from.AboveHigh() ? std::max(from.ExcessOverLow(), std::min(MinBatchBytes(from), used)) : 0;
  // Waiters need used + waiting <= capacity.
  if (load.waiting_bytes > 0 && used + load.waiting_bytes > cap) {
    target = std::max(target, used + load.waiting_bytes - cap);
  }
  target = std::max({target, load.requested_bytes, load.pressure_bytes});
  return target > load.inflight_bytes ? target - load.inflight_bytes : 0;
}

uint64_t DemotionPolicy::BatchBytes(const Tier& from, const Tier& to) const {
  const uint64_t batch = to.is_memory() ? kMemoryBatchBytes : kFileBatchBytes;
  return std::max<uint64_t>(1, std::min(batch, from.capacity_bytes() / 8));
}

uint64_t DemotionPolicy::MinBatchBytes(const Tier& tier) {
  return std::min<uint64_t>(64ull << 20, tier.capacity_bytes() / 4);
}

int DemotionPolicy::MaxInflight(const Tier& to) const { return to.is_memory() ? 2 : kMaxInflightPerBoundary; }

uint64_t DemotionPolicy::SyncBytes(const Tier& from, const Tier& to, uint64_t need) const {
  return std::max(need, BatchBytes(from, to));
}

}  // namespace spillway::internal
