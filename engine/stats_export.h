// Helpers behind the exporters declared in spillway/stats.h (the table, JSON
// and Prometheus renderings): byte and latency formatting, quantiles, label
// escaping. docs/observability.md lists every metric; keep the two in step.
#pragma once

#include <string>
#include <string_view>

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

// Escapes a Prometheus label value: backslash, double quote, newline.
std::string PrometheusEscapeLabel(std::string_view value);

}  // namespace spillway
