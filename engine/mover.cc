// Mover: background demotion passes, woken by Puts that cross a high
// watermark and by a periodic tick.
#include "engine/mover.h"

#include <algorithm>
#include <chrono>

#include "engine/engine_core.h"

namespace spillway::internal {
namespace {
constexpr uint64_t kPassChunkBytes = 64ull << 20;
}  // namespace

Mover::Mover(EngineCore* core) : core_(core) {}

Mover::~Mover() { Stop(); }

void Mover::Start() {
  std::lock_guard<std::mutex> l(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void Mover::Stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Mover::Wake() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (wake_) return;
    wake_ = true;
  }
  cv_.notify_one();
}

uint64_t Mover::Pass() {
  uint64_t total = 0;
  for (size_t t = 0; t + 1 < core_->num_tiers(); ++t) {
    Tier& tier = core_->tier(t);
    uint64_t need = std::max(EvictionPolicy::BytesToDemote(tier), core_->DevicePressure(static_cast<int>(t)));
    while (need > 0) {
      const uint64_t moved = core_->Demote(static_cast<int>(t), std::min(need, kPassChunkBytes));
      if (moved == 0) break;
      total += moved;
      // Keep going until the low watermark, not just below the high one
      // (BytesToDemote made the first batch at least MinBatchBytes).
      const uint64_t excess = tier.ExcessOverLow();
      need = excess;
    }
  }
  return total;
}

void Mover::Loop() {
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    cv_.wait_for(l, std::chrono::milliseconds(100), [this] { return stop_ || wake_; });
    if (stop_) break;
    wake_ = false;
    const uint64_t started = ++passes_started_;
    l.unlock();
    const uint64_t moved = Pass();
    l.lock();
    if (moved == 0) {
      last_idle_pass_ = started;
      idle_cv_.notify_all();
    } else {
      wake_ = true;  // more may be waiting: run again at once
    }
  }
  last_idle_pass_ = ~0ull;
  idle_cv_.notify_all();
}

void Mover::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  if (!thread_.joinable()) {
    l.unlock();
    while (Pass() > 0) {
    }
    return;
  }
  const uint64_t after = passes_started_;
  wake_ = true;
  cv_.notify_one();
  idle_cv_.wait(l, [&] { return last_idle_pass_ > after; });
}

}  // namespace spillway::internal
