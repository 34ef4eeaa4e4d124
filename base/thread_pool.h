// The one thread pool and its helpers, used by every folder above base:
//   ThreadPool   a fixed set of threads running queued tasks (overlapped slab
//                writes, hole punching, prefetches, ...)
//   TaskGroup    a latch over tasks that each finish with a Status: Wait()
//                returns when all are done, with the first failure
//   ParallelFor  a data-parallel loop on a process-wide pool in which the
//                caller works too (encoding and decoding the chunks of a record)
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "spillway/status.h"

namespace spillway {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads);
  // Runs every queued task, then joins the threads.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return threads_.size(); }
  // REQUIRES: `task` does not throw.
  void Submit(std::function<void()> task);
  // Blocks until every task submitted before the call has finished (and any
  // submitted meanwhile: callers that need a barrier stop submitting first).
  void WaitIdle();

 private:
  void Loop();

  std::mutex mu_;  // guards tasks_, running_, stop_
  std::condition_variable cv_;
  std::condition_variable idle_cv_;  // signalled when the pool goes idle
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;  // tasks taken off the queue and not yet finished
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Counts outstanding tasks (Add before submitting, Done when finished) and
// keeps the first failure. Thread-safe.
class TaskGroup {
 public:
  void Add(int n = 1);
  void Done(Status status = Status::OK());
  // True once any task has finished with a failure (to stop submitting more).
  bool failed();
  // Blocks until every added task is done; returns the first failure.
  Status Wait();

 private:
  std::mutex mu_;  // guards pending_, first_
  std::condition_variable cv_;
  int pending_ = 0;
  Status first_;
};

// Runs fn(i) for every i in [0, n) and returns when all calls have returned.
// The calling thread works too, so the loop always progresses even when every
// worker is busy with other callers' loops; at most hardware_concurrency()
// threads run one loop. Safe to call from many threads at once. `fn` must not
// throw and must not call ParallelFor itself.
//
// Why a pool rather than a thread per call: codec contexts are per thread
// (thread_local), so long-lived workers keep warm contexts; a fresh thread
// would allocate and fault in a new zstd context for every record.
void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

// Threads one ParallelFor can use, the caller included (>= 1).
size_t ParallelWidth();

}  // namespace spillway
