// What the Python Engine's methods do (python/module_common.h declares
// them): opening from a path, text or dict, put/get of host and device
// buffers, live objects, pins, stats and the tier list. The bindings and the
// memory contract are in spillway_module.cc.
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "adopted_buffers.h"
#include "engine/stats_export.h"
#include "python/load_hooks.h"
#include "python/module_common.h"
#include "spillway/config_loader.h"

namespace spillway::pymod {

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
                                   py::object vars, py::object scratch_path, const std::string& faults) {
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


}  // namespace spillway::pymod
