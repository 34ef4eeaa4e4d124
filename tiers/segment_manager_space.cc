// SegmentManager's reserved free space (min_free): which path a write goes to, and
// whether the tier can take more bytes without eating into any path's
// reserve. Free space is measured through FileIo::SpaceOf (statvfs) at most
// every 100 ms per path and counted down by the bytes reserved in between.
#include <chrono>
#include <climits>

#include "base/checked_math.h"
#include "tiers/segment_manager.h"

namespace spillway {
namespace {
constexpr int64_t kRefreshNs = 100'000'000;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool SegmentManager::HasMinFree() const { return config_.min_free_bytes != 0 || config_.min_free_fraction > 0; }

void SegmentManager::RefreshSpace(Stripe& s) const {
  const int64_t now = NowNs();
  int64_t last = s.checked_ns.load(std::memory_order_relaxed);
  if (last != 0 && now - last < kRefreshNs) return;
  if (!s.checked_ns.compare_exchange_strong(last, now)) return;  // another thread measures
  auto space = io_->SpaceOf(s.dir);
  if (!space.ok()) {  // cannot tell: no reserve is enforced on this path
    s.reserve_bytes.store(0);
    s.free_bytes.store(INT64_MAX);
    return;
  }
  const uint64_t fraction = static_cast<uint64_t>(config_.min_free_fraction * static_cast<double>(space->total_bytes));
  s.reserve_bytes.store(std::max<uint64_t>(config_.min_free_bytes, fraction));
  s.free_bytes.store(static_cast<int64_t>(std::min<uint64_t>(space->free_bytes, INT64_MAX)));
}

bool SegmentManager::StripeHasRoom(Stripe& s, uint64_t bytes) const {
  RefreshSpace(s);
  const int64_t free = s.free_bytes.load(std::memory_order_relaxed);
  // A reserve near 2^64 (min_free is the user's) must not wrap to a small need.
  uint64_t need = 0;
  if (!CheckedAdd(s.reserve_bytes.load(std::memory_order_relaxed), bytes, &need)) return false;
  return free >= 0 && static_cast<uint64_t>(free) >= need;
}

bool SegmentManager::HasDeviceRoom(uint64_t bytes) const {
  if (!HasMinFree()) return true;
  for (const auto& s : stripes_) {
    if (StripeHasRoom(*s, bytes)) return true;
  }
  return false;
}

StatusOr<uint32_t> SegmentManager::PickStripe(uint64_t len) {
  const uint32_t n = static_cast<uint32_t>(stripes_.size());
  const uint32_t first = next_stripe_.fetch_add(1, std::memory_order_relaxed) % n;
  if (!HasMinFree()) return first;
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t i = (first + k) % n;
    if (StripeHasRoom(*stripes_[i], len)) {
      stripes_[i]->free_bytes.fetch_sub(static_cast<int64_t>(len), std::memory_order_relaxed);
      return i;
    }
  }
  return Status::NoSpace("file tier '" + name() + "': every path is at its reserved free space (min_free)");
}

}  // namespace spillway
