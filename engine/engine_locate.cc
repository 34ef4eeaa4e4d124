// EngineCore::TierOf: which tier holds a key, for callers that report where
// their objects are (the Python Dask store's fast/slow views and
// spilled_total). One index lookup under the key's shard lock; no pin.
#include "engine/engine_core.h"

namespace spillway::internal {

int EngineCore::TierOf(std::string_view key) {
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  std::lock_guard<std::mutex> l(shard.mu);
  const Entry* e = shard.Find(key, hash);
  return e == nullptr ? -1 : e->tier;
}

}  // namespace spillway::internal
