// The native module's exceptions, key and buffer conversions, and engine
// references (python/module_common.h).
#include "python/module_common.h"

#include <cstring>

namespace spillway::pymod {

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

}  // namespace spillway::pymod
