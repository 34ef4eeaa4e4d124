// Renders EngineStats for people (a table), programs (JSON) and Prometheus
// (text exposition format, one series per tier and boundary with labels).
#pragma once

#include <string>

#include "engine/stats.h"

namespace spillway {

// Human-readable per-tier and per-boundary tables.
std::string FormatStatsTable(const EngineStats& stats);
// One JSON object: {"tiers": [...], "boundaries": [...], "puts": ...}.
std::string StatsToJson(const EngineStats& stats, int indent = -1);
// Prometheus text format, metric names prefixed "spillway_".
std::string StatsToPrometheus(const EngineStats& stats);
// "1.50 GiB"
std::string HumanBytes(double bytes);

}  // namespace spillway
