// ThreadPool, TaskGroup and ParallelFor (thread_pool.h).
//
// ParallelFor shares one process-wide ThreadPool. A loop hands out indices
// through an atomic counter, so the caller and any number of helper tasks
// claim work from it without a lock; a helper that starts after the loop is
// exhausted returns at once. The workers start on the first ParallelFor and
// are joined at exit.
#include "base/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>

namespace spillway {

ThreadPool::ThreadPool(size_t threads) {
  for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ThreadPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void ThreadPool::WaitIdle() {
  std::unique_lock<std::mutex> l(mu_);
  idle_cv_.wait(l, [this] { return tasks_.empty() && running_ == 0; });
}

void ThreadPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [this] { return stop_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and the queue is drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++running_;
    }
    task();
    task = nullptr;  // captures die before WaitIdle returns
    {
      std::lock_guard<std::mutex> l(mu_);
      if (--running_ == 0 && tasks_.empty()) idle_cv_.notify_all();
    }
  }
}

void TaskGroup::Add(int n) {
  std::lock_guard<std::mutex> l(mu_);
  pending_ += n;
}

void TaskGroup::Done(Status status) {
  std::lock_guard<std::mutex> l(mu_);
  if (!status.ok() && first_.ok()) first_ = std::move(status);
  if (--pending_ == 0) cv_.notify_all();
}

bool TaskGroup::failed() {
  std::lock_guard<std::mutex> l(mu_);
  return !first_.ok();
}

Status TaskGroup::Wait() {
  std::unique_lock<std::mutex> l(mu_);
  cv_.wait(l, [this] { return pending_ == 0; });
  return first_;
}

namespace {

// One ParallelFor call, shared with its helper tasks so that a helper which
// starts late (the loop already finished) still holds valid memory; `fn` is
// called only for claimed indices < n, all of which finish before ParallelFor
// returns.
struct ParallelLoop {
  const std::function<void(size_t)>* fn = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;  // pairs with `finished`
  std::condition_variable finished;

  void Work() {
    for (;;) {
      const size_t i = next.fetch_add(1);
      if (i >= n) return;
      (*fn)(i);
      if (done.fetch_add(1) + 1 == n) {
        // Taking the lock orders this notify after the waiter's predicate check.
        std::lock_guard<std::mutex> l(mu);
        finished.notify_all();
      }
    }
  }
};

ThreadPool& SharedPool() {
  static ThreadPool pool([] {
    const unsigned hw = std::thread::hardware_concurrency();
    return hw > 1 ? std::min<size_t>(hw - 1, 63) : size_t{0};
  }());
  return pool;
}

}  // namespace

void ParallelFor(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  ThreadPool& pool = SharedPool();
  if (pool.size() == 0 || n == 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  auto loop = std::make_shared<ParallelLoop>();
  loop->fn = &fn;
  loop->n = n;
  const size_t helpers = std::min(pool.size(), n - 1);
  for (size_t h = 0; h < helpers; ++h) pool.Submit([loop] { loop->Work(); });
  loop->Work();
  std::unique_lock<std::mutex> l(loop->mu);
  loop->finished.wait(l, [&] { return loop->done.load() == n; });
}

size_t ParallelWidth() { return SharedPool().size() + 1; }

}  // namespace spillway
