// Stats rendering: table, JSON (nlohmann-json, used only here in engine/) and
// Prometheus text.
#include "engine/stats_export.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace spillway {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024.0 && u < 5) {
    b /= 1024.0;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.2f %s", b, units[u]);
  return buf;
}

std::string FormatStatsTable(const EngineStats& s) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "%-10s %-5s %10s %12s %12s %9s %9s %9s %9s %12s %12s %6s\n", "tier",
                "kind", "objects", "used", "capacity", "hits", "dem.in", "dem.out", "prom.out", "written",
                "read", "ratio");
  out += line;
  for (const TierStats& t : s.tiers) {
    std::snprintf(line, sizeof(line), "%-10s %-5s %10llu %12s %12s %9llu %9llu %9llu %9llu %12s %12s %6.3f\n",
                  t.name.c_str(), t.kind.c_str(), static_cast<unsigned long long>(t.objects),
                  HumanBytes(t.used_bytes).c_str(), HumanBytes(t.capacity_bytes).c_str(),
                  static_cast<unsigned long long>(t.hits), static_cast<unsigned long long>(t.demotions_in),
                  static_cast<unsigned long long>(t.demotions_out),
                  static_cast<unsigned long long>(t.promotions_out), HumanBytes(t.bytes_written).c_str(),
                  HumanBytes(t.bytes_read).c_str(), t.compression_ratio());
    out += line;
  }
  if (!s.boundaries.empty()) {
    std::snprintf(line, sizeof(line), "\n%-22s %10s %12s %12s %12s %8s\n", "boundary", "objects", "raw bytes",
                  "stored", "throughput", "failures");
    out += line;
    for (const BoundaryStats& b : s.boundaries) {
      std::string name = b.from + (b.down ? " -> " : " <- ") + b.to;
      if (!b.down) name = b.to + " <- " + b.from;
      std::snprintf(line, sizeof(line), "%-22s %10llu %12s %12s %10s/s %8llu\n", name.c_str(),
                    static_cast<unsigned long long>(b.objects), HumanBytes(b.bytes).c_str(),
                    HumanBytes(b.stored_bytes).c_str(), HumanBytes(b.throughput_bytes_per_s()).c_str(),
                    static_cast<unsigned long long>(b.failures));
      out += line;
    }
  }
  std::snprintf(line, sizeof(line), "\nputs %llu  gets %llu  misses %llu  erases %llu  caller-thread demotions %llu\n",
                static_cast<unsigned long long>(s.puts), static_cast<unsigned long long>(s.gets),
                static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.erases),
                static_cast<unsigned long long>(s.sync_demotions));
  out += line;
  return out;
}

std::string StatsToJson(const EngineStats& s, int indent) {
  nlohmann::json j;
  j["tiers"] = nlohmann::json::array();
  for (const TierStats& t : s.tiers) {
    j["tiers"].push_back({{"name", t.name},
                          {"kind", t.kind},
                          {"capacity_bytes", t.capacity_bytes},
                          {"used_bytes", t.used_bytes},
                          {"pinned_bytes", t.pinned_bytes},
                          {"objects", t.objects},
                          {"raw_bytes", t.raw_bytes},
                          {"hits", t.hits},
                          {"bytes_written", t.bytes_written},
                          {"raw_bytes_written", t.raw_bytes_written},
                          {"bytes_read", t.bytes_read},
                          {"demotions_in", t.demotions_in},
                          {"demotions_out", t.demotions_out},
                          {"promotions_in", t.promotions_in},
                          {"promotions_out", t.promotions_out},
                          {"checksum_failures", t.checksum_failures},
                          {"io_errors", t.io_errors},
                          {"segments", t.segments},
                          {"disk_bytes", t.disk_bytes},
                          {"compression_ratio", t.compression_ratio()}});
  }
  j["boundaries"] = nlohmann::json::array();
  for (const BoundaryStats& b : s.boundaries) {
    nlohmann::json hist = nlohmann::json::array();
    for (int i = 0; i < kLatencyBuckets; ++i) hist.push_back(b.latency_us[i]);
    j["boundaries"].push_back({{"from", b.from},
                               {"to", b.to},
                               {"direction", b.down ? "down" : "up"},
                               {"objects", b.objects},
                               {"bytes", b.bytes},
                               {"stored_bytes", b.stored_bytes},
                               {"seconds", b.nanos / 1e9},
                               {"failures", b.failures},
                               {"retries", b.retries},
                               {"latency_us_log2_buckets", hist}});
  }
  j["objects"] = s.objects;
  j["puts"] = s.puts;
  j["gets"] = s.gets;
  j["misses"] = s.misses;
  j["erases"] = s.erases;
  j["sync_demotions"] = s.sync_demotions;
  return j.dump(indent);
}

std::string StatsToPrometheus(const EngineStats& s) {
  std::string out;
  char line[512];
  auto metric = [&](const char* name, const char* type, const char* help) {
    std::snprintf(line, sizeof(line), "# HELP spillway_%s %s\n# TYPE spillway_%s %s\n", name, help, name, type);
    out += line;
  };
  auto tier_series = [&](const char* name, const char* type, const char* help, auto get) {
    metric(name, type, help);
    for (const TierStats& t : s.tiers) {
      std::snprintf(line, sizeof(line), "spillway_%s{tier=\"%s\",kind=\"%s\"} %llu\n", name, t.name.c_str(),
                    t.kind.c_str(), static_cast<unsigned long long>(get(t)));
      out += line;
    }
  };
  tier_series("tier_capacity_bytes", "gauge", "Configured capacity", [](const TierStats& t) { return t.capacity_bytes; });
  tier_series("tier_used_bytes", "gauge", "Bytes in use (after codec)", [](const TierStats& t) { return t.used_bytes; });
  tier_series("tier_pinned_bytes", "gauge", "Raw bytes pinned by handles", [](const TierStats& t) { return t.pinned_bytes; });
  tier_series("tier_objects", "gauge", "Objects stored", [](const TierStats& t) { return t.objects; });
  tier_series("tier_hits_total", "counter", "Gets served", [](const TierStats& t) { return t.hits; });
  tier_series("tier_written_bytes_total", "counter", "Stored bytes written", [](const TierStats& t) { return t.bytes_written; });
  tier_series("tier_read_bytes_total", "counter", "Stored bytes read", [](const TierStats& t) { return t.bytes_read; });
  tier_series("tier_checksum_failures_total", "counter", "Checksum mismatches", [](const TierStats& t) { return t.checksum_failures; });
  tier_series("tier_io_errors_total", "counter", "I/O errors", [](const TierStats& t) { return t.io_errors; });
  auto boundary_series = [&](const char* name, const char* help, auto get) {
    metric(name, "counter", help);
    for (const BoundaryStats& b : s.boundaries) {
      std::snprintf(line, sizeof(line), "spillway_%s{from=\"%s\",to=\"%s\",direction=\"%s\"} %llu\n", name,
                    b.from.c_str(), b.to.c_str(), b.down ? "down" : "up",
                    static_cast<unsigned long long>(get(b)));
      out += line;
    }
  };
  boundary_series("moved_objects_total", "Objects moved across a boundary", [](const BoundaryStats& b) { return b.objects; });
  boundary_series("moved_bytes_total", "Raw bytes moved across a boundary", [](const BoundaryStats& b) { return b.bytes; });
  boundary_series("moved_stored_bytes_total", "Bytes after the destination codec", [](const BoundaryStats& b) { return b.stored_bytes; });
  boundary_series("move_failures_total", "Moves abandoned", [](const BoundaryStats& b) { return b.failures; });
  metric("requests_total", "counter", "Engine calls");
  std::snprintf(line, sizeof(line),
                "spillway_requests_total{op=\"put\"} %llu\nspillway_requests_total{op=\"get\"} %llu\n"
                "spillway_requests_total{op=\"erase\"} %llu\nspillway_requests_total{op=\"miss\"} %llu\n",
                static_cast<unsigned long long>(s.puts), static_cast<unsigned long long>(s.gets),
                static_cast<unsigned long long>(s.erases), static_cast<unsigned long long>(s.misses));
  out += line;
  return out;
}

}  // namespace spillway
