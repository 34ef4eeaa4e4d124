// Renders EngineStats for people (a table), programs (JSON) and Prometheus
// (text exposition format 0.0.4). docs/observability.md lists every metric,
// its labels and its meaning; keep the two in step.
#pragma once

#include <string>
#include <string_view>

#include "spillway/stats.h"

namespace spillway {

// Human-readable per-tier and per-boundary tables and a summary line.
std::string FormatStatsTable(const EngineStats& stats);

// One JSON object: {"tiers": [...], "boundaries": [...], "objects": ..., "puts": ...}.
// indent < 0: one line.
std::string StatsToJson(const EngineStats& stats, int indent = -1);

// Prometheus text format: metric names prefixed "spillway_", # HELP and
// # TYPE before each family, tier series labelled {tier, kind}, boundary
// series labelled {from, to, direction}, move latency as a histogram in
// seconds. Label values are escaped, so any tier name is safe.
std::string StatsToPrometheus(const EngineStats& stats);

// "1.50 GiB"
std::string HumanBytes(double bytes);
// "850 us", "1.25 ms", "2.00 s"
std::string HumanMicros(double micros);

// Upper bound in microseconds of the latency bucket holding quantile `q`
// (0..1) of a boundary's moves (log2 buckets: an estimate within 2x). 0 when
// nothing was recorded; for the last, open bucket its lower bound.
double LatencyQuantileMicros(const BoundaryStats& boundary, double q);

// Escapes a Prometheus label value: backslash, double quote, newline.
std::string PrometheusEscapeLabel(std::string_view value);

}  // namespace spillway
