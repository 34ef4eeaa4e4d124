// Helpers behind the exporters declared in spillway/stats.h (the table, JSON
// and Prometheus renderings): byte and latency formatting, quantiles, label
// escaping. docs/observability.md lists every metric; keep the two in step.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "spillway/config_loader.h"
#include "spillway/stats.h"

namespace spillway {

// "1.50 GiB"
std::string HumanBytes(double bytes);
// "850 us", "1.25 ms", "2.00 s"
std::string HumanMicros(double micros);

// Upper bound in microseconds of the latency bucket holding quantile `q`
// (0..1) of a boundary's moves (log2 buckets: an estimate within 2x). 0 when
// nothing was recorded; for the last, open bucket its lower bound.
double LatencyQuantileMicros(const BoundaryStats& boundary, double q);

// The one JSON description of a configured tier (an object), shared by
// `validate --json`, `info --json` (tools/tier_json.h) and the Python
// module's Engine.tiers; its field names and shapes match the stats export
// (StatsToJson: name, kind, capacity_bytes), which adds the counters:
// {name, kind, capacity_bytes, capacity, capacity_text, watermarks{high,low},
//  codec{name,level,min_savings,chunk_bytes}, medium, paths[str], filesystem,
//  optional, + gpu: device, memory, headroom_bytes | host: pinned |
//  file: path_info[{path, filesystem, exists, direct_io, fs_total_bytes,
//  fs_free_bytes}], persistent, io{direct,queue_depth,engine,segment_bytes,block_bytes}}
// `probes` (LoadResult::paths) fills path_info and filesystem; a path it
// lacks has only "path" (and filesystem is null).
std::string TierConfigToJson(const TierConfig& t, const std::map<std::string, PathProbe>& probes = {},
                             int indent = -1);

// Escapes a Prometheus label value: backslash, double quote, newline.
std::string PrometheusEscapeLabel(std::string_view value);

}  // namespace spillway
