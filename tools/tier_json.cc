// TierConfigJson (tools/tier_json.h).
#include "tools/tier_json.h"

#include <vector>

#include "base/units.h"

namespace spillway::cli {

nlohmann::ordered_json TierConfigJson(const TierConfig& t, const std::map<std::string, PathProbe>& probes) {
  nlohmann::ordered_json paths = nlohmann::ordered_json::array();
  std::string first_fs;
  for (const std::string& p : t.paths) {
    nlohmann::ordered_json j = {{"path", p}};
    if (auto it = probes.find(p); it != probes.end()) {
      j["filesystem"] = it->second.filesystem;
      j["exists"] = it->second.exists;
      j["direct_io"] = it->second.direct_io;
      j["fs_total_bytes"] = it->second.fs_total_bytes;
      j["fs_free_bytes"] = it->second.fs_free_bytes;
      if (first_fs.empty()) first_fs = it->second.filesystem;
    }
    paths.push_back(std::move(j));
  }
  nlohmann::ordered_json j = {
      {"name", t.name},
      {"kind", TierKindName(t.kind)},
      {"capacity_bytes", t.capacity_bytes},
      {"capacity", FormatBytes(t.capacity_bytes)},
      {"capacity_text", t.capacity_text},
      {"watermarks", {{"high", t.watermarks.high}, {"low", t.watermarks.low}}},
      {"codec", {{"name", CodecKindName(t.codec.kind)}, {"level", t.codec.level},
                 {"min_savings", t.codec.min_savings}, {"chunk_bytes", t.codec.chunk_bytes}}},
      {"medium", MediumName(t.medium)},
      {"paths", t.paths},
      {"filesystem", first_fs.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(first_fs)},
      {"optional", t.optional},
  };
  if (t.kind == TierKind::kGpu) {
    j["device"] = t.device;  // for the worker it was resolved for (device_per_worker)
    j["device_per_worker"] = t.device_auto             ? nlohmann::ordered_json("auto")
                             : !t.device_list.empty() ? nlohmann::ordered_json(t.device_list)
                                                      : nlohmann::ordered_json(nullptr);
    j["memory"] = GpuMemoryName(t.memory);
    j["headroom_bytes"] = t.headroom_bytes;
  } else if (t.kind == TierKind::kHost) {
    j["pinned"] = t.pinned;
  } else {
    j["path_info"] = std::move(paths);
    j["persistent"] = t.persistent;
    j["io"] = {{"direct", t.io.direct},
               {"queue_depth", t.io.queue_depth},
               {"engine", IoEngineName(t.io.engine)},
               {"segment_bytes", t.io.segment_bytes},
               {"block_bytes", t.io.block_bytes}};
  }
  return j;
}

}  // namespace spillway::cli
