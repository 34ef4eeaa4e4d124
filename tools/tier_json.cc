// TierConfigJson (tools/tier_json.h): the engine's TierConfigToJson
// (engine/stats_export.cc), which the Python module's Engine.tiers uses too.
#include "tools/tier_json.h"

#include "engine/stats_export.h"

namespace spillway::cli {

nlohmann::ordered_json TierConfigJson(const TierConfig& t, const std::map<std::string, PathProbe>& probes) {
  return nlohmann::ordered_json::parse(TierConfigToJson(t, probes));
}

}  // namespace spillway::cli
