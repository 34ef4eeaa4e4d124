// Stats rendering: table, JSON (nlohmann-json, used only here in engine/) and
// Prometheus text (written by hand: the format is small and exact).
#include "engine/stats_export.h"

#include "spillway/version.h"
#include "base/units.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <vector>

namespace spillway {
namespace {

using ull = unsigned long long;

uint64_t TotalObservations(const BoundaryStats& b) {
  uint64_t n = 0;
  for (uint64_t c : b.latency_us) n += c;
  return n;
}

// Upper bound, in microseconds, of log2 bucket i (see kLatencyBuckets).
double BucketUpperMicros(int i) { return std::ldexp(1.0, i); }

// ---------------------------------------------------------------- Prometheus

// Shortest text that reads back as the same double; Prometheus spellings for
// the non-finite values.
void AppendDouble(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
  } else if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out.append(buf, r.ptr);
  }
}

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// HELP text escapes backslash and newline only.
std::string EscapeHelp(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

using Labels = std::initializer_list<std::pair<const char*, std::string_view>>;

class PromWriter {
 public:
  // `constant` labels lead every sample (metrics.labels).
  explicit PromWriter(const std::vector<std::pair<std::string, std::string>>& constant) : constant_(constant) {}
  void Family(const char* name, const char* type, std::string_view help) {
    out_ += "# HELP spillway_";
    out_ += name;
    out_ += ' ';
    out_ += EscapeHelp(help);
    out_ += "\n# TYPE spillway_";
    out_ += name;
    out_ += ' ';
    out_ += type;
    out_ += '\n';
  }
  // One sample line: spillway_<name><suffix>{labels[,extra]} value
  template <typename V>
  void Sample(const char* name, const char* suffix, Labels labels, V value,
              std::pair<const char*, std::string_view> extra = {nullptr, {}}) {
    out_ += "spillway_";
    out_ += name;
    out_ += suffix;
    bool first = true;
    auto label = [&](const char* k, std::string_view v) {
      out_ += first ? '{' : ',';
      first = false;
      out_ += k;
      out_ += "=\"";
      out_ += PrometheusEscapeLabel(v);
      out_ += '"';
    };
    for (const auto& [k, v] : constant_) label(k.c_str(), v);
    for (const auto& [k, v] : labels) label(k, v);
    if (extra.first) label(extra.first, extra.second);
    if (!first) out_ += '}';
    out_ += ' ';
    if constexpr (std::is_floating_point_v<V>) {
      AppendDouble(out_, value);
    } else {
      AppendUint(out_, static_cast<uint64_t>(value));
    }
    out_ += '\n';
  }
  std::string Take() { return std::move(out_); }

 private:
  const std::vector<std::pair<std::string, std::string>>& constant_;
  std::string out_;
};

const char* Direction(const BoundaryStats& b) { return b.down ? "down" : "up"; }

}  // namespace

std::string PrometheusEscapeLabel(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The one byte formatter (base/units FormatBytes), for doubles too.
std::string HumanBytes(double b) {
  if (!(b > 0)) return FormatBytes(0);
  return FormatBytes(b >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(b + 0.5));
}

std::string HumanMicros(double us) {
  char buf[32];
  if (us < 1000) {
    std::snprintf(buf, sizeof(buf), "%.0f us", us);
  } else if (us < 1e6) {
    std::snprintf(buf, sizeof(buf), "%.2f ms", us / 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.2f s", us / 1e6);
  }
  return buf;
}

double LatencyQuantileMicros(const BoundaryStats& b, double q) {
  const uint64_t n = TotalObservations(b);
  if (n == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  // Smallest bucket whose cumulative count reaches ceil(q * n) (at least 1).
  const uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * static_cast<double>(n))));
  uint64_t cum = 0;
  for (int i = 0; i < kLatencyBuckets; ++i) {
    cum += b.latency_us[i];
    if (cum >= rank) return i == kLatencyBuckets - 1 ? BucketUpperMicros(i - 1) : BucketUpperMicros(i);
  }
  return BucketUpperMicros(kLatencyBuckets - 2);
}

namespace {

// Columns as wide as their widest cell (a long tier name widens its column
// instead of breaking the row); the first `left` columns are left-aligned,
// the rest (numbers) right-aligned.
std::string RenderTable(const std::vector<std::vector<std::string>>& rows, size_t left) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      if (c) line += "  ";
      const std::string pad(width[c] - r[c].size(), ' ');
      line += c < left ? r[c] + pad : pad + r[c];
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string U(uint64_t v) { return std::to_string(v); }
std::string F(const char* fmt, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

}  // namespace

std::string FormatStatsTable(const EngineStats& s) {
  std::vector<std::vector<std::string>> tiers = {{"tier", "kind", "objects", "used", "capacity", "use%", "pinned",
                                                  "hits", "dem.in", "dem.out", "prom.in", "prom.out", "written",
                                                  "read", "ratio", "errors"}};
  for (const TierStats& t : s.tiers) {
    const double pct = t.capacity_bytes ? 100.0 * static_cast<double>(t.used_bytes) / t.capacity_bytes : 0.0;
    tiers.push_back({t.name, t.kind, U(t.objects), HumanBytes(t.used_bytes), HumanBytes(t.capacity_bytes),
                     F("%.1f", pct), HumanBytes(t.pinned_bytes), U(t.hits), U(t.demotions_in), U(t.demotions_out),
                     U(t.promotions_in), U(t.promotions_out), HumanBytes(t.bytes_written), HumanBytes(t.bytes_read),
                     F("%.3f", t.compression_ratio()), U(t.checksum_failures + t.io_errors)});
  }
  std::string out = RenderTable(tiers, 2);
  if (!s.boundaries.empty()) {
    std::vector<std::vector<std::string>> rows = {{"boundary", "dir", "objects", "raw", "stored", "ratio", "time",
                                                   "throughput", "p50", "p99", "failures", "retries"}};
    for (const BoundaryStats& b : s.boundaries) {
      const double ratio = b.bytes ? static_cast<double>(b.stored_bytes) / b.bytes : 1.0;
      rows.push_back({b.from + " -> " + b.to, Direction(b), U(b.objects), HumanBytes(b.bytes),
                      HumanBytes(b.stored_bytes), F("%.3f", ratio), HumanMicros(b.nanos / 1e3),
                      HumanBytes(b.throughput_bytes_per_s()) + "/s", HumanMicros(LatencyQuantileMicros(b, 0.5)),
                      HumanMicros(LatencyQuantileMicros(b, 0.99)), U(b.failures), U(b.retries)});
    }
    out += "\n" + RenderTable(rows, 2);
  }
  char line[512];
  std::snprintf(line, sizeof(line),
                "\nobjects %llu  puts %llu  gets %llu  misses %llu  erases %llu  caller-thread demotions %llu"
                "  waits for room %llu (%.3f s)\n",
                static_cast<ull>(s.objects), static_cast<ull>(s.puts), static_cast<ull>(s.gets),
                static_cast<ull>(s.misses), static_cast<ull>(s.erases), static_cast<ull>(s.sync_demotions),
                static_cast<ull>(s.backpressure_waits), s.backpressure_wait_ns / 1e9);
  out += line;
  return out;
}

// The tier schema of validate --json, info --json and the Python module's
// Engine.tiers (engine/stats_export.h).
std::string TierConfigToJson(const TierConfig& t, const std::map<std::string, PathProbe>& probes, int indent) {
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
      {"max_object_bytes", t.max_object_bytes},
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
    j["pin_at_open_bytes"] = t.pin_at_open_bytes;
    j["pin_at_open_fraction"] = t.pin_at_open_fraction;
  } else {
    j["path_info"] = std::move(paths);
    j["persistent"] = t.persistent;
    j["wipe_persistent"] = t.wipe_persistent;
    j["allow_symlink"] = t.allow_symlink;
    j["min_free_bytes"] = t.min_free_bytes;
    j["min_free_fraction"] = t.min_free_fraction;
    j["io"] = {{"direct", t.io.direct},
               {"queue_depth", t.io.queue_depth},
               {"engine", IoEngineName(t.io.engine)},
               {"segment_bytes", t.io.segment_bytes},
               {"block_bytes", t.io.block_bytes}};
  }
  return j.dump(indent);
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
                          {"demotion_idle_seconds", t.demotion_idle_ns / 1e9},
                          {"compression_ratio", t.compression_ratio()}});
  }
  j["boundaries"] = nlohmann::json::array();
  for (const BoundaryStats& b : s.boundaries) {
    nlohmann::json hist = nlohmann::json::array();
    for (int i = 0; i < kLatencyBuckets; ++i) hist.push_back(b.latency_us[i]);
    j["boundaries"].push_back({{"from", b.from},
                               {"to", b.to},
                               {"direction", Direction(b)},
                               {"objects", b.objects},
                               {"bytes", b.bytes},
                               {"stored_bytes", b.stored_bytes},
                               {"seconds", b.nanos / 1e9},
                               {"throughput_bytes_per_s", b.throughput_bytes_per_s()},
                               {"failures", b.failures},
                               {"retries", b.retries},
                               {"latency_p50_us", LatencyQuantileMicros(b, 0.5)},
                               {"latency_p99_us", LatencyQuantileMicros(b, 0.99)},
                               {"latency_us_log2_buckets", hist}});
  }
  j["objects"] = s.objects;
  j["puts"] = s.puts;
  j["gets"] = s.gets;
  j["misses"] = s.misses;
  j["erases"] = s.erases;
  j["sync_demotions"] = s.sync_demotions;
  j["backpressure_waits"] = s.backpressure_waits;
  j["backpressure_wait_seconds"] = s.backpressure_wait_ns / 1e9;
  j["clean_copies"] = s.clean_copies;
  j["clean_demotions"] = s.clean_demotions;
  j["pinned_pool_bytes"] = s.pinned_pool_bytes;
  j["pinned_fallback_bytes"] = s.pinned_fallback_bytes;
  j["host_cache_bytes"] = s.host_cache_bytes;
  j["host_cache_hits"] = s.host_cache_hits;
  j["host_cache_misses"] = s.host_cache_misses;
  j["process_memory_limit"] = s.process_memory_limit;
  j["process_resident_bytes"] = s.process_resident_bytes;
  j["process_memory_excess_bytes"] = s.process_memory_excess_bytes;
  return j.dump(indent);
}

std::string StatsToPrometheus(const EngineStats& s) {
  PromWriter w(s.labels);
  w.Family("build_info", "gauge", "Always 1; the labels say which spillway wrote the metrics.");
#ifdef SPILLWAY_HAVE_CUDA
  w.Sample("build_info", "", {{"version", SPILLWAY_VERSION}, {"cuda", "yes"}}, 1);
#else
  w.Sample("build_info", "", {{"version", SPILLWAY_VERSION}, {"cuda", "no"}}, 1);
#endif
  auto tier_family = [&](const char* name, const char* type, std::string_view help, auto get,
                         bool file_only = false) {
    w.Family(name, type, help);
    for (const TierStats& t : s.tiers) {
      if (file_only && t.kind != "file") continue;
      w.Sample(name, "", {{"tier", t.name}, {"kind", t.kind}}, get(t));
    }
  };
  tier_family("tier_capacity_bytes", "gauge", "Configured capacity of the tier.",
              [](const TierStats& t) { return t.capacity_bytes; });
  tier_family("tier_used_bytes", "gauge", "Bytes reserved in the tier (after the codec, including pinned objects).",
              [](const TierStats& t) { return t.used_bytes; });
  tier_family("tier_pinned_bytes", "gauge", "Raw bytes of objects in the tier pinned by a live Handle.",
              [](const TierStats& t) { return t.pinned_bytes; });
  tier_family("tier_objects", "gauge", "Objects stored in the tier.", [](const TierStats& t) { return t.objects; });
  tier_family("tier_raw_bytes", "gauge", "Raw (uncompressed) size of the objects stored in the tier.",
              [](const TierStats& t) { return t.raw_bytes; });
  tier_family("tier_hits_total", "counter", "Gets served from the tier.", [](const TierStats& t) { return t.hits; });
  tier_family("tier_written_bytes_total", "counter", "Stored bytes (after the codec) written into the tier.",
              [](const TierStats& t) { return t.bytes_written; });
  tier_family("tier_written_raw_bytes_total", "counter", "Raw bytes of the objects written into the tier.",
              [](const TierStats& t) { return t.raw_bytes_written; });
  tier_family("tier_read_bytes_total", "counter", "Stored bytes read back from the tier.",
              [](const TierStats& t) { return t.bytes_read; });
  tier_family("tier_demotions_in_total", "counter", "Objects demoted into the tier from a tier above.",
              [](const TierStats& t) { return t.demotions_in; });
  tier_family("tier_demotions_out_total", "counter", "Objects demoted out of the tier to a tier below.",
              [](const TierStats& t) { return t.demotions_out; });
  tier_family("tier_promotions_in_total", "counter", "Objects promoted into the tier from a tier below.",
              [](const TierStats& t) { return t.promotions_in; });
  tier_family("tier_promotions_out_total", "counter", "Objects promoted out of the tier to a tier above.",
              [](const TierStats& t) { return t.promotions_out; });
  tier_family("tier_demotion_idle_seconds_total", "counter",
              "Time with no demotion batch out of the tier queued or running (0 for the last tier).",
              [](const TierStats& t) { return t.demotion_idle_ns / 1e9; });
  tier_family("tier_checksum_failures_total", "counter", "Reads from the tier that failed checksum verification.",
              [](const TierStats& t) { return t.checksum_failures; });
  tier_family("tier_io_errors_total", "counter", "I/O errors reported by the tier.",
              [](const TierStats& t) { return t.io_errors; });
  tier_family("tier_compression_ratio", "gauge", "Stored bytes / raw bytes of what was written (1 without a codec).",
              [](const TierStats& t) { return t.compression_ratio(); });
  tier_family("tier_segments", "gauge", "Segment files of a file tier.", [](const TierStats& t) { return t.segments; },
              true);
  tier_family("tier_disk_bytes", "gauge", "Bytes a file tier's segment files occupy on disk.",
              [](const TierStats& t) { return t.disk_bytes; }, true);

  auto boundary_family = [&](const char* name, std::string_view help, auto get) {
    w.Family(name, "counter", help);
    for (const BoundaryStats& b : s.boundaries) {
      w.Sample(name, "", {{"from", b.from}, {"to", b.to}, {"direction", Direction(b)}}, get(b));
    }
  };
  boundary_family("moved_objects_total", "Objects moved across a boundary.",
                  [](const BoundaryStats& b) { return b.objects; });
  boundary_family("moved_bytes_total", "Raw bytes moved across a boundary.",
                  [](const BoundaryStats& b) { return b.bytes; });
  boundary_family("moved_stored_bytes_total", "Bytes moved across a boundary, after the destination's codec.",
                  [](const BoundaryStats& b) { return b.stored_bytes; });
  boundary_family("move_seconds_total", "Time spent moving objects across a boundary.",
                  [](const BoundaryStats& b) { return b.nanos / 1e9; });
  boundary_family("move_failures_total", "Moves abandoned (I/O error, no space, corruption).",
                  [](const BoundaryStats& b) { return b.failures; });
  boundary_family("move_retries_total", "Moves retried.", [](const BoundaryStats& b) { return b.retries; });

  // Histogram: bucket i of latency_us holds moves under 2^i us (the last
  // bucket is open-ended, so it only feeds +Inf).
  w.Family("move_duration_seconds", "histogram",
           "Duration of one move across a boundary (a demotion batch or one promotion).");
  for (const BoundaryStats& b : s.boundaries) {
    Labels labels = {{"from", b.from}, {"to", b.to}, {"direction", Direction(b)}};
    uint64_t cum = 0;
    char le[64];
    for (int i = 0; i + 1 < kLatencyBuckets; ++i) {
      cum += b.latency_us[i];
      // 2^i / 1e6 rounds once, so the text is the exact decimal ("4e-06").
      auto r = std::to_chars(le, le + sizeof(le), BucketUpperMicros(i) / 1e6);
      w.Sample("move_duration_seconds", "_bucket", labels, cum, {"le", std::string_view(le, r.ptr - le)});
    }
    cum += b.latency_us[kLatencyBuckets - 1];
    w.Sample("move_duration_seconds", "_bucket", labels, cum, {"le", "+Inf"});
    w.Sample("move_duration_seconds", "_sum", labels, b.nanos / 1e9);
    w.Sample("move_duration_seconds", "_count", labels, cum);
  }

  // A family of one unlabelled sample.
  const auto single = [&w](const char* name, const char* type, const char* help, uint64_t value) {
    w.Family(name, type, help);
    w.Sample(name, "", {}, value);
  };
  single("objects", "gauge", "Objects stored in the engine (all tiers).", s.objects);
  w.Family("requests_total", "counter", "Engine calls by operation.");
  w.Sample("requests_total", "", {{"op", "put"}}, s.puts);
  w.Sample("requests_total", "", {{"op", "get"}}, s.gets);
  w.Sample("requests_total", "", {{"op", "erase"}}, s.erases);
  single("get_misses_total", "counter", "Gets of absent keys.", s.misses);
  single("sync_demotions_total", "counter",
         "Demotions run on a caller's thread because the background mover had not made room (backpressure).",
         s.sync_demotions);
  single("backpressure_waits_total", "counter",
         "Reservations that found their tier full and waited for the background mover to make room.",
         s.backpressure_waits);
  w.Family("backpressure_wait_seconds_total", "counter",
           "Time reservations waited for the background mover to make room, in seconds.");
  w.Sample("backpressure_wait_seconds_total", "", {}, s.backpressure_wait_ns / 1e9);
  single("event_log_lines_total", "counter", "Spill event log lines written (metrics.event_log).",
         s.event_log_lines);
  single("event_log_dropped_lines_total", "counter",
         "Spill event log lines dropped by the rate limit or lost to write errors.", s.event_log_dropped);
  single("clean_copies", "gauge",
         "Promoted objects whose scratch-file record is kept, so demoting them again writes nothing.",
         s.clean_copies);
  single("clean_demotions_total", "counter",
         "Demotions that went back to an object's clean copy instead of writing.", s.clean_demotions);
  single("pinned_pool_bytes", "gauge", "Page-locked host memory held by the pinned pool (pinned host tiers).",
         s.pinned_pool_bytes);
  single("pinned_fallback_bytes_total", "counter",
         "Host allocations served from plain memory because the pinned pool had not grown enough yet.",
         s.pinned_fallback_bytes);
  single("host_cache_bytes", "gauge",
         "Freed host memory kept for reuse by host tiers without a pinned pool (within their capacity).",
         s.host_cache_bytes);
  single("host_cache_hits_total", "counter", "Host allocations of 64 KiB or more served by a kept block.",
         s.host_cache_hits);
  single("host_cache_misses_total", "counter", "Host allocations of 64 KiB or more that found no kept block.",
         s.host_cache_misses);
  single("process_memory_limit_bytes", "gauge",
         "Resident memory above which the host tiers demote (Engine::SetProcessMemoryLimit; 0: off).",
         s.process_memory_limit);
  single("process_resident_bytes", "gauge", "This process's resident memory when the metrics were taken.",
         s.process_resident_bytes);
  single("process_memory_excess_bytes", "gauge",
         "How far above the process memory limit the mover last found the resident memory (0 when below).",
         s.process_memory_excess_bytes);
  return w.Take();
}

}  // namespace spillway
