// EvictionPolicy: per-tier LRU lists.
#include "engine/eviction_policy.h"

namespace spillway::internal {

EvictionPolicy::EvictionPolicy(size_t num_tiers) {
  for (size_t i = 0; i < num_tiers; ++i) lists_.push_back(std::make_unique<List>());
}

EvictionPolicy::~EvictionPolicy() = default;

void EvictionPolicy::Unlink(Entry* e) {
  e->lru_prev->lru_next = e->lru_next;
  e->lru_next->lru_prev = e->lru_prev;
  e->lru_prev = e->lru_next = nullptr;
  e->lru_tier = -1;
}

void EvictionPolicy::LinkFront(List& l, Entry* e, int tier) {
  e->lru_next = l.head.lru_next;
  e->lru_prev = &l.head;
  l.head.lru_next->lru_prev = e;
  l.head.lru_next = e;
  e->lru_tier = static_cast<int8_t>(tier);
}

void EvictionPolicy::Insert(Entry* e, int tier) {
  List& l = *lists_[tier];
  std::lock_guard<std::mutex> g(l.mu);
  LinkFront(l, e, tier);
}

void EvictionPolicy::Remove(Entry* e) {
  if (e->lru_tier < 0) return;
  List& l = *lists_[e->lru_tier];
  std::lock_guard<std::mutex> g(l.mu);
  Unlink(e);
}

void EvictionPolicy::Touch(Entry* e) {
  if (e->lru_tier < 0) return;
  List& l = *lists_[e->lru_tier];
  std::lock_guard<std::mutex> g(l.mu);
  if (l.head.lru_next == e) return;
  const int tier = e->lru_tier;
  Unlink(e);
  LinkFront(l, e, tier);
}

void EvictionPolicy::MoveTo(Entry* e, int tier) {
  Remove(e);
  Insert(e, tier);
}

void EvictionPolicy::PickVictims(int tier, uint64_t bytes, size_t max_count, std::vector<Entry*>* out) {
  List& l = *lists_[tier];
  std::lock_guard<std::mutex> g(l.mu);
  uint64_t got = 0;
  size_t n = 0;
  for (Entry* e = l.head.lru_prev; e != &l.head && got < bytes && n < max_count; e = e->lru_prev) {
    if (e->pins.load(std::memory_order_acquire) != 0) continue;
    e->refs.fetch_add(1, std::memory_order_relaxed);
    out->push_back(e);
    got += e->raw_size;
    ++n;
  }
}

}  // namespace spillway::internal
