// Shared by the native module's files (spillway_module.cc: the bindings;
// module_common.cc: exceptions, keys and buffers; engine_calls.cc: what the
// Engine methods do): the exception types, the holders of pinned objects and
// exported buffers, and PyEngine, the Python Engine's state.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "python/device_values.h"
#include "spillway/engine.h"
#include "spillway/status.h"
#include "tiers/io/fault_file_io.h"

namespace py = pybind11;

namespace spillway::pymod {

// ---- exceptions -------------------------------------------------------------

struct ExceptionTypes {
  PyObject* error = nullptr;          // spillway.Error: base of all below
  PyObject* not_found = nullptr;      // NotFoundError(Error, KeyError)
  PyObject* no_space = nullptr;       // NoSpaceError(Error, MemoryError)
  PyObject* io_error = nullptr;       // StorageIOError(Error, OSError)
  PyObject* corruption = nullptr;     // CorruptionError(Error)
  PyObject* invalid = nullptr;        // InvalidArgumentError(Error, ValueError)
  PyObject* not_supported = nullptr;  // NotSupportedError(Error, NotImplementedError)
  PyObject* busy = nullptr;           // BusyError(Error, RuntimeError)
  PyObject* closed = nullptr;         // EngineClosedError(Error, ValueError)
};
extern ExceptionTypes g_exc;  // set once by the module init

PyObject* NewException(py::module_& m, const char* name, const char* doc, std::initializer_list<PyObject*> bases);
[[noreturn]] void Raise(PyObject* type, const std::string& message);
// Raises the Python exception for a failed Status.
[[noreturn]] void RaiseStatus(const Status& s);
void Check(const Status& s);

// ---- keys and buffers -------------------------------------------------------

// str (UTF-8) or any bytes-like object.
std::string KeyFrom(py::handle key);

// A buffer-protocol export held for the duration of a put. Releasing needs the GIL.
class HeldBuffer {
 public:
  HeldBuffer() = default;
  HeldBuffer(const HeldBuffer&) = delete;
  HeldBuffer& operator=(const HeldBuffer&) = delete;
  ~HeldBuffer() {
    if (held_) PyBuffer_Release(&view_);
  }
  // Exports `obj` contiguously; false (Python error cleared) when it cannot.
  bool Acquire(PyObject* obj) {
    if (PyObject_GetBuffer(obj, &view_, PyBUF_ANY_CONTIGUOUS) != 0) {
      PyErr_Clear();
      return false;
    }
    held_ = true;
    return true;
  }
  std::span<const std::byte> span() const {
    return {static_cast<const std::byte*>(view_.buf), static_cast<size_t>(view_.len)};
  }
  bool held() const { return held_; }

 private:
  Py_buffer view_{};
  bool held_ = false;
};

// One object's buffers, resolved from Python values while holding the GIL.
struct PutBuffers {
  std::vector<std::unique_ptr<HeldBuffer>> held;  // host exports (released with the GIL held)
  std::vector<py::object> keep;                   // contiguous copies of strided values
  std::vector<std::span<const std::byte>> spans;
  bool any_host = false;
  bool any_device = false;
};

// Device pointer and byte size from __cuda_array_interface__ (version 2 or 3).
std::span<const std::byte> DeviceSpan(py::handle obj, py::handle cai_obj);
// Adds one value (a host buffer or a device array) to `out`.
void AddBuffer(PutBuffers& out, py::handle item);
Where WhereFrom(const std::string& s);

// ---- engine references ------------------------------------------------------

// Drops a reference to an engine. The last one destroys the engine, which
// waits for its mover, whose materializer may be waiting for the GIL
// (PyExternal::Materialize): so never with the GIL held, wherever the
// reference goes (close(), a collected Engine, the last view of a get()).
void DropEngine(std::shared_ptr<Engine>& e);

// ---- pinned objects ---------------------------------------------------------

// A Handle and the engine it belongs to. Member order matters: the handle is
// released before the engine reference is dropped.
struct Pinned {
  std::shared_ptr<Engine> engine;
  Handle handle;
  ~Pinned() {
    handle.Release();
    DropEngine(engine);
  }
};

// One host buffer of a pinned object, exported by the buffer protocol
// (read-only unless the caller asked for writable views).
struct HostBuffer {
  std::shared_ptr<Pinned> pin;
  size_t index = 0;
  bool writable = false;
};

// One device buffer of a pinned object; exported by __cuda_array_interface__ as
// a read-only 1-D uint8 array (CuPy: cupy.asarray(buf)).
struct DeviceBuffer {
  std::shared_ptr<Pinned> pin;
  size_t index = 0;
  bool writable = false;  // PyTorch refuses read-only interfaces; CuPy ignores the flag
  std::span<const std::byte> span() const { return pin->handle.buffer(index); }
};

// ---- the engine -------------------------------------------------------------

class PyEngine {
 public:
  explicit PyEngine(std::shared_ptr<Engine> e) : engine_(std::move(e)) {}
  ~PyEngine() { DropEngine(engine_); }
  PyEngine(const PyEngine&) = delete;
  PyEngine& operator=(const PyEngine&) = delete;

  // A reference that keeps the engine alive across a GIL-free call, even if
  // another thread closes it meanwhile.
  std::shared_ptr<Engine> engine() const {
    if (!engine_) Raise(g_exc.closed, "the engine is closed");
    return engine_;
  }
  bool closed() const { return engine_ == nullptr; }
  // Drops this object's reference; the engine shuts down now, or when the last
  // buffer returned by get() is released.
  void Close() {
    std::shared_ptr<Engine> e = std::move(engine_);
    faults_.reset();
    DropEngine(e);
  }
  // Engine(..., faults=SPEC) only: the wrapper whose faults set_faults() changes.
  void set_faults(std::shared_ptr<FaultFileIo> io) { faults_ = std::move(io); }
  void SetFaultSpec(const std::string& text) {
    if (!faults_) Raise(PyExc_RuntimeError, "set_faults: this engine was not opened with faults=...");
    StatusOr<FaultSpec> spec = ParseFaultSpec(text);
    if (!spec.ok()) RaiseStatus(spec.status());
    faults_->SetSpec(*spec);
  }

 private:
  std::shared_ptr<Engine> engine_;
  std::shared_ptr<FaultFileIo> faults_;
};

// ---- what the Engine methods do (engine_calls.cc) ---------------------------

// The config (a path, a dict or YAML text) as the loader takes it: text and
// source name, or a file path.
struct ConfigSource {
  std::string text;
  std::string source;
  bool from_file = false;
};

ConfigSource SourceOf(py::object config);
std::string ProfileOf(py::object profile);
std::unique_ptr<PyEngine> OpenFrom(const ConfigSource& src, const std::string& profile, bool background_mover,
                                   py::object vars, py::object scratch_path, const std::string& faults = {});
std::unique_ptr<PyEngine> OpenEngine(py::object config, py::object profile, bool background_mover, py::object vars,
                                     py::object scratch_path, const std::string& faults);
py::dict ValidateConfigDict(py::object config, py::object profile, py::object vars, py::object scratch_path,
                            bool check_filesystem);
void Put(PyEngine& self, py::handle key, py::handle value, const std::string& memory);
bool PutAdopted(PyEngine& self, py::handle key, py::handle value);
void PutExternal(PyEngine& self, py::handle key, uint64_t nbytes, py::handle value, py::handle materialize);
py::object GetExternal(PyEngine& self, py::handle key);
std::shared_ptr<Pinned> Pin(PyEngine& self, py::handle key, const std::string& where);
py::list Buffers(const std::shared_ptr<Pinned>& pin, bool copy, bool writable);
std::vector<std::string> KeyList(py::handle keys);
py::list Acquire(PyEngine& self, py::handle keys, const std::string& where, bool writable);
py::object StatsDict(PyEngine& self);
py::dict CheckDevicesDict(PyEngine& self);
py::list TierList(PyEngine& self);

}  // namespace spillway::pymod
