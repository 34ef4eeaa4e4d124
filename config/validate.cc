// Value rules and machine rules for a tier chain; see validate.h.
#include "config/validate.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "config/fs_probe.h"
#include "config/gpu_devices.h"
#include "base/units.h"

namespace spillway {
namespace {

constexpr const char* kWatermarkRule = "expected 0 < low < high <= 1";
constexpr uint64_t kMinChunkBytes = 4096;
constexpr uint64_t kDirectAlign = 4096;
constexpr int kLz4MaxAcceleration = 65537;
// The file tier measures free space as int64_t bytes; no filesystem is larger.
constexpr uint64_t kMaxMinFreeBytes = static_cast<uint64_t>(INT64_MAX);
// A year: the dumper's period must fit the steady clock's nanoseconds.
constexpr double kMaxDumpIntervalS = 365.0 * 24 * 3600;

std::string Num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string TierField(size_t i) { return "tiers[" + std::to_string(i) + "]"; }

int KindRank(TierKind k) {
  switch (k) {
    case TierKind::kGpu: return 0;
    case TierKind::kHost: return 1;
    case TierKind::kFile: return 2;
  }
  return 0;
}

bool ValidTierName(const std::string& name) {
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
}

void CheckWatermarks(const Watermarks& wm, const std::string& field, DiagnosticSink& sink) {
  bool high_ok = wm.high > 0 && wm.high <= 1;
  bool low_ok = wm.low > 0 && wm.low < 1;
  if (!high_ok) {
    sink.Error(field + ".high", "high watermark " + Num(wm.high) + " is out of range",
               kWatermarkRule);
  }
  if (!low_ok) {
    sink.Error(field + ".low", "low watermark " + Num(wm.low) + " is out of range",
               kWatermarkRule);
  }
  if (high_ok && low_ok && wm.low >= wm.high) {
    sink.Error(field, "low watermark " + Num(wm.low) + " must be below high watermark " +
                          Num(wm.high),
               kWatermarkRule);
  }
}

void CheckCodec(const CodecConfig& c, const std::string& field, DiagnosticSink& sink) {
  if (c.kind == CodecKind::kZstd && (c.level < -7 || c.level > 22)) {
    sink.Error(field + ".level", "zstd level " + std::to_string(c.level) + " is out of range",
               "expected -7 to 22; 3 is a good default");
  }
  if (c.kind == CodecKind::kLz4 && (c.level < 1 || c.level > kLz4MaxAcceleration)) {
    sink.Error(field + ".level",
               "lz4 acceleration " + std::to_string(c.level) + " is out of range",
               "expected 1 for the best ratio up to 65537 for the fastest");
  }
  if (!(c.min_savings >= 0 && c.min_savings < 1)) {
    sink.Error(field + ".min_savings", "min_savings " + Num(c.min_savings) + " is out of range",
               "expected a fraction from 0 up to (not including) 1, e.g. 0.1");
  }
  if (c.chunk_bytes < kMinChunkBytes) {
    sink.Error(field + ".chunk", "chunk of " + std::to_string(c.chunk_bytes) + " bytes is too small",
               "expected at least 4KiB, e.g. 1MiB");
  }
}

void CheckIo(const IoConfig& io, const std::string& field, DiagnosticSink& sink) {
  if (io.queue_depth < 1 || io.queue_depth > 4096) {
    sink.Error(field + ".queue_depth",
               "queue_depth " + std::to_string(io.queue_depth) + " is out of range",
               "expected 1 to 4096");
  }
  if (io.block_bytes == 0 || (io.direct && io.block_bytes % kDirectAlign != 0)) {
    sink.Error(field + ".block_size",
               "block_size of " + std::to_string(io.block_bytes) + " bytes is not usable",
               io.direct ? "direct I/O needs a positive multiple of 4KiB, e.g. 1MiB"
                         : "expected a positive size, e.g. 1MiB");
  } else if (io.segment_bytes < io.block_bytes) {
    sink.Error(field + ".segment_size",
               "segment_size (" + FormatBytes(io.segment_bytes) + ") is smaller than block_size (" +
                   FormatBytes(io.block_bytes) + ")",
               "expected segment_size >= block_size, e.g. 256MiB");
  }
}

void CheckTier(const TierConfig& t, const std::string& f, DiagnosticSink& sink) {
  if (t.name.empty()) {
    sink.Error(f + ".name", "the tier name is empty", "e.g. name: host");
  } else if (!ValidTierName(t.name)) {
    sink.Error(f + ".name", "tier name '" + t.name + "' has characters other than letters, digits, '-', '_' and '.'");
  }
  if (t.capacity_bytes == 0 && !LooksLikePercent(t.capacity_text)) {
    sink.Error(f + ".capacity", "capacity must be greater than zero",
               "a size like 64GiB or a percentage like 80%");
  }
  CheckWatermarks(t.watermarks, f + ".watermarks", sink);
  CheckCodec(t.codec, f + ".codec", sink);
  if (t.max_object_bytes != 0 && t.capacity_bytes != 0 && t.max_object_bytes > t.capacity_bytes) {
    sink.Warning(f + ".max_object_size",
                 "max_object_size (" + FormatBytes(t.max_object_bytes) + ") is larger than the capacity (" +
                     FormatBytes(t.capacity_bytes) + "), which already bounds the objects the tier takes");
  }
  if (t.pin_at_open_bytes != 0 && t.capacity_bytes != 0 && t.pin_at_open_bytes > t.capacity_bytes) {
    sink.Error(f + ".pin_at_open",
               "pin_at_open (" + FormatBytes(t.pin_at_open_bytes) + ") is larger than the capacity (" +
                   FormatBytes(t.capacity_bytes) + ")",
               "at most the capacity, e.g. pin_at_open: 100%");
  }
  if (t.min_free_bytes > kMaxMinFreeBytes) {
    sink.Error(f + ".min_free", "min_free of " + std::to_string(t.min_free_bytes) + " bytes (" +
                                    FormatBytes(t.min_free_bytes) + ") is more than any filesystem holds, so the "
                                    "reserve could never be kept",
               "expected a size like 10GiB or a percentage below 100%, e.g. 5%");
  }
  if (t.min_free_fraction < 0 || t.min_free_fraction >= 1) {
    sink.Error(f + ".min_free", "min_free of " + std::to_string(t.min_free_fraction * 100) +
                                    "% leaves no room to write",
               "expected a size like 10GiB or a percentage below 100%, e.g. 5%");
  }
  if (t.kind == TierKind::kFile) {
    if (t.paths.empty()) {
      sink.Error(f + ".paths", "a file tier needs at least one directory",
                 "e.g. paths: [/var/tmp/spillway]");
    }
    for (size_t k = 0; k < t.paths.size(); ++k) {
      if (t.paths[k].empty() || t.paths[k].front() != '/') {
        sink.Error(f + ".paths[" + std::to_string(k) + "]",
                   "expected an absolute path, found '" + t.paths[k] + "'",
                   "start it with '/', e.g. ${SPILLWAY_DIR:-/var/tmp/spillway}/ssd");
      }
    }
    CheckIo(t.io, f + ".io", sink);
  } else if (!t.paths.empty()) {
    sink.Warning(f + ".paths", std::string("paths are ignored for a ") + TierKindName(t.kind) +
                                   " tier");
  }
  if (t.kind == TierKind::kGpu && t.device < 0) {
    sink.Error(f + ".device", "device " + std::to_string(t.device) + " is negative",
               "expected a CUDA device index, 0 for the first GPU");
  }
}

std::string Normal(const std::string& p) {
  std::string s = std::filesystem::path(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

// Earlier directories (normalized path -> index into the list) that `path`
// equals, lies inside, or contains; the first found.
std::optional<size_t> Clash(const std::map<std::string, size_t>& seen, const std::string& path) {
  if (auto it = seen.find(path); it != seen.end()) return it->second;
  for (size_t cut = path.find_last_of('/'); cut != std::string::npos && cut > 0;
       cut = path.find_last_of('/', cut - 1)) {
    if (auto it = seen.find(path.substr(0, cut)); it != seen.end()) return it->second;
  }
  if (path != "/" && seen.count("/")) return seen.at("/");
  const std::string below = path == "/" ? "/" : path + "/";
  auto it = seen.lower_bound(below);
  if (it != seen.end() && it->first.compare(0, below.size(), below) == 0) return it->second;
  return std::nullopt;
}

void CheckDirectories(const Config& config, DiagnosticSink& sink) {
  struct Dir {
    std::string path;
    size_t tier;
    size_t index;
  };
  std::vector<Dir> dirs;
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < config.tiers.size(); ++i) {
    const TierConfig& t = config.tiers[i];
    if (t.kind != TierKind::kFile) continue;
    for (size_t k = 0; k < t.paths.size(); ++k) {
      if (t.paths[k].empty() || t.paths[k].front() != '/') continue;
      Dir y{Normal(t.paths[k]), i, k};
      if (std::optional<size_t> clash = Clash(seen, y.path)) {
        const Dir& x = dirs[*clash];
        std::string other =
            x.tier == y.tier ? "this tier" : "tier '" + config.tiers[x.tier].name + "'";
        std::string field = TierField(y.tier) + ".paths[" + std::to_string(y.index) + "]";
        if (x.path == y.path) {
          sink.Error(field, "directory '" + y.path + "' is also used by " + other,
                     "give every tier its own directory");
        } else {
          sink.Error(field, "directory '" + y.path + "' overlaps '" + x.path + "' of " + other,
                     "tier directories may not be nested: scratch tiers are wiped at open");
        }
      }
      seen.emplace(y.path, dirs.size());
      dirs.push_back(std::move(y));
    }
  }
}

// Label names the exporter uses itself, or that Prometheus reserves.
constexpr std::string_view kReservedLabels[] = {"tier", "kind", "from", "to", "direction", "op", "le",
                                                "version", "cuda", "http"};

void CheckMetricsLabels(const MetricsConfig& m, DiagnosticSink& sink) {
  std::set<std::string> seen;
  for (const auto& [name, value] : m.labels) {
    const std::string f = "metrics.labels." + name;
    const bool valid = !name.empty() && (std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_') &&
                       std::all_of(name.begin(), name.end(), [](char c) {
                         return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
                       });
    if (!valid) {
      sink.Error(f, "label name '" + name + "' is not a Prometheus label name",
                 "letters, digits and '_', not starting with a digit, e.g. worker");
    } else if (name.rfind("__", 0) == 0) {
      sink.Error(f, "label names starting with '__' are reserved by Prometheus");
    } else if (std::find(std::begin(kReservedLabels), std::end(kReservedLabels), name) != std::end(kReservedLabels)) {
      sink.Error(f, "label '" + name + "' is set by spillway itself on some series", "choose another name, e.g. worker");
    }
    if (!seen.insert(name).second) sink.Error(f, "label '" + name + "' is given twice");
  }
}

// "HOST:PORT" with an IPv4 address or "localhost" and a port 1..65535.
void CheckListen(const std::string& listen, DiagnosticSink& sink) {
  if (listen.empty()) return;
  const size_t colon = listen.rfind(':');
  const std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
  const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  char* end = nullptr;
  const long p = port.empty() ? 0 : std::strtol(port.c_str(), &end, 10);
  bool host_ok = host == "localhost";
  if (!host_ok) {
    int a, b, c, d;
    char tail;
    host_ok = std::sscanf(host.c_str(), "%d.%d.%d.%d%c", &a, &b, &c, &d, &tail) == 4 && a >= 0 && a < 256 &&
              b >= 0 && b < 256 && c >= 0 && c < 256 && d >= 0 && d < 256;
  }
  if (!host_ok || port.empty() || *end != '\0' || p < 1 || p > 65535) {
    sink.Error("metrics.listen", "'" + listen + "' is not an address to listen on",
               "HOST:PORT with an IPv4 address or localhost, e.g. 127.0.0.1:9464");
  }
}

void CheckChain(const Config& config, DiagnosticSink& sink) {
  if (config.tiers.empty()) {
    sink.Error("tiers", "the tier chain is empty", "add at least one tier");
    return;
  }
  std::map<std::string, size_t> first;
  size_t slowest = 0;
  for (size_t i = 0; i < config.tiers.size(); ++i) {
    const TierConfig& t = config.tiers[i];
    const std::string f = TierField(i);
    if (!t.name.empty()) {
      auto [it, fresh] = first.emplace(t.name, i);
      if (!fresh) {
        Origin o = sink.origins() ? sink.origins()->Find(TierField(it->second))
                                  : Origin{TierField(it->second), 0, 0};
        sink.Error(f + ".name", "duplicate tier name '" + t.name + "'",
                   "first used by " + o.path +
                       (o.line ? " at line " + std::to_string(o.line) : std::string()));
      }
    }
    const TierConfig& prev = config.tiers[slowest];
    if (KindRank(t.kind) < KindRank(prev.kind)) {
      sink.Error(f + ".kind",
                 std::string(TierKindName(t.kind)) + " tier '" + t.name + "' comes after " +
                     TierKindName(prev.kind) + " tier '" + prev.name + "'",
                 "order the chain fastest first: gpu tiers, then host, then file");
    } else {
      slowest = i;
    }
  }
  CheckDirectories(config, sink);
}

}  // namespace

void CheckConfigValues(const Config& config, DiagnosticSink& sink) {
  if (config.version != 1) {
    sink.Error("version", "unsupported version " + std::to_string(config.version),
               "expected version: 1");
  }
  CheckWatermarks(config.default_watermarks, "defaults.watermarks", sink);
  if (config.policy.eviction != "lru") {
    sink.Error("policy.eviction", "unknown eviction policy '" + config.policy.eviction + "'",
               SuggestHint(config.policy.eviction, {"lru"}));
  }
  const MetricsConfig& m = config.metrics;
  if (!(m.dump_interval_s > 0)) {
    sink.Error("metrics.dump_interval_s", "dump_interval_s must be positive, found " +
                                              Num(m.dump_interval_s));
  } else if (!(m.dump_interval_s <= kMaxDumpIntervalS)) {
    sink.Error("metrics.dump_interval_s", "dump_interval_s " + Num(m.dump_interval_s) + " is more than a year",
               "seconds between dumps, e.g. 10");
  }
  if (!(m.event_sample >= 0 && m.event_sample <= 1)) {
    sink.Error("metrics.event_sample", "event_sample " + Num(m.event_sample) + " is out of range",
               "expected a fraction from 0 to 1");
  }
  if (m.event_rate_limit == 0) {
    sink.Error("metrics.event_rate_limit", "event_rate_limit must be at least 1 line per second");
  }
  CheckMetricsLabels(m, sink);
  CheckListen(m.listen, sink);
  if (config.workers_per_node < 1) {
    sink.Error("defaults.workers_per_node",
               "workers_per_node " + std::to_string(config.workers_per_node) + " is below 1",
               "the number of engines (Dask workers) on one node, e.g. 2");
  }
  CheckDeviceValues(config, sink);
  for (size_t i = 0; i < config.tiers.size(); ++i) CheckTier(config.tiers[i], TierField(i), sink);
  CheckChain(config, sink);
}

namespace {

void ResolveCapacity(TierConfig& t, const std::string& f, uint64_t total, const std::string& of,
                     DiagnosticSink& sink) {
  if (t.capacity_bytes != 0 || !LooksLikePercent(t.capacity_text)) return;
  StatusOr<SizeSpec> spec = ParseSize(t.capacity_text);
  if (!spec.ok()) {
    sink.Error(f + ".capacity", spec.status().message());
    return;
  }
  if (total == 0) {
    sink.Error(f + ".capacity", "cannot resolve " + t.capacity_text + ": the size of " + of +
                                    " is unknown",
               "give the capacity in bytes, e.g. 64GiB");
    return;
  }
  t.capacity_bytes = ResolveSize(*spec, total);
  if (t.capacity_bytes == 0) {
    sink.Error(f + ".capacity", t.capacity_text + " of " + of + " is 0 bytes");
  }
}

// Directories equal to, inside or around each other once symlinks and bind
// mounts are seen through (the lexical check in CheckDirectories cannot):
// a scratch tier would wipe the other tier's records at Open.
void CheckAliasedDirectories(const Config& config, DiagnosticSink& sink) {
  struct Dir {
    DirIdentity id;
    std::string path;
    size_t tier;
  };
  std::vector<Dir> dirs;
  auto inside = [](const Dir& inner, const Dir& outer) {
    const std::string& o = outer.id.canonical;
    if (inner.id.canonical.size() > o.size() && inner.id.canonical.compare(0, o.size(), o) == 0 &&
        (o == "/" || inner.id.canonical[o.size()] == '/')) {
      return true;
    }
    if (!outer.id.exists || outer.id.chain.empty()) return false;
    auto from = inner.id.chain.begin() + (inner.id.exists && !inner.id.chain.empty() ? 1 : 0);
    return std::find(from, inner.id.chain.end(), outer.id.chain.front()) != inner.id.chain.end();
  };
  for (size_t i = 0; i < config.tiers.size(); ++i) {
    const TierConfig& t = config.tiers[i];
    if (t.kind != TierKind::kFile) continue;
    for (size_t k = 0; k < t.paths.size(); ++k) {
      if (t.paths[k].empty() || t.paths[k].front() != '/') continue;
      Dir y{IdentifyDirectory(t.paths[k]), t.paths[k], i};
      const std::string field = TierField(i) + ".paths[" + std::to_string(k) + "]";
      for (const Dir& x : dirs) {
        const std::string other = x.tier == i ? "this tier" : "tier '" + config.tiers[x.tier].name + "'";
        const bool same = x.id.canonical == y.id.canonical ||
                          (x.id.exists && y.id.exists && !x.id.chain.empty() && !y.id.chain.empty() &&
                           x.id.chain.front() == y.id.chain.front());
        if (same) {
          sink.Error(field, "directory '" + y.path + "' is the same directory as '" + x.path + "' of " + other +
                                " (both are '" + y.id.canonical + "')",
                     "give every tier its own directory; symlinks and bind mounts count");
        } else if (inside(y, x) || inside(x, y)) {
          const std::string really = " (really '" + y.id.canonical + "') ";
          const std::string theirs = "' of " + other + " (really '" + x.id.canonical + "')";
          sink.Error(field,
                     inside(y, x) ? "directory '" + y.path + "'" + really + "lies inside '" + x.path + theirs
                                  : "directory '" + y.path + "'" + really + "has '" + x.path + theirs + " inside it",
                     "tier directories may not be nested: scratch tiers are wiped at open");
        } else {
          continue;
        }
        break;
      }
      dirs.push_back(std::move(y));
    }
  }
}

void CheckFileTier(TierConfig& t, const std::string& f, const LoadOptions& options,
                   DiagnosticSink& sink, std::map<std::string, PathProbe>* probes) {
  uint64_t free_bytes = 0;
  bool measured = false;
  bool all_direct = true;
  std::set<uint64_t> filesystems;
  for (size_t k = 0; k < t.paths.size(); ++k) {
    PathProbe p = CheckTierDirectory(t, k, f, options, sink);
    if (probes) (*probes)[t.paths[k]] = p;
    if (p.fs_total_bytes == 0) continue;
    if (t.min_free_bytes >= p.fs_total_bytes && t.min_free_bytes <= kMaxMinFreeBytes) {
      sink.Warning(f + ".min_free",
                   "min_free of " + FormatBytes(t.min_free_bytes) + " is not below the size of the filesystem of '" +
                       t.paths[k] + "' (" + FormatBytes(p.fs_total_bytes) + "): the tier will never write there",
                   "a reserve smaller than the filesystem, e.g. 5%");
    }
    measured = true;
    all_direct = all_direct && p.direct_io;
    if (filesystems.insert(p.fs_id).second) free_bytes += p.fs_free_bytes;
  }
  if (!measured) return;
  if (t.capacity_bytes > free_bytes) {
    sink.Warning(f + ".capacity",
                 "only " + FormatBytes(free_bytes) + " free for a capacity of " +
                     FormatBytes(t.capacity_bytes),
                 "the tier will run out of space before it reaches its capacity");
  }
  if (!all_direct) t.io.direct = false;
}

// A metrics file's directory must exist or be creatable (its nearest
// existing ancestor a writable directory); with options.create_dirs (Open)
// the missing part is created here, 0755, as tier directories are.
void CheckMetricsPath(const std::string& path, const std::string& field, const LoadOptions& options,
                      DiagnosticSink& sink) {
  if (path.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(path, ec))) {
    sink.Error(field, "'" + path + "' is a directory", "name a file inside it");
    return;
  }
  const fs::path dir = fs::path(path).has_parent_path() ? fs::path(path).parent_path() : fs::path(".");
  fs::path existing = dir;
  while (!fs::exists(fs::status(existing, ec)) && existing.has_parent_path() && existing != existing.parent_path()) {
    existing = existing.parent_path();
  }
  if (!fs::is_directory(fs::status(existing, ec))) {
    sink.Error(field, "'" + existing.string() + "' (on the way to '" + path + "') is not a directory");
    return;
  }
  if (::access(existing.c_str(), W_OK | X_OK) != 0) {
    sink.Error(field, existing == dir ? "directory '" + dir.string() + "' is not writable by this user"
                                      : "directory '" + dir.string() + "' does not exist and cannot be created: '" +
                                            existing.string() + "' is not writable by this user");
    return;
  }
  if (existing != dir && options.create_dirs) {
    fs::create_directories(dir, ec);
    if (ec) sink.Error(field, "cannot create directory '" + dir.string() + "': " + ec.message());
  }
}

}  // namespace

void CheckMachine(Config* config, const LoadOptions& options, DiagnosticSink& sink,
                  std::map<std::string, PathProbe>* probes) {
  if (options.check_filesystem) {
    CheckMetricsPath(config->metrics.event_log, "metrics.event_log", options, sink);
    CheckMetricsPath(config->metrics.prometheus_file, "metrics.prometheus_file", options, sink);
  }
  const uint64_t physical = PhysicalMemoryBytes();
  const GpuProbe gpu = options.gpu ? *options.gpu : DetectGpus();
  const std::vector<uint64_t>& gpus = gpu.device_total_bytes;
  config->worker = ResolveWorker(options, sink);
  // Host memory and filesystems are shared by the node's workers: a
  // percentage is of this worker's share (gpu tiers have a device each).
  const uint64_t workers = static_cast<uint64_t>(std::max(config->workers_per_node, 1));
  const std::string share = workers > 1 ? " / " + std::to_string(workers) + " workers_per_node" : "";
  if (config->worker >= 0 && workers > 1 && static_cast<uint64_t>(config->worker) >= workers) {
    sink.Warning("defaults.workers_per_node",
                 "worker " + std::to_string(config->worker) + " is beyond workers_per_node " +
                     std::to_string(workers) + " (workers are numbered from 0)",
                 "raise workers_per_node to the number of workers on the node");
  }
  std::vector<bool> drop(config->tiers.size(), false);
  for (size_t i = 0; i < config->tiers.size(); ++i) {
    TierConfig& t = config->tiers[i];
    const std::string f = TierField(i);
    uint64_t total = 0;
    std::string of;
    if (t.kind == TierKind::kGpu) {
      std::string problem, field;
      if (!gpu.built_with_cuda) {
        problem = "gpu tier '" + t.name + "' needs CUDA, but spillway was built without CUDA";
        field = f + ".kind";
      } else {
        problem = CheckGpuDevices(t, f, gpu, config->worker, static_cast<int>(workers), sink, &field);
      }
      if (!problem.empty()) {
        if (t.optional) {
          sink.Warning(field, problem + "; the optional tier is left out");
          drop[i] = true;
        } else {
          sink.Error(field, problem, "set optional: true to leave the tier out where it cannot run");
        }
        continue;
      }
      total = gpus[t.device];
      of = GpuName(gpu, t.device) + "'s memory";
    } else if (t.kind == TierKind::kHost) {
      total = physical / workers;
      of = "physical memory" + share;
    } else {
      total = t.paths.empty() ? 0 : FilesystemBytes(t.paths[0]) / workers;
      of = (t.paths.empty() ? "the filesystem" : "the filesystem of '" + t.paths[0] + "'") + share;
    }
    ResolveCapacity(t, f, total, of, sink);
    if (t.kind == TierKind::kGpu && total > 0 && t.capacity_bytes > total) {
      sink.Error(f + ".capacity",
                 "capacity " + FormatBytes(t.capacity_bytes) + " exceeds " + of + " (" + FormatBytes(total) + ")" +
                     (config->worker >= 0 ? " for worker " + std::to_string(config->worker) : std::string()),
                 "a gpu tier cannot hold more than its device; a percentage such as 80% fits every device");
    } else if (t.kind != TierKind::kFile && total > 0 && t.capacity_bytes > total) {
      sink.Warning(f + ".capacity", "capacity " + FormatBytes(t.capacity_bytes) + " exceeds " +
                                        of + " (" + FormatBytes(total) + ")");
    }
    if (t.kind == TierKind::kFile && options.check_filesystem) {
      CheckFileTier(t, f, options, sink, probes);
    }
  }
  if (options.check_filesystem) CheckAliasedDirectories(*config, sink);
  bool dropped = false;
  for (size_t i = drop.size(); i-- > 0;) {
    if (!drop[i]) continue;
    config->tiers.erase(config->tiers.begin() + static_cast<std::ptrdiff_t>(i));
    dropped = true;
  }
  if (dropped && config->tiers.empty()) {
    sink.Error("tiers", "no tier is left once the optional tiers that cannot run here are left out");
  }
}

}  // namespace spillway
