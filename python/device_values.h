// Device values for the Python module: zero-copy adoption of CUDA
// allocations (PutDeviceAllocation), device pins exported through
// __cuda_array_interface__, and engine-backed allocators for CuPy and PyTorch.
// Registered as the submodule spillway._spillway.device by the main module.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <memory>

namespace spillway {

class Engine;

// `engine_of` maps a spillway.Engine Python object to its engine (raising
// EngineClosedError when closed); it keeps PyEngine private to the main module.
void RegisterDeviceValues(pybind11::module_& m,
                          std::function<std::shared_ptr<Engine>(pybind11::handle)> engine_of);

// True once the interpreter is shutting down: no Python object may be touched
// from a thread that is not already holding the GIL. For both of the module's
// files (references dropped by the releaser thread, engines dropped without
// the GIL).
inline bool PythonFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing();
#else
  return _Py_IsFinalizing();
#endif
}

}  // namespace spillway
