// EvictionPolicy: decides which objects leave a tier. How many bytes and
// when is the DemotionPolicy's (demotion_policy.h); the mechanism that moves
// them is the Demoter, run by the Mover.
//
// LRU approximated CLOCK-style: one list per tier, newest at the head. A Get
// only sets the entry's kAccessed flag (a relaxed atomic, no lock), so hits
// on different keys share no lock or cache line here; PickVictims, scanning
// from the tail, gives a flagged entry a second chance by moving it to the
// head. Each list has its own mutex; lock order is shard mutex, then list
// mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/object_index.h"

namespace spillway::internal {

class EvictionPolicy {
 public:
  explicit EvictionPolicy(size_t num_tiers);
  ~EvictionPolicy();

  // REQUIRES: the entry's shard mutex is held (for these three).
  void Insert(Entry* e, int tier);
  void Remove(Entry* e);
  void MoveTo(Entry* e, int tier);
  // Records a use; any thread, no lock needed.
  static void Touch(Entry* e) {
    if ((e->flags.load(std::memory_order_relaxed) & Entry::kAccessed) == 0) {
      e->flags.fetch_or(Entry::kAccessed, std::memory_order_relaxed);
    }
  }

  // A read of the entry: a read-ahead it carried (Entry::kReadAhead) is spent.
  static void ReadAheadConsumed(Entry* e) {
    if ((e->flags.load(std::memory_order_relaxed) & Entry::kReadAhead) != 0) {
      e->flags.fetch_and(static_cast<uint8_t>(~Entry::kReadAhead), std::memory_order_relaxed);
    }
  }

  // Appends up to `max_count` entries of `tier`, skipping pinned entries and
  // those another Demote picked, until their raw sizes reach `bytes`: first
  // the entries whose demotion writes nothing (Entry::kClean: a promoted
  // object whose record below is still valid), oldest first whatever their
  // second-chance flag, except those read ahead and not read since
  // (kReadAhead); then the least recently used of the rest, CLOCK-style.
  // Marks each appended entry kPicked and takes a reference on it; the
  // caller clears the mark with Unpick and drops the reference.
  // Clean first because dropping a clean copy frees its room at once and
  // costs at most a read if the object is wanted again, where a dirty
  // victim is a write now (the kernel reclaims clean pages first for the
  // same reason): a scan read back through a full host tier otherwise
  // pushed out, and wrote, the objects not yet read, then read them back.
  // `any_clean` false (the engine holds no clean copy) skips that first walk,
  // which would visit every entry of the list for nothing.
  void PickVictims(int tier, uint64_t bytes, size_t max_count, std::vector<Entry*>* out, bool any_clean = true);
  static void Unpick(Entry* e) { e->flags.fetch_and(static_cast<uint8_t>(~Entry::kPicked), std::memory_order_relaxed); }

 private:
  struct List {
    std::mutex mu;  // guards the list links of its entries and `size`
    Entry head{0, 0};  // sentinel: head.lru_next is the newest entry, head.lru_prev the oldest
    size_t size = 0;
    List() { head.lru_next = head.lru_prev = &head; }
  };
  void Unlink(List& l, Entry* e);
  void LinkFront(List& l, Entry* e, int tier);
  // Relinks without writing lru_tier, which only changes under the entry's
  // shard mutex too (Remove reads it holding just that).
  void MoveToFront(List& l, Entry* e);

  std::vector<std::unique_ptr<List>> lists_;
};

}  // namespace spillway::internal
