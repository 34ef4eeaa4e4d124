// StripedCounter: a counter bumped by many threads on a hot path (Get hits,
// pinned bytes) without them sharing a cache line. Each thread adds to one of
// kStripes padded cells; Load() sums the cells, which only statistics calls
// do. Values may go up and down (pin/unpin); a cell may be negative, the sum
// never is.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace spillway::internal {

class StripedCounter {
 public:
  void Add(int64_t n) { cells_[Stripe()].v.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Load() const {
    int64_t sum = 0;
    for (const Cell& c : cells_) sum += c.v.load(std::memory_order_relaxed);
    return sum < 0 ? 0 : static_cast<uint64_t>(sum);
  }

 private:
  static constexpr size_t kStripes = 16;
  struct alignas(64) Cell {
    std::atomic<int64_t> v{0};
  };
  // Threads take stripes round-robin as they first count.
  static size_t Stripe() {
    static std::atomic<size_t> next{0};
    thread_local const size_t stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
    return stripe;
  }
  Cell cells_[kStripes];
};

}  // namespace spillway::internal
