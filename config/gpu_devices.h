// Which CUDA device a gpu tier uses for each worker of a node (one Dask
// worker per GPU), and the list of every device a chain names so that
// validate can check them all, not only the one this process would use.
//
//   device: N        every worker uses device N (this process's numbering)
//   device: [a, b]   worker i uses the i-th entry (each worker's numbering)
//   device: auto     with CUDA_VISIBLE_DEVICES set: device 0, the first GPU
//                    the worker sees (dask-cuda starts each worker with its own
//                    list, its GPU first); unset: device <worker index>
#pragma once

#include <string>
#include <vector>

#include "config/diagnostics.h"
#include "spillway/config.h"
#include "spillway/config_loader.h"

namespace spillway {

// options.worker, else $SPILLWAY_WORKER_INDEX, else -1 (none). A variable
// that is not a whole number from 0 is an error naming it.
int ResolveWorker(const LoadOptions& options, DiagnosticSink& sink);

// The device `t` gives `worker` (-1: worker 0). A list too short for the
// worker gives -1.
int DeviceForWorker(const TierConfig& t, int worker, bool visible_devices_set);

// One device a gpu tier names.
struct NamedDevice {
  int device = 0;
  int worker = -1;    // the worker that uses it; -1: every worker (a fixed device, or auto under CUDA_VISIBLE_DEVICES)
  std::string field;  // "tiers[0].device" or "tiers[0].device[1]"
  bool own = false;   // the device of the worker being resolved
};
// Every device `t` (field `f`, "tiers[0]") names for workers 0 .. workers-1
// and for `worker`.
std::vector<NamedDevice> NamedDevices(const TierConfig& t, const std::string& f, int worker, int workers,
                                      bool visible_devices_set);

// Value rules that need no machine: a device list long enough for
// workers_per_node.
void CheckDeviceValues(const Config& config, DiagnosticSink& sink);

// The machine rules of gpu tier `t` (field `f`) against `gpu`: every device
// it names exists and can hold the capacity (bytes; a percentage is of each
// device). Sets t.device to the worker's device. Returns the problem with the
// worker's own device ("" when none) and its field, for the caller to report
// as an error or, for an optional tier, a warning that leaves it out.
std::string CheckGpuDevices(TierConfig& t, const std::string& f, const GpuProbe& gpu, int worker, int workers,
                            DiagnosticSink& sink, std::string* field);

// "GPU 1" or "GPU 1 (GPU-8e9f...)" when the probe knows its UUID.
std::string GpuName(const GpuProbe& gpu, int device);

}  // namespace spillway
