// DemotionPolicy: watermark arithmetic and batch sizes.
#include "engine/demotion_policy.h"

#include <algorithm>

namespace spillway::internal {
namespace {
constexpr uint64_t kFileBatchBytes = 8ull << 20;
constexpr uint64_t kMemoryBatchBytes = 32ull << 20;
}  // namespace

uint64_t DemotionPolicy::Want(const Tier& from, const Tier& to, const BoundaryLoad& load) const {
  const uint64_t projected = from.used_bytes() + load.waiting_bytes;
  const uint64_t low = from.LowBytes();
  uint64_t target = 0;
  if (projected > from.HighBytes()) {
    target = std::max(projected - low, std::min(MinBatchBytes(from), from.used_bytes()));
  }
  if (load.waiting_bytes > 0) {
    const uint64_t queue_full = static_cast<uint64_t>(MaxInflight(to)) * BatchBytes(from, to);
    target = std::max(target, std::min(queue_full, std::max(load.waiting_bytes, WaitingBatchBytes(from))));
  }
  target = std::max({target, load.requested_bytes, load.pressure_bytes});
  if (load.sustained) {
    // Whole batches only: a completion or a Put that finds a few KiB above
    // the floor starts nothing (no batch of one small object).
    const uint64_t resident = projected - std::min(projected, load.inflight_bytes);
    const uint64_t floor = SustainedFloorBytes(from);
    const uint64_t batch = BatchBytes(from, to);
    if (resident > floor) target = std::max(target, load.inflight_bytes + (resident - floor) / batch * batch);
  }
  return target > load.inflight_bytes ? target - load.inflight_bytes : 0;
}

uint64_t DemotionPolicy::BatchBytes(const Tier& from, const Tier& to) const {
  const uint64_t batch = to.is_memory() ? kMemoryBatchBytes : kFileBatchBytes;
  return std::max<uint64_t>(1, std::min(batch, from.capacity_bytes() / 8));
}

uint64_t DemotionPolicy::MinBatchBytes(const Tier& tier) {
  return std::min<uint64_t>(64ull << 20, tier.capacity_bytes() / 4);
}

uint64_t DemotionPolicy::WaitingBatchBytes(const Tier& tier) {
  return std::min<uint64_t>(64ull << 20, tier.capacity_bytes() / 2);
}

uint64_t DemotionPolicy::SustainedFloorBytes(const Tier& tier) {
  const uint64_t low = tier.LowBytes();
  return low - std::min(low, WaitingBatchBytes(tier));
}

uint64_t DemotionPolicy::NudgeAbove(const Tier& from, const Tier& to, const BoundaryLoad& load) const {
  if (!load.sustained) return UINT64_MAX;
  return load.inflight_bytes + SustainedFloorBytes(from) + BatchBytes(from, to);
}

int DemotionPolicy::MaxInflight(const Tier& to) const { return to.is_memory() ? 2 : kMaxInflightPerBoundary; }

int DemotionPolicy::MaxInflight(const Tier& from, const Tier& to, const BoundaryLoad& load) const {
  const bool only_pressure =
      load.waiting_bytes == 0 && load.requested_bytes == 0 && !load.sustained && !from.AboveHigh();
  return only_pressure ? 1 : MaxInflight(to);
}

uint64_t DemotionPolicy::SyncBytes(const Tier& from, const Tier& to, uint64_t need) const {
  return std::max(need, BatchBytes(from, to));
}

}  // namespace spillway::internal
