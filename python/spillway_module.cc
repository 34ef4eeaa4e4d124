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
#include "python/module_common.h"

PYBIND11_MODULE(_spillway, m) {
  using namespace spillway;
  using namespace spillway::pymod;
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
  RegisterDeviceValues(m, [](py::handle h) { return h.cast<PyEngine&>().engine(); });  // _spillway.device
}
