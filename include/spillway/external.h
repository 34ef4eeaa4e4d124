// ExternalObject: a value the engine holds as the caller's own live object
// (Engine::PutExternal) while it sits in a memory tier, and turns into bytes
// only when the mover demotes it to a tier that stores bytes (a file tier).
// The Python module's SpillwayStore keeps Dask values (pandas frames, lists,
// arbitrary objects) this way, so a value that never leaves memory is never
// serialized.
//
// Contract for implementations:
//  - Materialize() runs on an engine thread (the mover's materializer thread;
//    a caller's own thread when the engine demotes synchronously), with no
//    engine lock held. It may block (taking Python's GIL), and it may be
//    called more than once if a demotion is retried; each call returns bytes
//    for the same value. A failure (Status) keeps the object where it is, in
//    memory, and the engine does not try it again.
//  - The destructor releases the value. It runs wherever the engine drops
//    its last reference (a committed demotion, an erase or overwrite, the
//    engine's destruction), engine threads included, holding no engine lock:
//    it must not block (hand slow work, e.g. taking the GIL, to another
//    thread).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include "spillway/status.h"

namespace spillway {

// The bytes of an external object: its buffers (as Put takes them), valid
// while `owner` lives. The engine drops `owner` once they are stored below
// (or the move is abandoned), on an engine thread: its deleter must not block.
struct MaterializedObject {
  std::vector<std::span<const std::byte>> buffers;
  std::shared_ptr<void> owner;
};

class ExternalObject {
 public:
  virtual ~ExternalObject() = default;
  virtual StatusOr<MaterializedObject> Materialize() = 0;
  // Optional: held while the engine materializes a batch of external objects
  // on one thread, one after another; the first object of the batch provides
  // it for the whole batch. The Python module's holds the GIL, so that it is
  // taken once per batch rather than once per object. Same thread rules as
  // Materialize. Default: nothing.
  virtual std::shared_ptr<void> MaterializeScope() { return nullptr; }
};

}  // namespace spillway
