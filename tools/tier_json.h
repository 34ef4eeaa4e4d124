// The one JSON description of a configured tier, shared by `validate --json`
// and `info --json` (and by the Python module's Engine.tiers): the field names
// and shapes match the stats export (StatsToJson: name, kind, capacity_bytes),
// which adds the counters. Written once, by TierConfigToJson
// (engine/stats_export.h); this is its nlohmann view for the CLI.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "spillway/config_loader.h"

namespace spillway::cli {

// {name, kind, capacity_bytes, capacity, capacity_text, watermarks{high,low},
//  codec{name,level,min_savings,chunk_bytes}, medium, paths[str], filesystem,
//  optional, + gpu: device, memory, headroom_bytes | host: pinned |
//  file: path_info[{path, filesystem, exists, direct_io, fs_total_bytes,
//  fs_free_bytes}], persistent, io{direct,queue_depth,engine,segment_bytes,block_bytes}}
// `probes` (LoadResult::paths) fills path_info and filesystem; a path it lacks
// has only "path".
nlohmann::ordered_json TierConfigJson(const TierConfig& t, const std::map<std::string, PathProbe>& probes);

}  // namespace spillway::cli
