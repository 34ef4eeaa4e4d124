// Scheduler: where the engine's background work runs. The mover submits its
// demotion batches here instead of owning threads, so a test can inject a
// ManualScheduler and run the work one task at a time on its own thread.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace spillway {

class ThreadPool;

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Runs `task` later, possibly concurrently with other tasks. Never runs it
  // on the caller's thread before returning (a task may Submit the next).
  virtual void Submit(std::function<void()> task) = 0;
  // True when submitted tasks run without anyone stepping them. False for a
  // ManualScheduler: a caller that would wait for a task must then do the
  // work itself (the engine demotes on the caller's thread), or it would
  // wait for a test that is not stepping.
  virtual bool background() const = 0;
  // Runs queued tasks on the caller's thread, including tasks they submit,
  // until none is queued; returns how many ran. Background schedulers run
  // nothing and return 0.
  virtual size_t RunPending() { return 0; }
};

// Tasks run on a fixed set of threads.
class ThreadScheduler final : public Scheduler {
 public:
  explicit ThreadScheduler(size_t threads);
  ~ThreadScheduler() override;  // finishes every queued task
  void Submit(std::function<void()> task) override;
  bool background() const override { return true; }

 private:
  std::unique_ptr<ThreadPool> pool_;
};

// Tasks run only when the owner steps them: deterministic tests.
class ManualScheduler final : public Scheduler {
 public:
  void Submit(std::function<void()> task) override;
  bool background() const override { return false; }
  size_t RunPending() override;
  // Runs the oldest queued task; false when none is queued.
  bool RunOne();
  size_t queued() const;

 private:
  mutable std::mutex mu_;  // guards tasks_
  std::deque<std::function<void()>> tasks_;
};

}  // namespace spillway
