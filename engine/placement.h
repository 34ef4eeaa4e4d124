// Placement: the one decision of which tier an object goes to, used by Put,
// by demotion (the tiers below a source) and by promotion (the memory tier a
// read moves an object up to). It decides from each tier's admission rules
// and its room now; reserving is the tier's (Tier::TryReserve) and making
// room the Mover's.
//
// Admission (Admits): the tier takes the object's memory kind, the object is
// at most the tier's max_object_size, and its reservation estimate fits the
// capacity. Room (TryReserve): the estimate fits what is free, the tier is
// not marked full after an ENOSPC, and a file tier's paths keep their
// reserved free space (min_free) after the write.
//
// The estimate is computed once per object and tier here and carried by the
// caller to Tier::Store, which settles the reservation against it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tiers/tier.h"

namespace spillway::internal {

class Placement {
 public:
  explicit Placement(std::vector<Tier*> tiers) : tiers_(std::move(tiers)) {}

  int num_tiers() const { return static_cast<int>(tiers_.size()); }
  // Whether tier t may ever hold an object of `raw` bytes estimated at
  // `estimate` bytes there (ignoring how full it is now).
  bool Admits(int t, uint64_t raw, uint64_t estimate) const;
  // Reserves `estimate` bytes in tier t if it has room now. `probe`: try a
  // tier marked full anyway (how the chain notices a disk with room again).
  bool TryReserve(int t, uint64_t estimate, bool probe = false) const;

  // Where a demotion out of tier `from` goes. Tiers below are tried in
  // order, skipping those that do not admit the object or were marked full;
  // the first admitting tier with room is reserved. When that tier is full
  // and can itself be drained (a tier below it exists), `make_room` (may be
  // null) is asked to reserve there; without it, or when it fails, the
  // result names the tier as `blocked`, and no lower tier is used: objects
  // keep the chain's order instead of jumping past a tier that is only
  // momentarily full.
  struct Choice {
    int tier = -1;          // reserved there, `estimate` bytes
    uint64_t estimate = 0;
    int blocked = -1;       // tier that needs room first (tier == -1)
    uint64_t blocked_bytes = 0;
  };
  using MakeRoomFn = std::function<bool(int tier, uint64_t bytes)>;
  Choice ReserveBelow(int from, const ObjectView& view, const MakeRoomFn& make_room) const;

  // The memory tier a read from tier `from` promotes an object of `raw`
  // bytes into: the first host-memory tier above it that admits it; -1 when
  // none does.
  int PromotionTarget(int from, uint64_t raw) const;

 private:
  std::vector<Tier*> tiers_;
};

}  // namespace spillway::internal
