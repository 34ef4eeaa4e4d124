// ExternalSlot: what the engine keeps beside a caller's external object
// (Engine::PutExternal, spillway/external.h). A host tier holds the object as
// a Blob of no buffers whose attachment is the slot: every structure below
// the engine (tiers, pins, the eviction policy) treats it as a host object of
// `accounted_bytes`, and only the Demoter looks inside (ExternalSlotOf) to
// turn it into bytes.
#pragma once

#include <atomic>
#include <memory>

#include "spillway/external.h"
#include "tiers/blob.h"

namespace spillway::internal {

struct ExternalSlot {
  std::shared_ptr<ExternalObject> object;
  // Set when Materialize failed: the object stays in memory and is not
  // picked again (the Demoter marks it used so the policy looks elsewhere).
  std::atomic<bool> failed{false};
};

// The slot of a memory tier's blob, or null for an ordinary object.
inline ExternalSlot* ExternalSlotOf(const Blob* blob) {
  if (blob == nullptr) return nullptr;
  const std::shared_ptr<void>* a = blob->attachment();
  return a == nullptr ? nullptr : static_cast<ExternalSlot*>(a->get());
}

}  // namespace spillway::internal
