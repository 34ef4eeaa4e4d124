// spillway._spillway: the native half of the Python module `spillway`.
//
// Exposes Engine (open from a YAML path, YAML text or a dict), put/get/erase/
// contains/flush/stats, and maps Status codes to Python exceptions. The
// pure-Python package (python/spillway/) re-exports it and adds the Dask store.
//
// Memory contract:
//  - put() reads every buffer in place through the buffer protocol (no copy on
//    the Python side; the engine copies once into its tier). Objects exposing
//    __cuda_array_interface__ are passed as device pointers (PutOptions
//    memory = kDevice): a gpu tier keeps them on the device, a chain without
//    one gets a host copy; a build without CUDA answers NotSupported, raised
//    as spillway.NotSupportedError.
//  - get() returns read-only memoryviews over the pinned object itself: each
//    view owns a reference to a Pinned (the Handle), which owns a reference to
//    the engine, so the bytes stay valid and unmoved for as long as any view
//    (or an array built on one) lives, and the engine is destroyed only after
//    its last Handle is released (handle.h's REQUIRES).
//  - get(..., writable=True) exports the same bytes writable. For callers that
//    hand them to deserializers wanting writeable arrays (Dask's pickle and
//    NumPy deserializers copy read-only frames), so no copy is made. Host tier
//    memory is plain heap memory; a write to an object read from a memory tier
//    is seen by later readers of that object, one to an object read from a
//    file tier only by this reader. The engine checksums its own copy when it
//    demotes, so writes never fail a checksum; a write racing a demotion may
//    or may not reach the demoted copy. The same flag marks device buffers'
//    __cuda_array_interface__ writable (PyTorch refuses read-only ones).
//  - The GIL is released around every engine call, and wherever the module
//    may drop an engine's last reference (DropEngine): destroying an engine
//    waits for its materializer, which may be waiting for the GIL.
//  - put_external() hands the engine a live object (PyExternal): the mover's
//    materializer thread takes the GIL only inside PyExternal::Materialize,
//    holding no engine lock; references and exports are released by the
//    BufferReleaser thread, never on an engine thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "spillway/config_loader.h"
#include "spillway/engine.h"
#include "engine/stats_export.h"
#include "adopted_buffers.h"
#include "python/device_values.h"
#include "python/load_hooks.h"
#include "tiers/io/fault_file_io.h"
#include "spillway/version.h"

namespace py = pybind11;

namespace spillway {
namespace {

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
ExceptionTypes g_exc;

PyObject* NewException(py::module_& m, const char* name, const char* doc, std::initializer_list<PyObject*> bases) {
  py::tuple b(bases.size());
  size_t i = 0;
  for (PyObject* base : bases) b[i++] = py::reinterpret_borrow<py::object>(base);
  std::string qualified = std::string("spillway.") + name;
  PyObject* type = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, b.ptr(), nullptr);
  if (type == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(type));
  return type;
}

[[noreturn]] void Raise(PyObject* type, const std::string& message) {
  PyErr_SetString(type, message.c_str());
  throw py::error_already_set();
}

// Raises the Python exception for a failed Status.
[[noreturn]] void RaiseStatus(const Status& s) {
  PyObject* type = g_exc.error;
  switch (s.code()) {
    case StatusCode::kNotFound: type = g_exc.not_found; break;
    case StatusCode::kNoSpace: type = g_exc.no_space; break;
    case StatusCode::kIOError: type = g_exc.io_error; break;
    case StatusCode::kCorruption: type = g_exc.corruption; break;
    case StatusCode::kInvalidArgument: type = g_exc.invalid; break;
    case StatusCode::kNotSupported: type = g_exc.not_supported; break;
    case StatusCode::kBusy: type = g_exc.busy; break;
    default: break;
  }
  Raise(type, s.ToString());
}

void Check(const Status& s) {
  if (!s.ok()) RaiseStatus(s);
}

// ---- keys and buffers -------------------------------------------------------

// str (UTF-8) or any bytes-like object.
std::string KeyFrom(py::handle key) {
  if (PyUnicode_Check(key.ptr())) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(key.ptr(), &n);
    if (s == nullptr) throw py::error_already_set();
    return std::string(s, static_cast<size_t>(n));
  }
  if (PyBytes_Check(key.ptr())) {
    return std::string(PyBytes_AS_STRING(key.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(key.ptr())));
  }
  if (PyObject_CheckBuffer(key.ptr())) {
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(key).request();
    if (info.ndim > 1 && info.strides.back() != info.itemsize) Raise(PyExc_TypeError, "key buffer must be contiguous");
    return std::string(static_cast<const char*>(info.ptr), static_cast<size_t>(info.size * info.itemsize));
  }
  Raise(PyExc_TypeError, std::string("key must be str or bytes, not ") + Py_TYPE(key.ptr())->tp_name);
}

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
// Requires C-contiguous data. Synchronizes the producer's stream (v3 'stream'
// key) through spillway._cuda before the engine reads the memory.
std::span<const std::byte> DeviceSpan(py::handle obj, py::handle cai_obj) {
  if (!py::isinstance<py::dict>(cai_obj)) Raise(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
  py::dict cai = py::reinterpret_borrow<py::dict>(cai_obj);
  const std::string type_name = Py_TYPE(obj.ptr())->tp_name;
  if (cai.contains("mask") && !cai["mask"].is_none()) {
    Raise(PyExc_ValueError, "masked CUDA arrays (" + type_name + ") are not supported");
  }
  py::tuple shape = cai["shape"].cast<py::tuple>();
  std::string typestr = cai["typestr"].cast<std::string>();
  if (typestr.size() < 3) Raise(PyExc_ValueError, "bad typestr '" + typestr + "' in __cuda_array_interface__");
  const size_t itemsize = std::stoul(typestr.substr(2));
  size_t count = 1;
  for (py::handle d : shape) count *= d.cast<size_t>();
  if (cai.contains("strides") && !cai["strides"].is_none()) {
    py::tuple strides = cai["strides"].cast<py::tuple>();
    size_t expect = itemsize;
    for (ssize_t i = static_cast<ssize_t>(shape.size()) - 1; i >= 0; --i) {
      const size_t extent = shape[static_cast<size_t>(i)].cast<size_t>();
      if (extent > 1 && strides[static_cast<size_t>(i)].cast<size_t>() != expect) {
        Raise(PyExc_ValueError, "device array of type " + type_name +
                                    " is not C-contiguous; make a contiguous copy first (e.g. cupy.ascontiguousarray)");
      }
      expect *= extent;
    }
  }
  py::tuple data = cai["data"].cast<py::tuple>();
  const auto ptr = data[0].cast<uintptr_t>();
  if (cai.contains("stream") && !cai["stream"].is_none()) {
    py::module_::import("spillway._cuda").attr("synchronize_stream")(cai["stream"]);
  }
  return {reinterpret_cast<const std::byte*>(ptr), count * itemsize};
}

void AddBuffer(PutBuffers& out, py::handle item) {
  // Host buffers first: an object offering both (rare) is read on the host.
  // A device array that refuses the CPU export (CuPy raises TypeError) is read
  // through __cuda_array_interface__ below.
  const bool has_cai = PyObject_HasAttrString(item.ptr(), "__cuda_array_interface__");
  if (PyObject_CheckBuffer(item.ptr())) {
    auto hb = std::make_unique<HeldBuffer>();
    if (!hb->Acquire(item.ptr()) && has_cai) {
      out.spans.push_back(DeviceSpan(item, item.attr("__cuda_array_interface__")));
      out.any_device = true;
      return;
    }
    if (!hb->held()) {
      // Strided (non-contiguous) export: one contiguous copy is unavoidable.
      py::object copy = py::reinterpret_steal<py::object>(PyMemoryView_FromObject(item.ptr()));
      if (!copy) throw py::error_already_set();
      copy = copy.attr("tobytes")();
      if (!hb->Acquire(copy.ptr())) Raise(PyExc_BufferError, "cannot export a contiguous buffer");
      out.keep.push_back(std::move(copy));
    }
    out.spans.push_back(hb->span());
    out.held.push_back(std::move(hb));
    out.any_host = true;
    return;
  }
  if (has_cai) {
    out.spans.push_back(DeviceSpan(item, item.attr("__cuda_array_interface__")));
    out.any_device = true;
    return;
  }
  Raise(PyExc_TypeError, std::string("value must be a buffer-protocol object (bytes, bytearray, memoryview, "
                                     "numpy array), an object with __cuda_array_interface__, or a list of them; got ") +
                             Py_TYPE(item.ptr())->tp_name);
}

Where WhereFrom(const std::string& s) {
  if (s == "any" || s == "auto") return Where::kAny;
  if (s == "host") return Where::kHost;
  if (s == "device") return Where::kDevice;
  Raise(PyExc_ValueError, "where/memory must be 'any', 'host' or 'device', not '" + s + "'");
}

// ---- engine references ------------------------------------------------------

// Drops a reference to an engine. The last one destroys the engine, which
// waits for its mover, whose materializer may be waiting for the GIL
// (PyExternal::Materialize): so never with the GIL held, wherever the
// reference goes (close(), a collected Engine, the last view of a get()).
void DropEngine(std::shared_ptr<Engine>& e) {
  if (!e) return;
  // use_count() is exact here: every other holder that could drop its
  // reference concurrently is a Python thread, which needs the GIL we hold.
  if (e.use_count() == 1 && PyGILState_Check() && !PythonFinalizing()) {
    py::gil_scoped_release nogil;
    e.reset();
  } else {
    e.reset();
  }
}

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

// The config (a path, a dict or YAML text) as the loader takes it: text and
// source name, or a file path.
struct ConfigSource {
  std::string text;
  std::string source;
  bool from_file = false;
};

ConfigSource SourceOf(py::object config) {
  if (py::isinstance<py::dict>(config)) {
    // JSON is YAML: the loader's messages then point into this text.
    std::string text = py::module_::import("json").attr("dumps")(config, py::arg("indent") = 2).cast<std::string>();
    return {std::move(text), "<dict>", false};
  }
  if (py::isinstance<py::str>(config) || py::hasattr(config, "__fspath__")) {
    return {std::string(), py::module_::import("os").attr("fspath")(config).cast<std::string>(), true};
  }
  Raise(PyExc_TypeError, std::string("config must be a YAML file path or a dict, not ") + Py_TYPE(config.ptr())->tp_name);
}

std::string ProfileOf(py::object profile) { return profile.is_none() ? std::string() : profile.cast<std::string>(); }

void WarnAll(const std::vector<Diagnostic>& warnings) {
  if (warnings.empty()) return;
  py::module_ w = py::module_::import("warnings");
  for (const Diagnostic& d : warnings) w.attr("warn")(d.ToString(), py::module_::import("builtins").attr("UserWarning"), 2);
}

// An engine opened over a FaultFileIo (Engine(..., faults=SPEC), for tests):
// the wrapper lives exactly as long as the engine, which is destroyed first.
struct FaultyEngine {
  std::unique_ptr<FaultFileIo> io;
  std::unique_ptr<Engine> engine;
  ~FaultyEngine() { engine.reset(); }
};

std::unique_ptr<PyEngine> OpenFrom(const ConfigSource& src, const std::string& profile, bool background_mover,
                                   py::object vars, py::object scratch_path, const std::string& faults = {}) {
  std::shared_ptr<FaultyEngine> faulty;
  if (!faults.empty()) {
    StatusOr<FaultSpec> spec = ParseFaultSpec(faults);
    if (!spec.ok()) RaiseStatus(spec.status());
    faulty = std::make_shared<FaultyEngine>();
    faulty->io = FaultFileIo::Wrap(MakeFileIo(), *spec);
  }
  PyLoadHooks hooks(std::move(vars), std::move(scratch_path));
  LoadOptions lo;
  lo.profile = profile;
  hooks.Apply(&lo);
  EngineOptions eo;
  eo.profile = profile;
  eo.background_mover = background_mover;
  if (faulty) eo.file_io = faulty->io.get();
  LoadResult r;
  StatusOr<std::unique_ptr<Engine>> opened = Status::Internal("not opened");
  {
    py::gil_scoped_release nogil;
    r = src.from_file ? LoadConfigFile(src.source, lo) : LoadConfigString(src.text, src.source, lo);
    if (r.ok() && hooks.error().empty()) opened = Engine::Open(r.config, eo);
  }
  if (!hooks.error().empty()) Raise(PyExc_ValueError, "scratch_path failed: " + hooks.error());
  if (!r.ok()) Raise(g_exc.invalid, "invalid configuration " + src.source + ":\n" + r.Summary());
  WarnAll(r.warnings);
  if (!opened.ok()) RaiseStatus(opened.status());
  if (!faulty) return std::make_unique<PyEngine>(std::shared_ptr<Engine>(std::move(*opened)));
  faulty->engine = std::move(*opened);
  Engine* e = faulty->engine.get();
  auto out = std::make_unique<PyEngine>(std::shared_ptr<Engine>(faulty, e));
  out->set_faults(std::shared_ptr<FaultFileIo>(faulty, faulty->io.get()));
  return out;
}

std::unique_ptr<PyEngine> OpenEngine(py::object config, py::object profile, bool background_mover, py::object vars,
                                     py::object scratch_path, const std::string& faults) {
  return OpenFrom(SourceOf(config), ProfileOf(profile), background_mover, std::move(vars), std::move(scratch_path),
                  faults);
}

// validate_config(): what `spillway validate` says of a config, without opening it.
py::dict ValidateConfigDict(py::object config, py::object profile, py::object vars, py::object scratch_path,
                            bool check_filesystem) {
  ConfigSource src = SourceOf(config);
  PyLoadHooks hooks(std::move(vars), std::move(scratch_path));
  LoadOptions lo;
  lo.profile = ProfileOf(profile);
  lo.check_filesystem = check_filesystem;
  lo.create_dirs = false;
  hooks.Apply(&lo);
  LoadResult r;
  {
    py::gil_scoped_release nogil;
    r = src.from_file ? LoadConfigFile(src.source, lo) : LoadConfigString(src.text, src.source, lo);
  }
  if (!hooks.error().empty()) Raise(PyExc_ValueError, "scratch_path failed: " + hooks.error());
  py::list errors, warnings, tiers;
  for (const Diagnostic& d : r.errors) errors.append(d.ToString());
  for (const Diagnostic& d : r.warnings) warnings.append(d.ToString());
  if (r.ok()) {
    py::object loads = py::module_::import("json").attr("loads");
    for (const TierConfig& t : r.config.tiers) tiers.append(loads(TierConfigToJson(t)));
  }
  py::dict out;
  out["ok"] = r.ok();
  out["errors"] = errors;
  out["warnings"] = warnings;
  out["tiers"] = tiers;
  out["profile"] = r.config.profile;
  out["source"] = src.source;
  return out;
}

void Put(PyEngine& self, py::handle key, py::handle value, const std::string& memory) {
  std::string k = KeyFrom(key);
  PutBuffers bufs;
  if (PyList_Check(value.ptr()) || PyTuple_Check(value.ptr())) {
    py::sequence seq = py::reinterpret_borrow<py::sequence>(value);
    bufs.spans.reserve(seq.size());
    for (py::handle item : seq) AddBuffer(bufs, item);
  } else {
    AddBuffer(bufs, value);
  }
  PutOptions opts;
  opts.memory = WhereFrom(memory);
  if (bufs.any_device && bufs.any_host) {
    Raise(PyExc_ValueError, "one object cannot mix host and device buffers; put them under separate keys");
  }
  if (bufs.any_device) {
    if (opts.memory == Where::kHost) Raise(PyExc_ValueError, "memory='host' given for device (CUDA) buffers");
    opts.memory = Where::kDevice;
  } else if (opts.memory == Where::kDevice && !bufs.spans.empty()) {
    Raise(PyExc_ValueError, "memory='device' given for host buffers");
  } else {
    opts.memory = Where::kHost;  // known from the buffer protocol: spares the engine a pointer query
  }
  std::shared_ptr<Engine> e = self.engine();
  Status s;
  {
    py::gil_scoped_release nogil;
    s = e->Put(k, bufs.spans, opts);
  }
  if (s.code() == StatusCode::kNotSupported && bufs.any_device) {
    Raise(g_exc.not_supported, "cannot store device (CUDA) buffers: " + s.ToString() +
                                   ". That needs a spillway build with CUDA and a usable GPU (a gpu tier keeps "
                                   "them on the device); or copy them to the host first (e.g. cupy.asnumpy)");
  }
  Check(s);
}

// Engine::PutHostAllocation of `value`'s own memory (no copy), when it exports a
// writable contiguous buffer; false (nothing stored) when it does not. The
// export, and with it the exporter, lives until the engine releases it
// (BufferReleaser). Writable only: readers get writable views of it.
bool PutAdopted(PyEngine& self, py::handle key, py::handle value) {
  std::string k = KeyFrom(key);
  auto view = std::make_unique<Py_buffer>();
  if (PyObject_GetBuffer(value.ptr(), view.get(), PyBUF_WRITABLE | PyBUF_ANY_CONTIGUOUS) != 0) {
    PyErr_Clear();
    return false;
  }
  const auto* data = static_cast<const std::byte*>(view->buf);
  const auto len = static_cast<uint64_t>(view->len);
  Py_buffer* held = view.release();
  std::shared_ptr<Engine> e = self.engine();
  Status s;
  {
    py::gil_scoped_release nogil;
    s = e->PutHostAllocation(k, data, {len}, [held](const std::byte*) { BufferReleaser::Get().Push(held); });
  }
  Check(s);
  return true;
}

// ---- live objects (Engine::PutExternal) ---------------------------------------

// Buffer exports of one materialized value; dropped on an engine thread, so
// the exports are queued for the releaser.
struct HeldExports {
  std::vector<Py_buffer*> views;
  ~HeldExports() {
    for (Py_buffer* v : views) BufferReleaser::Get().Push(v);
  }
};

// A live Python value the engine holds (put_external). Materialize calls
// `materialize(value)` (SpillwayStore's serializer: a list of buffers, the
// msgpack'd header first) with the GIL, on the engine's materializer thread.
class PyExternal final : public ExternalObject {
 public:
  // REQUIRES: the GIL. Takes a reference to each.
  PyExternal(py::handle value, py::handle materialize)
      : value_(py::reinterpret_borrow<py::object>(value).release().ptr()),
        materialize_(py::reinterpret_borrow<py::object>(materialize).release().ptr()) {}
  // Any thread, GIL or not: the references are dropped by the releaser.
  ~PyExternal() override {
    BufferReleaser::Get().PushRef(value_);
    BufferReleaser::Get().PushRef(materialize_);
  }
  // A borrowed reference, valid while this object lives.
  PyObject* value() const { return value_; }

  // The GIL for a whole batch of materializations (external.h): one
  // acquisition instead of one per object; the interpreter still hands it
  // to other threads every switch interval while the serializers run.
  std::shared_ptr<void> MaterializeScope() override {
    if (!BufferReleaser::Get().running()) return nullptr;
    const PyGILState_STATE state = PyGILState_Ensure();
    return std::shared_ptr<void>(static_cast<void*>(nullptr), [state](void*) { PyGILState_Release(state); });
  }

  StatusOr<MaterializedObject> Materialize() override {
    if (!BufferReleaser::Get().running()) return Status::Busy("the Python interpreter is exiting");
    py::gil_scoped_acquire gil;
    try {
      py::object frames = py::reinterpret_borrow<py::object>(materialize_)(py::handle(value_));
      auto held = std::make_shared<HeldExports>();
      MaterializedObject out;
      for (py::handle f : frames) {
        auto view = std::make_unique<Py_buffer>();
        if (PyObject_GetBuffer(f.ptr(), view.get(), PyBUF_ANY_CONTIGUOUS) != 0) {
          // Not a contiguous host buffer: one contiguous copy (device frames fail here).
          PyErr_Clear();
          py::object copy = py::module_::import("builtins").attr("memoryview")(f).attr("tobytes")();
          if (PyObject_GetBuffer(copy.ptr(), view.get(), PyBUF_SIMPLE) != 0) throw py::error_already_set();
        }
        out.buffers.emplace_back(static_cast<const std::byte*>(view->buf), static_cast<size_t>(view->len));
        held->views.push_back(view.release());
      }
      out.owner = std::move(held);
      return out;
    } catch (py::error_already_set& e) {
      return Status::InvalidArgument(std::string("cannot serialize the value: ") + e.what());
    } catch (const std::exception& e) {
      return Status::InvalidArgument(std::string("cannot serialize the value: ") + e.what());
    }
  }

 private:
  PyObject* value_;
  PyObject* materialize_;
};

void PutExternal(PyEngine& self, py::handle key, uint64_t nbytes, py::handle value, py::handle materialize) {
  std::string k = KeyFrom(key);
  if (!PyCallable_Check(materialize.ptr())) Raise(PyExc_TypeError, "materialize must be callable");
  auto object = std::make_shared<PyExternal>(value, materialize);
  std::shared_ptr<Engine> e = self.engine();
  Status s;
  {
    py::gil_scoped_release nogil;
    s = e->PutExternal(k, nbytes, std::move(object));
  }
  Check(s);
}

py::object GetExternal(PyEngine& self, py::handle key) {
  std::string k = KeyFrom(key);
  std::shared_ptr<Engine> e = self.engine();
  StatusOr<std::shared_ptr<ExternalObject>> r = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;
    r = e->GetExternal(k);
  }
  if (!r.ok()) {
    if (r.status().IsNotFound()) {
      PyErr_SetObject(g_exc.not_found, key.ptr());
      throw py::error_already_set();
    }
    RaiseStatus(r.status());
  }
  auto* live = dynamic_cast<PyExternal*>(r->get());
  if (live == nullptr) return py::none();
  // `*r` keeps the PyExternal (and its reference) alive across this line.
  return py::reinterpret_borrow<py::object>(live->value());
}

std::shared_ptr<Pinned> Pin(PyEngine& self, py::handle key, const std::string& where) {
  std::string k = KeyFrom(key);
  const Where w = WhereFrom(where);
  auto pin = std::make_shared<Pinned>();
  pin->engine = self.engine();
  StatusOr<Handle> h = Status::Internal("not read");
  {
    py::gil_scoped_release nogil;
    h = pin->engine->Get(k, w);
  }
  if (!h.ok()) {
    if (h.status().IsNotFound()) {
      // KeyError carries the key itself, as a dict would.
      PyErr_SetObject(g_exc.not_found, key.ptr());
      throw py::error_already_set();
    }
    RaiseStatus(h.status());
  }
  pin->handle = std::move(*h);
  return pin;
}

py::list Buffers(const std::shared_ptr<Pinned>& pin, bool copy, bool writable) {
  const size_t n = pin->handle.num_buffers();
  const bool device = pin->handle.where() == Where::kDevice;
  py::list out(n);
  for (size_t i = 0; i < n; ++i) {
    if (device) {
      if (copy) Raise(PyExc_ValueError, "copy=True needs host memory: pass where='host'");
      out[i] = py::cast(DeviceBuffer{pin, i, writable});
    } else if (copy) {
      std::span<const std::byte> b = pin->handle.buffer(i);
      out[i] = py::reinterpret_steal<py::object>(
          PyBytes_FromStringAndSize(reinterpret_cast<const char*>(b.data()), static_cast<Py_ssize_t>(b.size())));
    } else {
      py::object exporter = py::cast(HostBuffer{pin, i, writable});
      PyObject* view = PyMemoryView_FromObject(exporter.ptr());
      if (view == nullptr) throw py::error_already_set();
      out[i] = py::reinterpret_steal<py::object>(view);
    }
  }
  return out;
}

std::vector<std::string> KeyList(py::handle keys) {
  std::vector<std::string> out;
  for (py::handle k : keys) out.push_back(KeyFrom(k));
  return out;
}

// Engine::Acquire: every key brought to `where` and pinned; one list of
// buffers per key.
py::list Acquire(PyEngine& self, py::handle keys, const std::string& where, bool writable) {
  std::vector<std::string> ks = KeyList(keys);
  const Where w = WhereFrom(where);
  std::shared_ptr<Engine> e = self.engine();
  StatusOr<std::vector<Handle>> hs = Status::Internal("not acquired");
  {
    py::gil_scoped_release nogil;
    hs = e->Acquire(ks, w);
  }
  Check(hs.status());
  py::list out;
  for (Handle& h : *hs) {
    auto pin = std::make_shared<Pinned>();
    pin->engine = e;
    pin->handle = std::move(h);
    out.append(Buffers(pin, false, writable));
  }
  return out;
}

py::object StatsDict(PyEngine& self) {
  std::shared_ptr<Engine> e = self.engine();
  std::string json;
  {
    py::gil_scoped_release nogil;
    json = StatsToJson(e->Stats());
  }
  return py::module_::import("json").attr("loads")(json);
}

// Engine::CheckDevices: every gpu-tier object on its tier's device, by UUID
// (the multi-GPU benchmark checks each worker with it).
py::dict CheckDevicesDict(PyEngine& self) {
  std::shared_ptr<Engine> e = self.engine();
  StatusOr<DeviceCheck> c = Status::Internal("not run");
  {
    py::gil_scoped_release nogil;
    c = e->CheckDevices();
  }
  if (!c.ok()) RaiseStatus(c.status());
  py::list tiers;
  for (const auto& t : c->tiers) {
    py::dict d;
    d["tier"] = t.tier;
    d["device"] = t.device;
    d["uuid"] = t.uuid;
    d["pci_bus_id"] = t.pci_bus_id;
    d["objects"] = t.objects;
    d["misplaced"] = t.misplaced;
    tiers.append(d);
  }
  py::dict out;
  out["tiers"] = tiers;
  out["first_problem"] = c->first_problem;
  out["ok"] = c->ok();
  return out;
}

// The tier schema of `spillway validate --json` and `info --json`
// (TierConfigToJson), without the filesystem probes.
py::list TierList(PyEngine& self) {
  py::object loads = py::module_::import("json").attr("loads");
  py::list out;
  for (const TierConfig& t : self.engine()->config().tiers) out.append(loads(TierConfigToJson(t)));
  return out;
}

}  // namespace
}  // namespace spillway

PYBIND11_MODULE(_spillway, m) {
  using namespace spillway;
  m.doc() = "spillway native module: tiered object storage (see the `spillway` package)";
  m.attr("__version__") = SPILLWAY_VERSION;  // written once, in CMakeLists.txt project()

  g_exc.error = NewException(m, "Error", "Base class of spillway errors.", {PyExc_Exception});
  g_exc.not_found = NewException(m, "NotFoundError", "No object under the key (a KeyError).", {g_exc.error, PyExc_KeyError});
  g_exc.no_space = NewException(m, "NoSpaceError", "No tier can hold the object (a MemoryError).",
                                {g_exc.error, PyExc_MemoryError});
  g_exc.io_error = NewException(m, "StorageIOError", "The OS or device failed a read or write (an OSError).",
                                {g_exc.error, PyExc_OSError});
  g_exc.corruption = NewException(m, "CorruptionError", "Checksum mismatch or torn record: stored bytes are damaged.",
                                  {g_exc.error});
  g_exc.invalid = NewException(m, "InvalidArgumentError", "Bad configuration, key or call (a ValueError).",
                               {g_exc.error, PyExc_ValueError});
  g_exc.not_supported = NewException(m, "NotSupportedError",
                                     "Feature missing in this build or on this machine (a NotImplementedError).",
                                     {g_exc.error, PyExc_NotImplementedError});
  g_exc.busy = NewException(m, "BusyError", "Object pinned or being moved; retry later.", {g_exc.error, PyExc_RuntimeError});
  g_exc.closed = NewException(m, "EngineClosedError", "The engine was closed.", {g_exc.error, PyExc_ValueError});

  py::class_<HostBuffer>(m, "HostBuffer", py::buffer_protocol(),
                         "One pinned host buffer of an object (wrapped in a memoryview by Engine.get).")
      .def_buffer([](HostBuffer& b) {
        std::span<const std::byte> s = b.pin->handle.buffer(b.index);
        return py::buffer_info(const_cast<std::byte*>(s.data()), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(s.size())}, {py::ssize_t{1}}, /*readonly=*/!b.writable);
      });

  py::class_<DeviceBuffer>(m, "DeviceBuffer",
                           "One pinned device buffer of an object; exposes __cuda_array_interface__ (read-only bytes). "
                           "cupy.asarray(buf) views it without a copy; the object stays pinned while the view lives.")
      .def_property_readonly("nbytes", [](const DeviceBuffer& b) { return b.span().size(); })
      .def_property_readonly("ptr", [](const DeviceBuffer& b) { return reinterpret_cast<uintptr_t>(b.span().data()); })
      .def_property_readonly("__cuda_array_interface__", [](const DeviceBuffer& b) {
        py::dict d;
        d["shape"] = py::make_tuple(b.span().size());
        d["typestr"] = "|u1";
        d["data"] = py::make_tuple(reinterpret_cast<uintptr_t>(b.span().data()), !b.writable);
        d["strides"] = py::none();
        d["version"] = 3;
        d["stream"] = py::none();  // the engine synchronizes its copies before Get returns
        return d;
      })
      .def("__len__", [](const DeviceBuffer& b) { return b.span().size(); });

  py::class_<PyEngine>(m, "Engine", R"doc(
A spillway engine: a chain of tiers (gpu, host, file) opened from a config.

Engine(config, profile=None, background_mover=True, *, vars=None, scratch_path=None)
  config: path of a YAML file (str or os.PathLike), or a dict with the same
          structure as the YAML file (see docs/config.md).
  profile: profile to apply (default: $SPILLWAY_PROFILE, then hostname rules).
  vars: ${NAME} values that take precedence over the environment: a mapping,
        or a callable (name, default) -> str, or None to leave NAME to the
        environment (default: the expanded ${NAME:-default} text, or None).
        Substituted into parsed values, never into the YAML text.
  scratch_path: callable (path) -> path, applied to every path of every
        scratch (not persistent) file tier before it is checked and opened.
  faults: for tests: file tiers do their I/O through a fault injector
        ("eio_write=0.1,seed=3", the language of `spillway stress --faults`);
        set_faults() changes it later.
)doc")
      .def(py::init(&OpenEngine), py::arg("config"), py::arg("profile") = py::none(),
           py::arg("background_mover") = true, py::kw_only(), py::arg("vars") = py::none(),
           py::arg("scratch_path") = py::none(), py::arg("faults") = "")
      .def("set_faults", &PyEngine::SetFaultSpec, py::arg("spec"),
           "Replaces the injected faults of an engine opened with faults=SPEC (\"\" injects none).")
      .def_static(
          "from_yaml",
          [](const std::string& text, const std::string& source_name, py::object profile, bool background_mover,
             py::object vars, py::object scratch_path) {
            return OpenFrom(ConfigSource{text, source_name, false}, ProfileOf(profile), background_mover,
                            std::move(vars), std::move(scratch_path));
          },
          py::arg("text"), py::arg("source_name") = "<string>", py::arg("profile") = py::none(),
          py::arg("background_mover") = true, py::kw_only(), py::arg("vars") = py::none(),
          py::arg("scratch_path") = py::none(), "Opens an engine from YAML text; errors cite `source_name`.")
      .def("put_adopted", &PutAdopted, py::arg("key"), py::arg("value"),
           "Stores `value` (a writable, contiguous buffer-protocol object: a NumPy array, a bytearray) under "
           "`key` WITHOUT copying: the engine accounts its bytes in the host tier and keeps the object alive "
           "until it lets go (erase, replace, demotion). Returns False, storing nothing, when `value` exports no "
           "writable contiguous buffer. Writes to `value` afterwards are seen by readers while it is in the host "
           "tier. No host tier has room: a copy goes down the chain and `value` is let go at once.")
      .def("put_external", &PutExternal, py::arg("key"), py::arg("nbytes"), py::arg("value"),
           py::arg("materialize"),
           "Stores the live object `value` under `key` WITHOUT serializing it: the host tier holds it, accounting "
           "`nbytes` (e.g. Dask's sizeof). When the engine demotes it to a tier that stores bytes it calls "
           "`materialize(value)` on its materializer thread (the GIL taken there) for a list of buffers, the "
           "value's bytes, and lets `value` go once they are stored; a materialize that raises keeps it in "
           "memory. get_external(key) returns it while it is live. NoSpaceError when no host tier has room.")
      .def("get_external", &GetExternal, py::arg("key"),
           "The live object put_external stored under `key`, or None once the engine holds it as bytes (read it "
           "with get_buffers). KeyError when absent.")
      .def("put", &Put, py::arg("key"), py::arg("value"), py::arg("memory") = "auto",
           "Stores `value` (a buffer-protocol object, an object with __cuda_array_interface__, or a list/tuple of "
           "them: one object of several buffers) under `key` (str or bytes), replacing any previous value. The "
           "bytes are read in place and copied once into the tier.")
      .def(
          "get",
          [](PyEngine& self, py::handle key, bool copy, const std::string& where, bool writable) -> py::object {
            py::list bufs = Buffers(Pin(self, key, where), copy, writable);
            if (bufs.size() == 1) return bufs[0];
            return bufs;
          },
          py::arg("key"), py::kw_only(), py::arg("copy") = false, py::arg("where") = "any",
          py::arg("writable") = false,
          "Returns the object under `key`: a read-only memoryview (a list of them for a multi-buffer object) over "
          "the pinned bytes, no copy; the object stays pinned until every view is released. copy=True returns "
          "bytes instead and unpins at once. writable=True makes the views writable (see docs/python.md: writes to "
          "an object in a memory tier are seen by its later readers). Device objects come back as DeviceBuffer. "
          "KeyError when absent.")
      .def(
          "get_buffers",
          [](PyEngine& self, py::handle key, bool copy, const std::string& where, bool writable) {
            return Buffers(Pin(self, key, where), copy, writable);
          },
          py::arg("key"), py::kw_only(), py::arg("copy") = false, py::arg("where") = "any",
          py::arg("writable") = false,
          "Like get, but always returns a list (one entry per buffer).")
      .def("acquire", &Acquire, py::arg("keys"), py::arg("where") = "host", py::kw_only(),
           py::arg("writable") = false,
           "Brings every key to `where` ('host' or 'device') concurrently and pins each: returns one list of "
           "buffers per key (as get_buffers). Make inputs resident this way before launching work on them. "
           "KeyError names a missing key; on any failure nothing stays pinned.")
      .def(
          "prefetch",
          [](PyEngine& self, py::handle keys, const std::string& where) {
            std::vector<std::string> ks = KeyList(keys);
            const Where w = WhereFrom(where);
            std::shared_ptr<Engine> e = self.engine();
            py::gil_scoped_release nogil;
            e->Prefetch(ks, w);
          },
          py::arg("keys"), py::arg("where") = "host",
          "Starts bringing the keys to `where` and returns at once; they stay unpinned.")
      .def(
          "erase",
          [](PyEngine& self, py::handle key) {
            std::string k = KeyFrom(key);
            std::shared_ptr<Engine> e = self.engine();
            Status s;
            {
              py::gil_scoped_release nogil;
              s = e->Erase(k);
            }
            if (s.IsNotFound()) {
              PyErr_SetObject(g_exc.not_found, key.ptr());
              throw py::error_already_set();
            }
            Check(s);
          },
          py::arg("key"), "Removes the object; KeyError when absent. Pinned bytes stay valid until released.")
      .def(
          "contains",
          [](PyEngine& self, py::handle key) {
            std::string k = KeyFrom(key);
            std::shared_ptr<Engine> e = self.engine();
            py::gil_scoped_release nogil;
            return e->Contains(k);
          },
          py::arg("key"))
      .def("__contains__",
           [](PyEngine& self, py::handle key) {
             std::string k = KeyFrom(key);
             std::shared_ptr<Engine> e = self.engine();
             py::gil_scoped_release nogil;
             return e->Contains(k);
           })
      .def(
          "tiers_of",
          [](PyEngine& self, py::handle keys) {
            std::vector<std::string> ks = KeyList(keys);
            std::shared_ptr<Engine> e = self.engine();
            std::vector<int> out(ks.size());
            {
              py::gil_scoped_release nogil;
              for (size_t i = 0; i < ks.size(); ++i) out[i] = e->TierOf(ks[i]);
            }
            return out;
          },
          py::arg("keys"),
          "For each key, the index in `tiers` of the tier holding it, or -1 when absent (a snapshot; one call "
          "for many keys).")
      .def(
          "flush",
          [](PyEngine& self) {
            std::shared_ptr<Engine> e = self.engine();
            Status s;
            {
              py::gil_scoped_release nogil;
              s = e->Flush();
            }
            Check(s);
          },
          "Waits for background moves and syncs persistent tiers.")
      .def(
          "keys",
          [](PyEngine& self) {
            std::shared_ptr<Engine> e = self.engine();
            std::vector<KeyInfo> keys;
            {
              py::gil_scoped_release nogil;
              keys = e->ListKeys();
            }
            py::list out;
            for (const KeyInfo& k : keys) out.append(py::bytes(k.key));
            return out;
          },
          "Every key stored now (bytes), in no particular order (Engine::ListKeys): for tools and tests.")
      .def("stats", &StatsDict, "Per-tier and per-boundary counters as a dict (engine/stats.h).")
      .def(
          "set_process_memory_limit",
          [](PyEngine& self, uint64_t bytes) { self.engine()->SetProcessMemoryLimit(bytes); },
          py::arg("bytes"),
          "The host tiers demote while this process's resident memory is above `bytes` (0: off; "
          "Engine::SetProcessMemoryLimit). SpillwayStore sets it from a Dask worker's memory limit.")
      .def(
          "relieve_memory",
          [](PyEngine& self, uint64_t incoming_bytes, bool wait) {
            std::shared_ptr<Engine> e = self.engine();
            // Released: the mover's materializer needs the GIL to serialize
            // the live values it demotes while this thread waits for it.
            py::gil_scoped_release nogil;
            return e->RelieveMemory(incoming_bytes, wait);
          },
          py::arg("incoming_bytes") = 0, py::arg("wait") = true,
          "Demotes from the host tiers at once what this process's resident memory plus "
          "`incoming_bytes` exceeds of the process memory limit (Engine::RelieveMemory); with "
          "`wait`, waits for those moves and returns True when the process then fits (always, "
          "without a limit); without, returns at once.")
      .def("check_devices", &CheckDevicesDict,
           "Every gpu-tier object on its tier's device, by UUID (Engine::CheckDevices): "
           "{'tiers': [{'tier', 'device', 'uuid', 'pci_bus_id', 'objects', 'misplaced'}], 'first_problem', 'ok'}.")
      .def("stats_table",
           [](PyEngine& self) {
             std::shared_ptr<Engine> e = self.engine();
             std::string out;
             {
               py::gil_scoped_release nogil;
               out = FormatStatsTable(e->Stats());
             }
             return out;
           },
           "The statistics as a human-readable table.")
      .def("stats_prometheus",
           [](PyEngine& self) {
             std::shared_ptr<Engine> e = self.engine();
             std::string out;
             {
               py::gil_scoped_release nogil;
               out = StatsToPrometheus(e->Stats());
             }
             return out;
           },
           "The statistics in Prometheus text format.")
      .def_property_readonly("tiers", &TierList,
                             "The resolved tier chain, one dict per tier in the schema of `spillway validate --json` "
                             "and `info --json` (name, kind, capacity_bytes, capacity, watermarks, codec{name, level, "
                             "...}, medium, paths, ...; file tiers: persistent, io); stats()['tiers'] share name, "
                             "kind and capacity_bytes.")
      .def_property_readonly("source", [](PyEngine& self) { return self.engine()->config().source; })
      .def_property_readonly("profile", [](PyEngine& self) { return self.engine()->config().profile; })
      .def_property_readonly("closed", &PyEngine::closed)
      .def("close", &PyEngine::Close,
           "Shuts the engine down (once buffers returned by get() are released). Further calls raise "
           "EngineClosedError.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](PyEngine& self, py::args) { self.Close(); });

  m.def("validate_config", &ValidateConfigDict, py::arg("config"), py::arg("profile") = py::none(), py::kw_only(),
        py::arg("vars") = py::none(), py::arg("scratch_path") = py::none(), py::arg("check_filesystem") = true,
        R"doc(Checks a config as `spillway validate` does, without opening it or creating directories.

Returns {"ok", "errors": [str], "warnings": [str], "tiers": [dict], "profile", "source"}; each
message is "file:line:col: error: key.path: what (hint)". vars and scratch_path as for Engine.)doc");
  m.def("_pending_releases", [] { return BufferReleaser::Get().pending(); },
        "Adopted buffers queued for release (tests).");
  py::module_::import("atexit").attr("register")(py::cpp_function([] { BufferReleaser::Get().Stop(); }));
  m.def("format_bytes", [](double bytes) { return HumanBytes(bytes); }, py::arg("bytes"), "1.50 GiB");
  RegisterDeviceValues(m, [](py::handle h) { return h.cast<PyEngine&>().engine(); });  // issue 15: _spillway.device
}
