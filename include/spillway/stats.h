// Engine statistics: a snapshot of per-tier and per-boundary counters.
// Counters are atomics updated on the data path with no lock, so taking a
// snapshot is cheap and always on. Rendered as a table, JSON and Prometheus
// text by the functions at the end of this file.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace spillway {

struct TierStats {
  std::string name;
  std::string kind;              // gpu | host | file
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;       // reserved: stored bytes (after codec) incl. pinned
  uint64_t pinned_bytes = 0;     // raw bytes of objects with a live Handle
  uint64_t objects = 0;
  uint64_t raw_bytes = 0;        // raw size of the objects stored here
  uint64_t hits = 0;             // Gets served from this tier
  uint64_t bytes_written = 0;    // stored bytes written into the tier
  uint64_t raw_bytes_written = 0;
  uint64_t bytes_read = 0;       // stored bytes read back
  uint64_t demotions_in = 0;     // objects moved in from the tier above
  uint64_t demotions_out = 0;    // objects moved down from here
  uint64_t promotions_in = 0;
  uint64_t promotions_out = 0;
  uint64_t checksum_failures = 0;
  uint64_t io_errors = 0;
  uint64_t segments = 0;         // file tiers: segment files
  uint64_t disk_bytes = 0;       // file tiers: bytes allocated on disk
  // Time since the engine opened during which no demotion batch out of
  // this tier was queued or running (the mover's batches; 0 for the last
  // tier). Over a spill, the share of it spent here is the time the tier
  // below received nothing from this one.
  uint64_t demotion_idle_ns = 0;
  // stored / raw of what was written (1.0 for no codec; < 1 compresses)
  double compression_ratio() const {
    return raw_bytes_written ? static_cast<double>(bytes_written) / raw_bytes_written : 1.0;
  }
};

// Latency histogram with power-of-two microsecond buckets: bucket i counts
// moves that took [2^(i-1), 2^i) us (bucket 0: < 1 us).
inline constexpr int kLatencyBuckets = 32;

struct BoundaryStats {
  std::string from;
  std::string to;
  bool down = true;             // demotion (true) or promotion (false)
  uint64_t objects = 0;
  uint64_t bytes = 0;           // raw bytes moved
  uint64_t stored_bytes = 0;    // bytes after the destination's codec
  uint64_t nanos = 0;           // time spent moving
  uint64_t failures = 0;        // moves abandoned (I/O error, no space, corruption)
  uint64_t retries = 0;
  uint64_t latency_us[kLatencyBuckets] = {};
  double throughput_bytes_per_s() const { return nanos ? bytes * 1e9 / nanos : 0.0; }
};

struct EngineStats {
  std::vector<TierStats> tiers;
  std::vector<BoundaryStats> boundaries;
  uint64_t objects = 0;
  uint64_t puts = 0;
  uint64_t gets = 0;
  uint64_t misses = 0;  // Gets of absent keys
  uint64_t erases = 0;
  uint64_t sync_demotions = 0;  // demotions done on the caller's thread (backpressure)
  // Reservations (Put, an adopted host allocation, a device allocation, a
  // Prefetch's promotion) that found their tier full and waited for the
  // background mover to make room, and the time they waited, in nanoseconds
  // (totals). A caller's share of a spill spent here is what the mover and
  // the tiers below cost it.
  uint64_t backpressure_waits = 0;
  uint64_t backpressure_wait_ns = 0;
  uint64_t event_log_lines = 0;    // event log lines written (0 when the log is off)
  uint64_t event_log_dropped = 0;  // lines refused by the rate limit or lost to write errors
  // Promoted objects whose scratch-file record is kept as a clean copy, and
  // demotions that went back to such a copy instead of writing (total).
  // File tiers' objects and used bytes include the clean copies.
  uint64_t clean_copies = 0;
  uint64_t clean_demotions = 0;
  // The page-locked host pool (pinned host tiers with CUDA present; 0 without).
  uint64_t pinned_pool_bytes = 0;      // page-locked now
  uint64_t pinned_fallback_bytes = 0;  // allocated from plain memory because the pool had no room yet (total)
  // Freed host blocks kept for reuse by host tiers without a pinned pool
  // (within their capacity), and the allocations of 64 KiB or more that
  // found one or not (totals).
  uint64_t host_cache_bytes = 0;
  uint64_t host_cache_hits = 0;
  uint64_t host_cache_misses = 0;
  // Engine::SetProcessMemoryLimit (0: off), this process's resident memory
  // when the stats were taken, and how far above the limit the mover last
  // found it (0 when below).
  uint64_t process_memory_limit = 0;
  uint64_t process_resident_bytes = 0;
  uint64_t process_memory_excess_bytes = 0;
  // metrics.labels as resolved at Open: added to every Prometheus series.
  std::vector<std::pair<std::string, std::string>> labels;
};

// Renderings of EngineStats for people (a table), programs (JSON) and
// Prometheus (text exposition format 0.0.4); docs/observability.md lists
// every metric, its labels and its meaning.
// Human-readable per-tier and per-boundary tables and a summary line.
std::string FormatStatsTable(const EngineStats& stats);

// One JSON object: {"tiers": [...], "boundaries": [...], "objects": ..., "puts": ...}.
// indent < 0: one line.
std::string StatsToJson(const EngineStats& stats, int indent = -1);

// Prometheus text format: metric names prefixed "spillway_", # HELP and
// # TYPE before each family, tier series labelled {tier, kind}, boundary
// series labelled {from, to, direction}, move latency as a histogram in
// seconds, every series also carrying stats.labels (first), and
// spillway_build_info{version, cuda} = 1. Label values are escaped, so any
// tier name is safe.
std::string StatsToPrometheus(const EngineStats& stats);

}  // namespace spillway
