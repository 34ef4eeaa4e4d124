// Placement: admission rules and the order tiers are tried in.
#include "engine/placement.h"

namespace spillway::internal {

bool Placement::Admits(int t, uint64_t raw, uint64_t estimate) const {
  const Tier& tier = *tiers_[t];
  const uint64_t max_object = tier.config().max_object_bytes;
  if (max_object != 0 && raw > max_object) return false;
  return estimate <= tier.capacity_bytes();
}

bool Placement::TryReserve(int t, uint64_t estimate, bool probe) const {
  Tier& tier = *tiers_[t];
  // The reserved free space is checked first: a reservation that would eat
  // into it is never taken, so it needs no undoing.
  if (!tier.HasDeviceRoom(estimate)) return false;
  return tier.TryReserve(estimate, probe);
}

Placement::Choice Placement::ReserveBelow(int from, const ObjectView& view, const MakeRoomFn& make_room) const {
  Choice c;
  const uint64_t raw = view.raw_size();
  for (int d = from + 1; d < num_tiers(); ++d) {
    Tier& tier = *tiers_[d];
    if (!tier.Accepts(MemoryKind::kHost)) continue;  // a demotion carries host bytes
    const uint64_t est = tier.ReserveEstimate(view);
    if (!Admits(d, raw, est)) continue;
    if (TryReserve(d, est)) {
      c.tier = d;
      c.estimate = est;
      return c;
    }
    // Full disk (ENOSPC mark, reserved free space reached): pass it on.
    if (tier.marked_full() || !tier.HasDeviceRoom(est)) continue;
    if (d + 1 >= num_tiers()) continue;  // nothing can drain it
    if (make_room && make_room(d, est)) {
      c.tier = d;
      c.estimate = est;
      return c;
    }
    c.blocked = d;
    c.blocked_bytes = est;
    return c;
  }
  return c;
}

int Placement::PromotionTarget(int from, uint64_t raw) const {
  for (int h = 0; h < from; ++h) {
    const Tier& tier = *tiers_[h];
    if (!tier.is_memory() || !tier.Accepts(MemoryKind::kHost) || tier.kind() == TierKind::kGpu) continue;
    if (Admits(h, raw, raw)) return h;  // else a later host tier may take it
  }
  return -1;
}

}  // namespace spillway::internal
