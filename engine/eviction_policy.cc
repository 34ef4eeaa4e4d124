// EvictionPolicy: per-tier CLOCK-style LRU lists.
#include "engine/eviction_policy.h"

#include <algorithm>

namespace spillway::internal {

EvictionPolicy::EvictionPolicy(size_t num_tiers) {
  for (size_t i = 0; i < num_tiers; ++i) lists_.push_back(std::make_unique<List>());
}

EvictionPolicy::~EvictionPolicy() = default;

void EvictionPolicy::Unlink(List& l, Entry* e) {
  e->lru_prev->lru_next = e->lru_next;
  e->lru_next->lru_prev = e->lru_prev;
  e->lru_prev = e->lru_next = nullptr;
  e->lru_tier = -1;
  --l.size;
}

void EvictionPolicy::LinkFront(List& l, Entry* e, int tier) {
  e->lru_next = l.head.lru_next;
  e->lru_prev = &l.head;
  l.head.lru_next->lru_prev = e;
  l.head.lru_next = e;
  e->lru_tier = static_cast<int8_t>(tier);
  ++l.size;
}

void EvictionPolicy::MoveToFront(List& l, Entry* e) {
  if (l.head.lru_next == e) return;
  e->lru_prev->lru_next = e->lru_next;
  e->lru_next->lru_prev = e->lru_prev;
  e->lru_next = l.head.lru_next;
  e->lru_prev = &l.head;
  l.head.lru_next->lru_prev = e;
  l.head.lru_next = e;
}

void EvictionPolicy::Insert(Entry* e, int tier) {
  List& l = *lists_[tier];
  // A new arrival starts without a second chance, as it would at the head of
  // an exact LRU list.
  e->flags.fetch_and(static_cast<uint8_t>(~Entry::kAccessed), std::memory_order_relaxed);
  std::lock_guard<std::mutex> g(l.mu);
  LinkFront(l, e, tier);
}

void EvictionPolicy::Remove(Entry* e) {
  if (e->lru_tier < 0) return;
  List& l = *lists_[e->lru_tier];
  std::lock_guard<std::mutex> g(l.mu);
  Unlink(l, e);
}

void EvictionPolicy::MoveTo(Entry* e, int tier) {
  Remove(e);
  Insert(e, tier);
}

void EvictionPolicy::PickVictims(int tier, uint64_t bytes, size_t max_count, std::vector<Entry*>* out,
                                 bool any_clean) {
  List& l = *lists_[tier];
  std::lock_guard<std::mutex> g(l.mu);
  uint64_t got = 0;
  size_t n = 0;
  auto take = [&](Entry* e) {
    e->flags.fetch_or(Entry::kPicked, std::memory_order_relaxed);
    e->refs.fetch_add(1, std::memory_order_relaxed);
    out->push_back(e);
    got += e->raw_size;
    ++n;
  };
  // Clean copies first (eviction_policy.h says why).
  for (Entry* e = l.head.lru_prev; any_clean && e != &l.head && got < bytes && n < max_count; e = e->lru_prev) {
    const uint8_t flags = e->flags.load(std::memory_order_relaxed);
    if ((flags & (Entry::kPicked | Entry::kReadAhead)) == 0 && (flags & Entry::kClean) != 0 && e->pins() == 0) {
      take(e);
    }
  }
  // Each entry is looked at most twice: one moved to the head for its second
  // chance is met again at the end of the walk (its flag now clear), so a
  // list whose every entry was read recently still yields victims, oldest
  // first, as a CLOCK sweep does on its second round.
  size_t budget = 2 * l.size;
  for (Entry* e = l.head.lru_prev; e != &l.head && got < bytes && n < max_count && budget > 0; --budget) {
    Entry* prev = e->lru_prev;
    const uint8_t flags = e->flags.load(std::memory_order_relaxed);
    if ((flags & Entry::kPicked) != 0 || e->pins() != 0) {
      e = prev;
      continue;
    }
    if ((flags & Entry::kAccessed) != 0) {
      e->flags.fetch_and(static_cast<uint8_t>(~Entry::kAccessed), std::memory_order_relaxed);
      MoveToFront(l, e);
      e = prev;
      continue;
    }
    take(e);
    e = prev;
  }
}

}  // namespace spillway::internal
