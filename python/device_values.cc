// spillway._spillway.device: the native half of spillway.device.
//
//  - adopt(engine, key, ptr, nbytes, owner): Engine::PutDeviceAllocation over a
//    caller's device allocation, no copy. The engine owns the memory from then
//    on; `owner` (the Python object that keeps the allocation alive: a CuPy
//    Memory, a torch storage, the array itself) is referenced until the engine
//    calls the release callback (erase, overwrite, demotion off the device).
//    Returns an AllocationToken whose `alive` turns False at that moment.
//  - pin(engine, key, where): a DevicePin (Handle) whose buffers' pointers the
//    Python side wraps in __cuda_array_interface__ views; the object stays
//    pinned (not moved, not freed) while the pin lives.
//  - allocate(engine, nbytes, stream): Engine::AllocateDevice for CuPy's
//    allocator hook; spillway_torch_malloc/free (C symbols exported from this
//    .so) for torch.cuda.memory.CUDAPluggableAllocator. Both demote on failure.
//
// The GIL and the release callback: the engine calls release on whatever
// thread lets go of the allocation (a mover thread, a caller inside Put or
// Erase with the GIL released, a Handle released under the GIL), possibly while
// it holds engine locks. Taking the GIL there could deadlock against a Python
// thread that holds the GIL and waits for such a lock, and running arbitrary
// Python (the owner's finalizer) inside the engine is unsafe. So the callback
// never touches Python: it queues the owner, and the reference is dropped at a
// safe point: by a releaser thread that takes the GIL holding no engine lock,
// or on a thread that holds the GIL between engine calls (drain(), and every
// allocation that failed once, so that memory the engine let go of is really
// free before the retry). At interpreter exit the releaser stops and owners
// released later are leaked (the process is ending).
#include "python/device_values.h"

#include <pybind11/stl.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/cuda_runtime.h"
#include "spillway/engine.h"

namespace py = pybind11;

namespace spillway {
namespace {

// ---- deferred reference drops ----------------------------------------------

class Releaser {
 public:
  // Any thread, GIL or not, engine locks or not: never blocks on Python.
  void Push(PyObject* owner) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_) {
        ++leaked_;  // interpreter exit: dropping it now is unsafe
        return;
      }
      queue_.push_back(owner);
    }
    cv_.notify_all();
  }
  // REQUIRES: the GIL. Drops every queued reference now.
  void Drain() {
    std::vector<PyObject*> batch;
    {
      std::lock_guard<std::mutex> l(mu_);
      batch.swap(queue_);
    }
    for (PyObject* o : batch) Py_DECREF(o);
    if (!batch.empty()) {
      std::lock_guard<std::mutex> l(mu_);
      dropped_ += batch.size();
    }
    done_cv_.notify_all();
  }
  // From a thread that may or may not hold the GIL: drains here when it does,
  // else waits (up to `ms`) for the releaser thread to empty the queue.
  void Flush(int ms) {
    if (PyGILState_Check()) {
      Drain();
      return;
    }
    std::unique_lock<std::mutex> l(mu_);
    cv_.notify_all();
    done_cv_.wait_for(l, std::chrono::milliseconds(ms), [&] { return queue_.empty() || stopped_; });
  }
  void Start() {
    std::lock_guard<std::mutex> l(mu_);
    if (thread_.joinable() || stopped_) return;
    thread_ = std::thread([this] { Loop(); });
  }
  // REQUIRES: the GIL (atexit). Joins the thread with the GIL released.
  void Stop() {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (stopped_) return;
      stopped_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) {
      py::gil_scoped_release nogil;
      thread_.join();
    }
    Drain();
  }
  py::dict Counts() {
    std::lock_guard<std::mutex> l(mu_);
    py::dict d;
    d["queued"] = queue_.size();
    d["dropped"] = dropped_;
    d["leaked"] = leaked_;
    return d;
  }

 private:
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return stopped_ || !queue_.empty(); });
        if (stopped_) return;
      }
      if (PythonFinalizing()) return;
      PyGILState_STATE g = PyGILState_Ensure();
      Drain();
      PyGILState_Release(g);
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::vector<PyObject*> queue_;
  uint64_t dropped_ = 0, leaked_ = 0;
  bool stopped_ = false;
  std::thread thread_;
};

Releaser& TheReleaser() {
  static Releaser* r = new Releaser;  // never destroyed: outlives every engine thread
  return *r;
}

// ---- errors ----------------------------------------------------------------

py::module_* g_mod = nullptr;  // the main module, for its exception types

[[noreturn]] void RaiseStatus(const Status& s) {
  const char* name = "Error";
  switch (s.code()) {
    case StatusCode::kNotFound: name = "NotFoundError"; break;
    case StatusCode::kNoSpace: name = "NoSpaceError"; break;
    case StatusCode::kIOError: name = "StorageIOError"; break;
    case StatusCode::kCorruption: name = "CorruptionError"; break;
    case StatusCode::kInvalidArgument: name = "InvalidArgumentError"; break;
    case StatusCode::kNotSupported: name = "NotSupportedError"; break;
    case StatusCode::kBusy: name = "BusyError"; break;
    default: break;
  }
  PyErr_SetString(g_mod->attr(name).ptr(), s.ToString().c_str());
  throw py::error_already_set();
}

std::string KeyOf(py::handle key) {
  if (PyUnicode_Check(key.ptr())) return key.cast<std::string>();
  if (PyBytes_Check(key.ptr())) return std::string(PyBytes_AS_STRING(key.ptr()), PyBytes_GET_SIZE(key.ptr()));
  PyErr_SetString(PyExc_TypeError, "key must be str or bytes");
  throw py::error_already_set();
}

// ---- adoption ----------------------------------------------------------------

struct TokenState {
  std::atomic<bool> alive{true};  // the engine still holds the allocation
};
struct AllocationToken {
  std::shared_ptr<TokenState> state;
  uint64_t ptr = 0, nbytes = 0;
};

AllocationToken Adopt(const std::shared_ptr<Engine>& e, const std::string& key, uintptr_t ptr, uint64_t nbytes,
                      py::handle owner, std::vector<uint64_t> sizes) {
  if (sizes.empty()) sizes.push_back(nbytes);
  uint64_t sum = 0;
  for (uint64_t n : sizes) sum += n;
  if (sum != nbytes) {
    PyErr_SetString(PyExc_ValueError, "buffer sizes do not add up to nbytes");
    throw py::error_already_set();
  }
  auto state = std::make_shared<TokenState>();
  auto called = std::make_shared<std::atomic<bool>>(false);
  PyObject* o = owner.ptr();
  Py_INCREF(o);  // dropped by the releaser once the engine lets go
  auto release = [state, called, o](void*) {
    state->alive.store(false);
    called->store(true);
    TheReleaser().Push(o);
  };
  Status s;
  {
    py::gil_scoped_release nogil;
    s = e->PutDeviceAllocation(key, reinterpret_cast<void*>(ptr), std::move(sizes), std::move(release));
  }
  if (!s.ok()) {
    if (!called->load()) Py_DECREF(o);  // refused before the engine wrapped it
    TheReleaser().Drain();
    RaiseStatus(s);
  }
  return AllocationToken{state, ptr, nbytes};
}

// ---- pins --------------------------------------------------------------------

struct DevicePin {
  std::shared_ptr<Engine> engine;
  Handle handle;
  ~DevicePin() { handle.Release(); }  // before the engine reference goes
};

std::shared_ptr<DevicePin> Pin(const std::shared_ptr<Engine>& e, py::handle key, const std::string& where) {
  const std::string k = KeyOf(key);
  Where w = where == "device" ? Where::kDevice : where == "host" ? Where::kHost : Where::kAny;
  auto pin = std::make_shared<DevicePin>();
  pin->engine = e;
  StatusOr<Handle> h = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;
    h = e->Get(k, w);
  }
  if (!h.ok() && h.status().IsNoSpace() && w == Where::kDevice) {
    TheReleaser().Drain();  // memory the engine let go of becomes free; retry once
    py::gil_scoped_release nogil;
    h = e->Get(k, w);
  }
  if (!h.ok()) {
    if (h.status().IsNotFound()) {
      PyErr_SetObject(g_mod->attr("NotFoundError").ptr(), key.ptr());
      throw py::error_already_set();
    }
    RaiseStatus(h.status());
  }
  pin->handle = std::move(*h);
  return pin;
}

// ---- allocators ----------------------------------------------------------------

// Engine device memory handed to a library; back to the engine pool when the
// last reference goes, after the stream that used it is idle.
struct DeviceMemory {
  std::shared_ptr<void> mem;
  uint64_t nbytes = 0;
  uintptr_t stream = 0;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (!mem) return;
    if (PyGILState_Check()) {
      py::gil_scoped_release nogil;
      (void)cuda::SynchronizeForeignStream(stream);
      mem.reset();
    } else {
      (void)cuda::SynchronizeForeignStream(stream);
      mem.reset();
    }
  }
};

// AllocateDevice with the deferred releases in mind: the engine's own retry
// runs before queued owners are dropped, so on NoSpace the queue is flushed
// and the allocation tried once more.
StatusOr<std::shared_ptr<void>> AllocateWithFlush(Engine& e, uint64_t bytes, bool holds_gil) {
  StatusOr<std::shared_ptr<void>> m = Status::Internal("not allocated");
  auto attempt = [&] {
    if (holds_gil) {
      py::gil_scoped_release nogil;
      m = e.AllocateDevice(bytes);
    } else {
      m = e.AllocateDevice(bytes);
    }
  };
  attempt();
  if (!m.ok() && m.status().IsNoSpace()) {
    TheReleaser().Flush(2000);
    attempt();
  }
  return m;
}

std::unique_ptr<DeviceMemory> Allocate(const std::shared_ptr<Engine>& e, uint64_t nbytes, uintptr_t stream) {
  TheReleaser().Drain();
  auto m = AllocateWithFlush(*e, nbytes == 0 ? 1 : nbytes, true);
  if (!m.ok()) RaiseStatus(m.status());
  auto out = std::make_unique<DeviceMemory>();
  out->mem = std::move(*m);
  out->nbytes = nbytes;
  out->stream = stream;
  return out;
}

// PyTorch's pluggable allocator state: one engine per process.
struct TorchState {
  std::mutex mu;
  std::shared_ptr<Engine> engine;
  std::unordered_map<void*, std::shared_ptr<void>> live;
  uint64_t allocs = 0, failures = 0;
};
TorchState& Torch() {
  static TorchState* t = new TorchState;  // torch may free after module teardown
  return *t;
}

}  // namespace

void RegisterDeviceValues(py::module_& m, std::function<std::shared_ptr<Engine>(py::handle)> engine_of) {
  g_mod = new py::module_(m);  // leaked: must not be released after the interpreter is gone
  py::module_ d = m.def_submodule("device", "Device values: adoption, device pins, engine-backed allocators");
  TheReleaser().Start();
  py::module_::import("atexit").attr("register")(py::cpp_function([] { TheReleaser().Stop(); }));

  py::class_<AllocationToken>(d, "AllocationToken", "An adopted allocation; alive while the engine holds it")
      .def_property_readonly("alive", [](const AllocationToken& t) { return t.state->alive.load(); })
      .def_readonly("ptr", &AllocationToken::ptr)
      .def_readonly("nbytes", &AllocationToken::nbytes);

  py::class_<DevicePin, std::shared_ptr<DevicePin>>(d, "DevicePin", "A pinned object (its Handle)")
      .def_property_readonly("nbytes", [](const DevicePin& p) { return p.handle.size(); })
      .def_property_readonly("num_buffers", [](const DevicePin& p) { return p.handle.num_buffers(); })
      .def_property_readonly("where", [](const DevicePin& p) {
        return p.handle.where() == Where::kDevice ? "device" : "host";
      })
      .def_property_readonly("ptr", [](const DevicePin& p) {
        return reinterpret_cast<uintptr_t>(p.handle.buffer(0).data());
      })
      .def("buffer_ptr", [](const DevicePin& p, size_t i) {
        if (i >= p.handle.num_buffers()) throw py::index_error("buffer index");
        return reinterpret_cast<uintptr_t>(p.handle.buffer(i).data());
      })
      .def("release", [](DevicePin& p) { p.handle.Release(); }, "Unpins now.");

  py::class_<DeviceMemory>(d, "DeviceMemory", "Device memory from the engine pool (Engine::AllocateDevice)")
      .def_property_readonly("ptr", [](const DeviceMemory& m) { return reinterpret_cast<uintptr_t>(m.mem.get()); })
      .def_readonly("nbytes", &DeviceMemory::nbytes);

  d.def(
      "adopt",
      [engine_of](py::handle eng, py::handle key, uintptr_t ptr, uint64_t nbytes, py::handle owner,
                  std::vector<uint64_t> sizes) {
        TheReleaser().Drain();
        return Adopt(engine_of(eng), KeyOf(key), ptr, nbytes, owner, std::move(sizes));
      },
      py::arg("engine"), py::arg("key"), py::arg("ptr"), py::arg("nbytes"), py::arg("owner"),
      py::arg("buffer_sizes") = std::vector<uint64_t>{},
      "Stores the device allocation [ptr, ptr+nbytes) under key without a copy; `owner` is referenced until "
      "the engine lets go. REQUIRES: every write to it is finished (stream synchronized).");
  d.def(
      "pin",
      [engine_of](py::handle eng, py::handle key, const std::string& where) {
        TheReleaser().Drain();
        return Pin(engine_of(eng), key, where);
      },
      py::arg("engine"), py::arg("key"), py::arg("where") = "device");
  d.def(
      "allocate",
      [engine_of](py::handle eng, uint64_t nbytes, uintptr_t stream) { return Allocate(engine_of(eng), nbytes, stream); },
      py::arg("engine"), py::arg("nbytes"), py::arg("stream") = 0,
      "Device memory from the engine's pool; on failure the engine demotes objects and retries. `stream`: the "
      "stream the caller will use it on (synchronized before the memory goes back).");
  d.def("drain", [] { TheReleaser().Drain(); }, "Drops the references the engine let go of, now.");
  d.def("release_counts", [] { return TheReleaser().Counts(); });
  d.def(
      "set_torch_engine",
      [engine_of](py::handle eng) {
        std::shared_ptr<Engine> e = eng.is_none() ? nullptr : engine_of(eng);
        std::lock_guard<std::mutex> l(Torch().mu);
        Torch().engine = std::move(e);
      },
      py::arg("engine"), "The engine spillway_torch_malloc allocates from (None: none; allocations then fail).");
  d.def("torch_counts", [] {
    std::lock_guard<std::mutex> l(Torch().mu);
    py::dict r;
    r["live"] = Torch().live.size();
    r["allocs"] = Torch().allocs;
    r["failures"] = Torch().failures;
    return r;
  });
}

}  // namespace spillway

// ---- PyTorch's CUDAPluggableAllocator entry points ---------------------------
// torch.cuda.memory.CUDAPluggableAllocator(<this .so>, "spillway_torch_malloc",
// "spillway_torch_free"). Called by PyTorch with or without the GIL.
extern "C" __attribute__((visibility("default"))) void* spillway_torch_malloc(ssize_t size, int device, void* stream) {
  (void)device;  // the engine's first gpu tier's device
  using namespace spillway;
  std::shared_ptr<Engine> e;
  {
    std::lock_guard<std::mutex> l(Torch().mu);
    e = Torch().engine;
  }
  if (!e) return nullptr;
  auto m = AllocateWithFlush(*e, size <= 0 ? 1 : static_cast<uint64_t>(size), false);
  std::lock_guard<std::mutex> l(Torch().mu);
  if (!m.ok()) {
    ++Torch().failures;
    return nullptr;
  }
  (void)stream;  // pool memory is ready when AllocateDevice returns
  void* p = m->get();
  Torch().live.emplace(p, std::move(*m));
  ++Torch().allocs;
  return p;
}

extern "C" __attribute__((visibility("default"))) void spillway_torch_free(void* ptr, ssize_t size, int device,
                                                                           void* stream) {
  (void)size, (void)device;
  using namespace spillway;
  std::shared_ptr<void> mem;
  {
    std::lock_guard<std::mutex> l(Torch().mu);
    auto it = Torch().live.find(ptr);
    if (it == Torch().live.end()) return;
    mem = std::move(it->second);
    Torch().live.erase(it);
  }
  // PyTorch's kernels on `stream` may still use the memory.
  (void)cuda::SynchronizeForeignStream(reinterpret_cast<uintptr_t>(stream));
  mem.reset();
}
