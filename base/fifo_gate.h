// FifoGate: lets at most `limit` threads through at once, in the order they
// arrived. A thread that calls Enter takes the next ticket and waits until
// every earlier ticket has gone through and fewer than `limit` are inside;
// the Pass it gets back lets the next one in when it is destroyed.
//
// The file tier passes its slab writes through one per path (file_tier.cc:
// why in order, and how many).
//
// Thread-safety: every method may be called from any thread. A thread must
// not Enter again while it holds a Pass of the same gate with `limit` 1
// (it would wait for itself).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace spillway {

class FifoGate {
 public:
  class Pass {
   public:
    Pass(Pass&& o) noexcept : gate_(o.gate_) { o.gate_ = nullptr; }
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;
    Pass& operator=(Pass&&) = delete;
    ~Pass() {
      if (gate_ != nullptr) gate_->Leave();
    }

   private:
    friend class FifoGate;
    explicit Pass(FifoGate* gate) : gate_(gate) {}
    FifoGate* gate_;
  };

  // REQUIRES: limit >= 1.
  explicit FifoGate(int limit) : limit_(limit) {}
  FifoGate(const FifoGate&) = delete;
  FifoGate& operator=(const FifoGate&) = delete;

  // Waits for this caller's turn (see above).
  Pass Enter() {
    std::unique_lock<std::mutex> l(mu_);
    const uint64_t ticket = next_ticket_++;
    cv_.wait(l, [&] { return admitted_ == ticket && inside_ < limit_; });
    ++admitted_;
    ++inside_;
    // The next ticket may fit too: it waits for this one's admission.
    cv_.notify_all();
    return Pass(this);
  }

  // Callers through the gate now, and callers waiting at it.
  int inside() const {
    std::lock_guard<std::mutex> l(mu_);
    return inside_;
  }
  int waiting() const {
    std::lock_guard<std::mutex> l(mu_);
    return static_cast<int>(next_ticket_ - admitted_);
  }

 private:
  void Leave() {
    std::lock_guard<std::mutex> l(mu_);
    --inside_;
    cv_.notify_all();
  }

  const int limit_;
  mutable std::mutex mu_;  // guards the fields below
  std::condition_variable cv_;
  uint64_t next_ticket_ = 0;  // the next caller's ticket
  uint64_t admitted_ = 0;     // tickets below this one went through
  int inside_ = 0;
};

}  // namespace spillway
