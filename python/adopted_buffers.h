// Buffer exports the engine adopted (Engine::PutHostAllocation) and the
// thread that releases them. Included by spillway_module.cc only.
//
// GIL rules (docs/python.md, "live objects"):
//  - put_adopted takes a writable, contiguous buffer export of the value
//    (a Py_buffer: it holds a reference on the exporter, e.g. the ndarray)
//    with the GIL held, and releases the GIL for the engine call.
//  - The engine drops adopted objects on any of its threads (the mover after
//    a demotion commits, an eraser, the last Handle's owner) holding no
//    engine lock. Its release callback must not block, and taking the GIL on
//    the mover's thread would stall every move behind Python. So the callback
//    only queues the export (a mutex, never the GIL); the releaser thread
//    takes the GIL and releases queued exports in batches.
//  - At interpreter exit (atexit), Stop() drains the queue and joins the
//    thread with the GIL released; exports queued after that are leaked
//    rather than touched during finalization.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace spillway {

class BufferReleaser {
 public:
  // Leaked on purpose: engines may release after module teardown began.
  static BufferReleaser& Get() {
    static BufferReleaser* r = new BufferReleaser();
    return *r;
  }

  // Any thread, GIL held or not. Never blocks on Python.
  void Push(Py_buffer* view) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;  // finalizing: leak it
    queue_.push_back(view);
    if (!started_) {
      started_ = true;
      thread_ = std::thread([this] { Run(); });
    }
    cv_.notify_one();
  }

  // REQUIRES: the GIL held (atexit). Releases what is queued and stops the thread.
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_) return;
      stopped_ = true;
      cv_.notify_one();
    }
    if (thread_.joinable()) {
      pybind11::gil_scoped_release nogil;
      thread_.join();
    }
    std::vector<Py_buffer*> rest;
    {
      std::lock_guard<std::mutex> l(mu_);
      rest.swap(queue_);
    }
    for (Py_buffer* v : rest) Release(v);
  }

  // Exports queued and not yet released (tests).
  size_t pending() {
    std::lock_guard<std::mutex> l(mu_);
    return queue_.size();
  }

 private:
  BufferReleaser() = default;

  static void Release(Py_buffer* v) {
    PyBuffer_Release(v);
    delete v;
  }

  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [this] { return stopped_ || !queue_.empty(); });
      if (stopped_) return;  // Stop() releases the rest with the GIL it holds
      std::vector<Py_buffer*> batch;
      batch.swap(queue_);
      l.unlock();
      {
        pybind11::gil_scoped_acquire gil;
        for (Py_buffer* v : batch) Release(v);
      }
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Py_buffer*> queue_;
  bool started_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace spillway
