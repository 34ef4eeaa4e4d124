// EvictionPolicy: decides which objects leave a tier and how many bytes.
// The mechanism that moves them is the Mover (mover.h).
//
// LRU: one list per tier, most recently used at the head. Each list has its
// own mutex; lock order is shard mutex, then list mutex.
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

  // REQUIRES: the entry's shard mutex is held (for all four).
  void Insert(Entry* e, int tier);
  void Remove(Entry* e);
  void Touch(Entry* e);
  void MoveTo(Entry* e, int tier);

  // Appends up to `max_count` entries of `tier`, least recently used first,
  // skipping pinned and moving ones, until their raw sizes reach `bytes`.
  // Takes a reference on each appended entry (the caller drops it).
  void PickVictims(int tier, uint64_t bytes, size_t max_count, std::vector<Entry*>* out);

  // How many bytes the mover should take out of a tier now: down to its low
  // watermark once it is above the high one, else 0.
  static uint64_t BytesToDemote(const Tier& tier) { return tier.AboveHigh() ? tier.ExcessOverLow() : 0; }

 private:
  struct List {
    std::mutex mu;  // guards the list links of its entries
    Entry head{"", 0};  // sentinel: head.lru_next is the MRU entry, head.lru_prev the LRU
    List() { head.lru_next = head.lru_prev = &head; }
  };
  void Unlink(Entry* e);
  void LinkFront(List& l, Entry* e, int tier);

  std::vector<std::unique_ptr<List>> lists_;
};

}  // namespace spillway::internal
