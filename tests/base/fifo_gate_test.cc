// FifoGate (base/fifo_gate.h): callers go through in the order they arrived,
// never more than the limit at once.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "base/fifo_gate.h"

namespace spillway {
namespace {

// Spins until `pred` holds (or ten seconds passed, which fails the caller's check).
template <typename Pred>
bool WaitFor(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return true;
}

TEST_CASE("FifoGate lets waiting callers through in the order they arrived") {
  // One at a time, so that the order they record in is the order they
  // went through (two inside at once could record in either order).
  {
    FifoGate gate(1);
    // The test holds the one place, so each thread below waits at the gate;
    // it starts the next only once the last one waits there, which fixes
    // the order of their tickets.
    std::optional<FifoGate::Pass> held(gate.Enter());
    CHECK(gate.inside() == 1);
    constexpr int kThreads = 8;
    std::mutex mu;
    std::vector<int> order;
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        FifoGate::Pass pass = gate.Enter();
        std::lock_guard<std::mutex> l(mu);
        order.push_back(i);
      });
      REQUIRE(WaitFor([&] { return gate.waiting() == i + 1; }));
    }
    {
      std::lock_guard<std::mutex> l(mu);
      CHECK(order.empty());  // nobody passed a full gate
    }
    held.reset();
    for (std::thread& t : threads) t.join();
    std::vector<int> want(kThreads);
    for (int i = 0; i < kThreads; ++i) want[i] = i;
    CHECK(order == want);
    CHECK(gate.inside() == 0);
    CHECK(gate.waiting() == 0);
  }
}

TEST_CASE("FifoGate never has more than its limit inside") {
  FifoGate gate(2);
  std::atomic<int> inside{0}, most{0}, passed{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 20; ++k) {
        FifoGate::Pass pass = gate.Enter();
        const int now = inside.fetch_add(1) + 1;
        int m = most.load();
        while (now > m && !most.compare_exchange_weak(m, now)) {
        }
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        inside.fetch_sub(1);
        passed.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(passed.load() == 120);
  CHECK(most.load() <= 2);
  CHECK(most.load() >= 1);
  CHECK(gate.inside() == 0);
}

TEST_CASE("a moved FifoGate::Pass lets the next caller in once, when its last owner goes") {
  FifoGate gate(1);
  std::atomic<bool> through{false};
  std::thread waiter;
  {
    FifoGate::Pass a = gate.Enter();
    FifoGate::Pass b = std::move(a);
    waiter = std::thread([&] {
      FifoGate::Pass p = gate.Enter();
      through = true;
    });
    REQUIRE(WaitFor([&] { return gate.waiting() == 1; }));
    {
      FifoGate::Pass gone = std::move(b);  // the moved-from `a` and `b` release nothing
    }
    REQUIRE(WaitFor([&] { return through.load(); }));
  }
  waiter.join();
  CHECK(gate.inside() == 0);
}

}  // namespace
}  // namespace spillway
