// Plain, validated configuration structs. Produced by config/yaml_loader.cc
// (the only yaml-cpp user) or built by hand in code and tests.
//
// Units are in the names: *_bytes are bytes, fractions are 0..1. Every field
// has the documented default below; docs/config.md is the user-facing table of
// the same keys.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spillway {

enum class TierKind : unsigned char { kGpu, kHost, kFile };
enum class Medium : unsigned char { kUnspecified, kNvme, kSsd, kHdd, kNfs };
// Values are part of the on-disk format (record header codec byte): never change them.
enum class CodecKind : unsigned char { kNone = 0, kZstd = 1, kLz4 = 2 };
enum class GpuMemory : unsigned char { kDevice, kManaged };
enum class IoEngine : unsigned char { kAuto, kUring, kPosix };

const char* TierKindName(TierKind k);
const char* MediumName(Medium m);
const char* CodecKindName(CodecKind c);
const char* GpuMemoryName(GpuMemory m);
const char* IoEngineName(IoEngine e);

// Inverse of the *Name functions: the spelling used in config files, exactly.
std::optional<TierKind> TierKindFromName(std::string_view name);
std::optional<Medium> MediumFromName(std::string_view name);  // "" is not kUnspecified
std::optional<CodecKind> CodecKindFromName(std::string_view name);
std::optional<GpuMemory> GpuMemoryFromName(std::string_view name);
std::optional<IoEngine> IoEngineFromName(std::string_view name);

// Level used when a config names a codec without one: zstd 3, lz4 1, none 0.
int DefaultCodecLevel(CodecKind c);

struct Watermarks {
  double high = 0.90;  // mover starts demoting above this fraction of capacity
  double low = 0.75;   // ... and stops once usage is at or below this
  bool operator==(const Watermarks&) const = default;
};

struct CodecConfig {
  CodecKind kind = CodecKind::kNone;
  // zstd: compression level -7..22 (default 3). lz4: acceleration >= 1 (default 1).
  int level = 0;
  // Data that does not shrink by at least this fraction is stored raw.
  double min_savings = 0.10;
  // Objects larger than this are encoded in independent chunks (parallel, streamed).
  uint64_t chunk_bytes = 1ull << 20;
  bool operator==(const CodecConfig&) const = default;
};

struct IoConfig {
  bool direct = true;            // O_DIRECT when the filesystem allows it
  uint32_t queue_depth = 32;     // requests kept in flight per batch
  IoEngine engine = IoEngine::kAuto;  // auto: io_uring, falling back to POSIX
  uint64_t segment_bytes = 256ull << 20;  // size a segment file grows to before a new one
  uint64_t block_bytes = 1ull << 20;      // largest single write request
  bool operator==(const IoConfig&) const = default;
};

struct TierConfig {
  std::string name;
  TierKind kind = TierKind::kHost;
  // Resolved capacity in bytes (percentages resolved at load time).
  uint64_t capacity_bytes = 0;
  // As written, for messages ("80%", "64GiB"). A percentage here with
  // capacity_bytes == 0 is resolved against the machine by FinalizeConfig.
  std::string capacity_text;
  Watermarks watermarks;
  CodecConfig codec;
  // Objects larger than this skip the tier (Put, demotion and promotion
  // alike place them further down); 0: no limit.
  uint64_t max_object_bytes = 0;
  // file tiers
  Medium medium = Medium::kUnspecified;
  std::vector<std::string> paths;  // striped; ${VAR} already expanded
  IoConfig io;
  bool persistent = false;     // survives restart; scratch tiers are wiped at Open
  bool allow_symlink = false;  // accept a tier directory that is a symlink or foreign-owned
  // A scratch tier may delete the segments of a directory that a persistent
  // tier wrote (it has a MANIFEST); without it, Open refuses such a directory.
  bool wipe_persistent = false;
  // Free space each path's filesystem keeps: writes that would leave less
  // go to another path or tier. Bytes, or a fraction of the filesystem's size
  // (min_free_fraction, from a percentage); the larger applies. 0: none.
  uint64_t min_free_bytes = 0;
  double min_free_fraction = 0;
  // gpu tiers
  // The CUDA device (this process's ordinal). The config may instead choose
  // it per worker (one Dask worker per GPU; docs/config.md "One worker per
  // GPU"): `device: auto` (device_auto) or `device: [0, 1, ...]`
  // (device_list, indexed by the worker). The loader resolves those into
  // `device` for the worker it loads for (LoadOptions::worker).
  int device = 0;
  bool device_auto = false;
  std::vector<int> device_list;
  GpuMemory memory = GpuMemory::kDevice;
  uint64_t headroom_bytes = 0;  // demote when free device memory falls below this
  // host tiers
  bool pinned = true;  // page-locked when CUDA is present
  // Bytes (or a fraction of the capacity) page-locked before Open returns.
  // The rest is pinned in the background; allocations beyond what is pinned
  // use plain memory, which copies to and from a GPU several times slower.
  uint64_t pin_at_open_bytes = 0;
  double pin_at_open_fraction = 0;
  // a tier that cannot be set up (no GPU, no CUDA) is dropped with a warning
  bool optional = false;
  bool operator==(const TierConfig&) const = default;
};

struct PolicyConfig {
  std::string eviction = "lru";
  bool promote_on_read = true;
};

struct MetricsConfig {
  std::string prometheus_file;   // textfile-collector output; empty = off
  double dump_interval_s = 10.0;
  std::string event_log;         // JSON lines spill event log; empty = off
  double event_sample = 1.0;     // fraction of moves logged
  uint32_t event_rate_limit = 1000;  // lines per second at most
  // Constant labels added to every Prometheus series, so several engines on
  // one node (one per Dask worker) write distinct series. Unset
  // (labels_set false): {engine="<pid>"}, plus ".<n>" for the n-th engine a
  // process opens. `labels: {}` sets none.
  std::vector<std::pair<std::string, std::string>> labels;
  bool labels_set = false;
  // "127.0.0.1:9464": serve the metrics over HTTP at GET /metrics; empty = off.
  // Needs a build with SPILLWAY_METRICS_HTTP (the default).
  std::string listen;
};

struct Config {
  int version = 1;
  std::string source;   // file the config came from ("<memory>" when built in code)
  std::string profile;  // profile applied, empty when none
  Watermarks default_watermarks;
  // Engines (Dask workers) on one node sharing its memory and filesystems
  // (defaults.workers_per_node): a host tier's capacity in % of physical
  // memory, and a file tier's in % of its filesystem, is divided among them.
  int workers_per_node = 1;
  // The worker this chain was resolved for (0-based; LoadOptions::worker or
  // $SPILLWAY_WORKER_INDEX), -1 when none: per-worker devices use worker 0's.
  int worker = -1;
  std::vector<TierConfig> tiers;  // fastest first
  PolicyConfig policy;
  MetricsConfig metrics;
};

}  // namespace spillway
