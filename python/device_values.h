// Device values for the Python module (issue 15): zero-copy adoption of CUDA
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

}  // namespace spillway
