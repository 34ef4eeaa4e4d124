// EngineCore::PutExternal / GetExternal: live objects of the caller held in a
// host tier without bytes (the Python module's Dask values, docs/python.md).
//
// The object rides on a Blob of no buffers and `accounted_bytes` of size
// (ExternalSlot, engine/external_slot.h), adopted by a host tier like
// PutHostAllocation's memory, so pins, the eviction policy, erase and
// replacement need nothing new. The Demoter materializes it when the mover
// picks it (demoter.cc, Mover::RunBatch: on the materializer thread) and
// commits the bytes below as a new entry of the same version.
#include "engine/engine_core.h"
#include "engine/external_slot.h"
#include "engine/mover.h"

namespace spillway::internal {

Status EngineCore::PutExternal(std::string_view key, uint64_t accounted_bytes,
                               std::shared_ptr<ExternalObject> object) {
  if (key.size() > kMaxKeyLen) {
    return Status::InvalidArgument("key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                                   std::to_string(kMaxKeyLen));
  }
  if (!object) return Status::InvalidArgument("PutExternal of a null object");
  auto slot = std::make_shared<ExternalSlot>();
  slot->object = std::move(object);
  // No bytes behind the pointer: nothing reads a blob of zero buffers, and
  // its size is what the tier accounts.
  BlobPtr blob = std::make_shared<Blob>(nullptr, accounted_bytes, std::vector<uint64_t>{}, MemoryKind::kHost);
  blob->SetAttachment(std::move(slot));
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Tier& tier = *tiers_[t];
    if (tier.kind() != TierKind::kHost || accounted_bytes > tier.capacity_bytes()) continue;
    if (!mover_->MakeRoom(static_cast<int>(t), accounted_bytes)) continue;
    auto loc = tier.Adopt(blob, accounted_bytes);
    if (!loc.ok()) {
      tier.Unreserve(accounted_bytes);
      continue;
    }
    puts_.fetch_add(1, std::memory_order_relaxed);
    Insert(key, accounted_bytes, static_cast<int>(t), std::move(*loc),
           next_sequence_.fetch_add(1, std::memory_order_relaxed));
    if (tier.AboveHigh() && mover_) mover_->Wake();
    return Status::OK();
  }
  // The object is released with `blob` on this thread (its destructor must
  // not block: external.h).
  return Status::NoSpace("no host tier has room for an external object of " + std::to_string(accounted_bytes) +
                         " bytes");
}

StatusOr<std::shared_ptr<ExternalObject>> EngineCore::GetExternal(std::string_view key) {
  const uint64_t hash = ObjectIndex::Hash(key);
  auto& shard = index_.ShardForHash(hash);
  std::lock_guard<std::mutex> l(shard.mu);
  Entry* e = shard.Find(key, hash);
  if (e == nullptr) return Status::NotFound("key not found");
  if (e->tier < 0 || !tiers_[e->tier]->is_memory() || !e->loc.has_blob()) return std::shared_ptr<ExternalObject>();
  ExternalSlot* slot = ExternalSlotOf(e->loc.blob().get());
  if (slot == nullptr) return std::shared_ptr<ExternalObject>();
  EvictionPolicy::Touch(e);
  return slot->object;
}

}  // namespace spillway::internal
