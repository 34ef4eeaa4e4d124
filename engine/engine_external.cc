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
  SPILLWAY_RETURN_IF_ERROR(CheckKey(key));
  if (!object) return Status::InvalidArgument("PutExternal of a null object");
  auto slot = std::make_shared<ExternalSlot>();
  slot->object = std::move(object);
  // No bytes behind the pointer: nothing reads a blob of zero buffers, and
  // its size is what the tier accounts.
  BlobPtr blob = std::make_shared<Blob>(nullptr, accounted_bytes, std::vector<uint64_t>{}, MemoryKind::kHost);
  blob->SetAttachment(std::move(slot));
  if (AdoptIntoHostTier(key, blob, accounted_bytes)) return Status::OK();
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
