// Demoter: the move protocol that takes objects one tier down. The Mover
// decides when and runs it in batches; a caller without a background mover
// runs it on its own thread.
//
// Protocol (no lock is held during I/O):
//  1. Pick: the eviction policy picks LRU victims (marked picked, so
//     concurrent batches of one tier take disjoint victims); under each
//     entry's shard lock the entry is marked `moving` if it is unpinned and
//     still in this tier.
//  2. Place: Placement reserves room below for each object (its estimate
//     computed once, carried to Store). An object with no room anywhere
//     below stays where it is; the batch reports the tier that needs room.
//  3. Read the sources (memory tiers: no copy; a gpu tier copies the batch
//     to pinned host memory at once) and Store each destination's objects as
//     one batch, so small objects share large writes. A destination that
//     runs out of space (ENOSPC) passes its objects on to the tier below.
//  4. Commit under the shard lock only if the entry was not pinned, erased
//     or replaced meanwhile; otherwise the new copy is dropped. The object
//     always has a readable copy, and a failed move leaves it where it was.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/move_host.h"
#include "engine/placement.h"

namespace spillway::internal {

struct DemotionBatch;
struct DemotionMove;
// Destroying a batch that never ran aborts it: its entries stay where they
// are, unmarked (a scheduler dropped at shutdown, a test that did not step).
struct DemotionBatchDeleter {
  void operator()(DemotionBatch* batch) const;
};
using DemotionBatchPtr = std::unique_ptr<DemotionBatch, DemotionBatchDeleter>;

class Demoter {
 public:
  // Neither is owned; both must outlive the demoter.
  Demoter(MoveHost* host, const Placement* placement);
  ~Demoter();

  // Step 1: picks up to `bytes` (raw) of victims of tier t. Null when
  // nothing in the tier can move now.
  DemotionBatchPtr Pick(int t, uint64_t bytes);
  static uint64_t PickedBytes(const DemotionBatch& batch);

  struct Result {
    uint64_t moved = 0;       // raw bytes committed below
    int blocked = -1;         // a tier below that must make room first
    uint64_t blocked_bytes = 0;
    // Moves whose copy was written but not committed: the entry was erased,
    // replaced or pinned while it was copied. Their tier may still be above
    // its watermark with other objects to move, so a batch of only these is
    // no sign that the boundary is stuck.
    uint64_t raced = 0;
  };
  // Steps 2-4. `make_room` (may be null) reserves in a full tier below by
  // demoting out of it on this thread (engines without a background mover).
  Result Run(int t, DemotionBatch& batch, const Placement::MakeRoomFn& make_room);
  // Takes the moves of external objects (Engine::PutExternal) out of `batch`
  // into a batch of their own, with their picks and references; null when
  // there are none. Run materializes such moves on its own thread: the
  // Mover runs that batch on its materializer thread, so a Materialize
  // waiting for the caller (Python's GIL) holds up no other move.
  DemotionBatchPtr SplitExternal(DemotionBatch& batch);
  // Pick and Run on the caller's thread. Returns the raw bytes moved.
  uint64_t Demote(int t, uint64_t bytes, const Placement::MakeRoomFn& make_room);

 private:
  using Move = DemotionMove;
  // Run's steps, in the order it takes them. A move that one step cannot
  // take further (no dest, or not ok) the later steps skip, and it stays
  // where it is.
  // Reads a file source's records first: placing needs their buffer sizes.
  void LoadFileSources(int t, DemotionBatch& batch);
  // Turns external objects into bytes (Materialize) on this thread.
  void MaterializeExternal(int t, DemotionBatch& batch);
  // Place: reserves room below for each move; for one with no room
  // anywhere below, the tier that must make room first goes to `result`.
  void PlaceBelow(int t, DemotionBatch& batch, const Placement::MakeRoomFn& make_room, Result* result);
  // Reads a memory source's placed objects as host memory; an unreadable
  // one gives its reservation back.
  void LoadMemorySources(int t, DemotionBatch& batch);
  // Stores the moves placed in tier d as one batch (a gpu source's host
  // copies adopted where tier d can).
  void StoreInto(int t, int d, DemotionBatch& batch, const Placement::MakeRoomFn& make_room);
  // After a failed Store into tier d: the group's reservations back, and on
  // ENOSPC each move placed again below d.
  void PassOnBelow(int t, int d, const std::vector<Move*>& group, const Status& error,
                   const Placement::MakeRoomFn& make_room);
  // Commit: commits or aborts every move, frees what each leaves behind
  // and counts the boundary's moves.
  void CommitAll(int t, DemotionBatch& batch, Result* result);
  // Under the entry's shard lock: points the entry at its new copy if it
  // was not pinned, erased or replaced meanwhile, and returns whether it
  // did. `old`: the source location to free; `replaced`: an external
  // object's entry, superseded by one for its bytes.
  bool CommitIfUnchanged(int t, Move& m, uint64_t raw_below, Location* old, Entry** replaced);

  MoveHost* host_;
  const Placement* placement_;
};

}  // namespace spillway::internal
