// Buffer exports the engine adopted (Engine::PutHostAllocation), references
// to live objects it held (Engine::PutExternal) and the exports of their
// materialized frames, and the thread that releases them all. Included by
// spillway_module.cc only.
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
  void Push(Py_buffer* view) { Queue(Item{view, nullptr}); }
  // A strong reference to drop (Py_DECREF) on the releaser thread.
  void PushRef(PyObject* ref) {
    if (ref != nullptr) Queue(Item{nullptr, ref});
  }
  // False once Stop() ran (the interpreter is exiting): nothing may take
  // the GIL any more.
  bool running() {
    std::lock_guard<std::mutex> l(mu_);
    return !stopped_;
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
    std::vector<Item> rest;
    {
      std::lock_guard<std::mutex> l(mu_);
      rest.swap(queue_);
    }
    for (const Item& v : rest) Release(v);
  }

  // Exports queued and not yet released (tests).
  size_t pending() {
    std::lock_guard<std::mutex> l(mu_);
    return queue_.size();
  }

 private:
  struct Item {
    Py_buffer* view;
    PyObject* ref;
  };

  void Queue(Item item) {
    std::lock_guard<std::mutex> l(mu_);
    if (stopped_) return;  // finalizing: leak it
    queue_.push_back(item);
    if (!started_) {
      started_ = true;
      thread_ = std::thread([this] { Run(); });
    }
    cv_.notify_one();
  }

  BufferReleaser() = default;

  static void Release(const Item& item) {
    if (item.view != nullptr) {
      PyBuffer_Release(item.view);
      delete item.view;
    }
    Py_XDECREF(item.ref);
  }

  void Run() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [this] { return stopped_ || !queue_.empty(); });
      if (stopped_) return;  // Stop() releases the rest with the GIL it holds
      std::vector<Item> batch;
      batch.swap(queue_);
      l.unlock();
      {
        pybind11::gil_scoped_acquire gil;
        for (const Item& v : batch) Release(v);
      }
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Item> queue_;
  bool started_ = false;
  bool stopped_ = false;
  std::thread thread_;
};

}  // namespace spillway
