// EngineCore::TierOf and ListKeys: where objects are, for callers that report
// it (the Python Dask store's fast/slow views and spilled_total, tools and
// tests). Index lookups under the shard locks; no pin.
#include "engine/engine_core.h"

namespace spillway::internal {

int EngineCore::TierOf(std::string_view key) {
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  std::lock_guard<std::mutex> l(shard.mu);
  const Entry* e = shard.Find(key, hash);
  return e == nullptr ? -1 : e->tier;
}

std::vector<KeyInfo> EngineCore::ListKeys() {
  std::vector<KeyInfo> out;
  for (size_t s = 0; s < ObjectIndex::kShards; ++s) {
    auto& shard = index_.shard(s);
    std::lock_guard<std::mutex> l(shard.mu);
    out.reserve(out.size() + shard.size());
    shard.ForEach([&](const Entry* e) {
      if (e->erased) return;
      out.push_back(KeyInfo{std::string(e->key()), e->tier, e->raw_size});
    });
  }
  return out;
}

}  // namespace spillway::internal
