// ThreadPool, TaskGroup and ParallelFor (base/thread_pool.h).
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "base/thread_pool.h"

namespace spillway {
namespace {

TEST_CASE("ThreadPool runs every task, WaitIdle returns after the last one, the destructor drains the queue") {
  std::atomic<int> ran{0};
  {
    ThreadPool pool(3);
    CHECK(pool.size() == 3);
    for (int i = 0; i < 200; ++i) pool.Submit([&] { ran.fetch_add(1); });
    pool.WaitIdle();
    CHECK(ran.load() == 200);
    for (int i = 0; i < 50; ++i) {
      pool.Submit([&] {
        std::this_thread::yield();
        ran.fetch_add(1);
      });
    }
  }
  CHECK(ran.load() == 250);
}

TEST_CASE("TaskGroup waits for every task and keeps the first failure") {
  ThreadPool pool(2);
  TaskGroup group;
  std::atomic<int> done{0};
  group.Add(10);
  for (int i = 0; i < 10; ++i) {
    pool.Submit([&, i] {
      done.fetch_add(1);
      group.Done(i == 3 ? Status::IOError("task 3 failed") : Status::OK());
    });
  }
  Status s = group.Wait();
  CHECK(done.load() == 10);
  CHECK(s.code() == StatusCode::kIOError);
  CHECK(s.message().find("task 3") != std::string::npos);
  CHECK(group.failed());

  TaskGroup clean;
  clean.Add();
  pool.Submit([&] { clean.Done(); });
  CHECK(clean.Wait().ok());
  CHECK_FALSE(clean.failed());
}

TEST_CASE("ParallelFor runs every index once, from many callers at once") {
  CHECK(ParallelWidth() >= 1);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 3; ++c) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) {
        std::vector<std::atomic<int>> hits(37);
        ParallelFor(hits.size(), [&](size_t i) { hits[i].fetch_add(1); });
        for (auto& h : hits) bad += h.load() != 1;
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(bad.load() == 0);
  int calls = 0;
  ParallelFor(0, [&](size_t) { ++calls; });
  CHECK(calls == 0);
}

}  // namespace
}  // namespace spillway
