// EngineCore::CheckDevices: every object in a gpu tier lives on its tier's
// device (one Dask worker per GPU, each engine on its own device).
// The index is walked shard by shard under each shard's lock, taking a
// reference to each gpu-tier blob; the pointer queries run after the lock is
// dropped, so the check never holds up Put or Get for a CUDA call.
#include "engine/engine_core.h"
#ifdef SPILLWAY_HAVE_CUDA
#include "tiers/gpu_tier.h"
#endif

namespace spillway::internal {

StatusOr<DeviceCheck> EngineCore::CheckDevices() {
#ifdef SPILLWAY_HAVE_CUDA
  DeviceCheck out;
  std::vector<int> slot(tiers_.size(), -1);  // tier index -> out.tiers index
  for (size_t t = 0; t < tiers_.size(); ++t) {
    if (tiers_[t]->kind() != TierKind::kGpu) continue;
    const auto& gpu = static_cast<const GpuTier&>(*tiers_[t]);
    const cuda::DeviceIdentity& id = gpu.device_identity();
    slot[t] = static_cast<int>(out.tiers.size());
    out.tiers.push_back(DeviceCheck::TierDevice{gpu.name(), gpu.device(), id.uuid, id.pci_bus_id, 0, 0});
  }
  if (out.tiers.empty()) return Status::NotSupported("the engine has no gpu tier");
  struct Item {
    int tier;
    std::string key;
    Location loc;
  };
  for (size_t s = 0; s < ObjectIndex::kShards; ++s) {
    std::vector<Item> items;
    {
      auto& shard = index_.shard(s);
      std::lock_guard<std::mutex> l(shard.mu);
      shard.ForEach([&](Entry* e) {
        if (e->erased || e->tier < 0 || slot[e->tier] < 0 || !e->loc.has_blob()) return;
        items.push_back(Item{e->tier, std::string(e->key()), e->loc.Get(e->raw_size)});
      });
    }
    for (const Item& it : items) {
      DeviceCheck::TierDevice& td = out.tiers[slot[it.tier]];
      ++td.objects;
      Status st = static_cast<const GpuTier&>(*tiers_[it.tier]).CheckObjectDevice(it.loc);
      if (st.ok()) continue;
      ++td.misplaced;
      if (out.first_problem.empty()) out.first_problem = "key '" + it.key + "': " + st.ToString();
    }
  }
  return out;
#else
  return Status::NotSupported("built without CUDA: the engine has no gpu tier");
#endif
}

}  // namespace spillway::internal
