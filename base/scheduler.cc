// ThreadScheduler over the shared thread pool; ManualScheduler's queue.
#include "base/scheduler.h"

#include "base/thread_pool.h"

namespace spillway {

ThreadScheduler::ThreadScheduler(size_t threads) : pool_(std::make_unique<ThreadPool>(threads)) {}

ThreadScheduler::~ThreadScheduler() = default;

void ThreadScheduler::Submit(std::function<void()> task) { pool_->Submit(std::move(task)); }

void ManualScheduler::Submit(std::function<void()> task) {
  std::lock_guard<std::mutex> l(mu_);
  tasks_.push_back(std::move(task));
}

bool ManualScheduler::RunOne() {
  std::function<void()> task;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (tasks_.empty()) return false;
    task = std::move(tasks_.front());
    tasks_.pop_front();
  }
  task();
  return true;
}

size_t ManualScheduler::RunPending() {
  size_t n = 0;
  while (RunOne()) ++n;
  return n;
}

size_t ManualScheduler::queued() const {
  std::lock_guard<std::mutex> l(mu_);
  return tasks_.size();
}

}  // namespace spillway
