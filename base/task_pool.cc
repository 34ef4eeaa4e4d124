// The shared worker pool behind ParallelFor (task_pool.h).
//
// One queue of loops guarded by one mutex. A loop hands out indices through
// an atomic counter, so the caller and any number of workers can claim work
// from it without the lock; the lock only guards the queue itself. Workers
// start lazily, on the first ParallelFor, and are joined at exit.
#include "base/task_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace spillway {
namespace {

// One ParallelFor call. Shared with the workers that picked it up, so it
// outlives the call if a worker is still between claiming an index past the
// end and dropping its reference; `fn` is only called for claimed indices < n,
// all of which finish before ParallelFor returns.
struct Loop {
  const std::function<void(size_t)>* fn = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  std::atomic<size_t> done{0};
  std::mutex mu;               // pairs with `finished`
  std::condition_variable finished;
};

class TaskPool {
 public:
  TaskPool() {
    unsigned hw = std::thread::hardware_concurrency();
    size_t workers = hw > 1 ? std::min<size_t>(hw - 1, 63) : 0;
    for (size_t i = 0; i < workers; ++i) threads_.emplace_back([this] { WorkerMain(); });
  }

  ~TaskPool() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }

  size_t width() const { return threads_.size() + 1; }

  void Run(size_t n, const std::function<void(size_t)>& fn) {
    if (n == 0) return;
    if (threads_.empty() || n == 1) {
      for (size_t i = 0; i < n; ++i) fn(i);
      return;
    }
    auto loop = std::make_shared<Loop>();
    loop->fn = &fn;
    loop->n = n;
    {
      std::lock_guard<std::mutex> l(mu_);
      queue_.push_back(loop);
    }
    wake_.notify_all();
    Work(*loop);
    Drop(loop);
    std::unique_lock<std::mutex> l(loop->mu);
    loop->finished.wait(l, [&] { return loop->done.load() == n; });
  }

 private:
  // Claims and runs indices until the loop has none left.
  static void Work(Loop& loop) {
    for (;;) {
      size_t i = loop.next.fetch_add(1);
      if (i >= loop.n) return;
      (*loop.fn)(i);
      if (loop.done.fetch_add(1) + 1 == loop.n) {
        // Taking the lock orders this notify after the waiter's predicate check.
        std::lock_guard<std::mutex> l(loop.mu);
        loop.finished.notify_all();
      }
    }
  }

  // Removes an exhausted loop from the queue so no worker picks it up again.
  void Drop(const std::shared_ptr<Loop>& loop) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = std::find(queue_.begin(), queue_.end(), loop);
    if (it != queue_.end()) queue_.erase(it);
  }

  void WorkerMain() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      wake_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      std::shared_ptr<Loop> loop = queue_.front();
      l.unlock();
      Work(*loop);
      Drop(loop);
      l.lock();
    }
  }

  std::mutex mu_;  // guards queue_ and stop_
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Loop>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;  // fixed after construction
};

TaskPool& Pool() {
  static TaskPool pool;
  return pool;
}

}  // namespace

void ParallelFor(size_t n, const std::function<void(size_t)>& fn) { Pool().Run(n, fn); }

size_t ParallelWidth() { return Pool().width(); }

}  // namespace spillway
