// Per-worker gpu devices and their machine checks; see gpu_devices.h.
#include "config/gpu_devices.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "base/units.h"
#include "config/expand.h"

namespace spillway {
namespace {

constexpr const char* kWorkerVar = "SPILLWAY_WORKER_INDEX";

std::string ForWorker(int worker) { return worker < 0 ? std::string() : " for worker " + std::to_string(worker); }

}  // namespace

int ResolveWorker(const LoadOptions& options, DiagnosticSink& sink) {
  if (options.worker) {
    if (*options.worker < 0) {
      sink.ErrorAt(Origin{"worker", 0, 0}, "worker index " + std::to_string(*options.worker) + " is negative",
                   "workers are numbered from 0");
      return -1;
    }
    return *options.worker;
  }
  std::optional<std::string> env = ProcessEnv(kWorkerVar);
  if (!env || env->empty()) return -1;
  int v = -1;
  auto [end, ec] = std::from_chars(env->data(), env->data() + env->size(), v);
  if (ec != std::errc() || end != env->data() + env->size() || v < 0) {
    sink.ErrorAt(Origin{kWorkerVar, 0, 0}, std::string("$") + kWorkerVar + "='" + *env + "' is not a worker index",
                 "a whole number from 0, the worker's place among the engines on this node");
    return -1;
  }
  return v;
}

int DeviceForWorker(const TierConfig& t, int worker, bool visible_devices_set) {
  const int w = std::max(worker, 0);
  if (!t.device_list.empty()) return w < static_cast<int>(t.device_list.size()) ? t.device_list[w] : -1;
  if (t.device_auto) return visible_devices_set ? 0 : w;
  return t.device;
}

std::vector<NamedDevice> NamedDevices(const TierConfig& t, const std::string& f, int worker, int workers,
                                      bool visible_devices_set) {
  std::vector<NamedDevice> out;
  const int own = std::max(worker, 0);
  const std::string field = f + ".device";
  if (!t.device_list.empty()) {
    for (int w = 0; w < static_cast<int>(t.device_list.size()); ++w) {
      out.push_back({t.device_list[w], w, field + "[" + std::to_string(w) + "]", w == own});
    }
    return out;
  }
  if (t.device_auto && !visible_devices_set) {
    std::set<int> ws;
    for (int w = 0; w < workers; ++w) ws.insert(w);
    ws.insert(own);
    for (int w : ws) out.push_back({w, w, field, w == own});
    return out;
  }
  out.push_back({t.device_auto ? 0 : t.device, -1, field, true});
  return out;
}

void CheckDeviceValues(const Config& config, DiagnosticSink& sink) {
  for (size_t i = 0; i < config.tiers.size(); ++i) {
    const TierConfig& t = config.tiers[i];
    if (t.kind != TierKind::kGpu || t.device_list.empty()) continue;
    const int n = static_cast<int>(t.device_list.size());
    if (config.workers_per_node > n) {
      sink.Error("tiers[" + std::to_string(i) + "].device",
                 "workers_per_node is " + std::to_string(config.workers_per_node) + " but the device list names " +
                     std::to_string(n) + (n == 1 ? " device" : " devices") + ": worker " + std::to_string(n) +
                     (config.workers_per_node - n > 1 ? " and later ones have" : " has") + " no device",
                 "one entry per worker, or device: auto");
    }
    std::set<int> seen;
    for (int k = 0; k < n; ++k) {
      if (!seen.insert(t.device_list[k]).second) {
        sink.Warning("tiers[" + std::to_string(i) + "].device[" + std::to_string(k) + "]",
                     "device " + std::to_string(t.device_list[k]) + " is listed twice: two workers share it",
                     "give each worker its own GPU");
      }
    }
  }
}

std::string GpuName(const GpuProbe& gpu, int device) {
  std::string s = "GPU " + std::to_string(device);
  if (device >= 0 && static_cast<size_t>(device) < gpu.device_uuids.size() && !gpu.device_uuids[device].empty()) {
    s += " (" + gpu.device_uuids[device] + ")";
  }
  return s;
}

std::string CheckGpuDevices(TierConfig& t, const std::string& f, const GpuProbe& gpu, int worker, int workers,
                            DiagnosticSink& sink, std::string* field) {
  const std::vector<uint64_t>& totals = gpu.device_total_bytes;
  const bool visible = gpu.cuda_visible_devices_set;
  std::string problem;
  const int own = DeviceForWorker(t, worker, visible);
  if (own < 0) {
    *field = f + ".device";
    problem = "worker " + std::to_string(worker) + " has no device: the list names " +
              std::to_string(t.device_list.size());
    t.device = 0;
    return problem;
  }
  for (const NamedDevice& nd : NamedDevices(t, f, worker, workers, visible)) {
    if (nd.device < 0 || static_cast<size_t>(nd.device) >= totals.size()) {
      std::string msg = "device " + std::to_string(nd.device) + " not found (" + std::to_string(totals.size()) +
                        " CUDA devices visible)" + ForWorker(nd.worker);
      if (t.device_auto) {
        msg += visible ? "" : "; device: auto gives worker i device i when CUDA_VISIBLE_DEVICES is unset";
      }
      if (nd.own) {
        problem = msg;
        *field = nd.field;
      } else if (t.optional) {
        sink.Warning(nd.field, msg + "; that worker leaves the optional tier out");
      } else {
        sink.Error(nd.field, msg, "set optional: true to leave the tier out where it cannot run");
      }
      continue;
    }
    const uint64_t total = totals[nd.device];
    if (t.capacity_bytes != 0 && total != 0 && t.capacity_bytes > total) {
      sink.Error(f + ".capacity",
                 "capacity " + FormatBytes(t.capacity_bytes) + " exceeds " + GpuName(gpu, nd.device) +
                     "'s memory (" + FormatBytes(total) + ")" + ForWorker(nd.worker),
                 "a gpu tier cannot hold more than its device; a percentage such as 80% fits every device");
    }
  }
  t.device = own;
  return problem;
}

}  // namespace spillway
