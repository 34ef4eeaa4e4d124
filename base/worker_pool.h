// WorkerPool: a fixed set of threads running queued tasks. Used where work
// must overlap (encoding one slab while the previous one is being written)
// and for work taken off a caller's path (hole punching).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace spillway {

class WorkerPool {
 public:
  explicit WorkerPool(size_t threads) {
    for (size_t i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkerPool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  size_t size() const { return threads_.size(); }
  void Submit(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> l(mu_);
      tasks_.push_back(std::move(task));
    }
    cv_.notify_one();
  }
  // Blocks until every task submitted before the call has finished (and any
  // submitted meanwhile: callers that need a barrier stop submitting first).
  void WaitIdle() {
    std::unique_lock<std::mutex> l(mu_);
    idle_cv_.wait(l, [this] { return tasks_.empty() && running_ == 0; });
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [this] { return stop_ || !tasks_.empty(); });
        if (tasks_.empty()) return;
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

  std::mutex mu_;  // guards tasks_, running_, stop_
  std::condition_variable cv_;
  std::condition_variable idle_cv_;  // signalled when the pool goes idle
  std::deque<std::function<void()>> tasks_;
  size_t running_ = 0;  // tasks taken off the queue and not yet finished
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Counts outstanding tasks; Wait() blocks until all called Done().
class TaskGroup {
 public:
  void Add(int n = 1) {
    std::lock_guard<std::mutex> l(mu_);
    pending_ += n;
  }
  void Done() {
    std::lock_guard<std::mutex> l(mu_);
    if (--pending_ == 0) cv_.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return pending_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
};

}  // namespace spillway
