// Engine::Open: validates the config, builds the tiers, recovers persistent
// file tiers, and starts the mover. Also EngineCore::Stats.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <unordered_map>

#include "spillway/config_loader.h"
#include "engine/engine_core.h"
#include "base/checked_math.h"
#include "base/process_memory.h"
#include "base/scheduler.h"
#include "engine/demoter.h"
#include "engine/mover.h"
#include "engine/placement.h"
#include "base/cuda_runtime.h"
#include "tiers/file_tier.h"
#include "tiers/pinned_pool.h"

namespace spillway {
namespace internal {
namespace {
// metrics.labels, or when the config sets none, {engine="<pid>"} (".<n>"
// appended for the n-th engine of the process), so two engines on a node
// never write the same series.
std::vector<std::pair<std::string, std::string>> DefaultMetricsLabels(const MetricsConfig& m) {
  if (m.labels_set) return m.labels;
  static std::atomic<uint64_t> opened{0};
  const uint64_t n = opened.fetch_add(1) + 1;
  std::string id = std::to_string(::getpid());
  if (n > 1) id += "." + std::to_string(n);
  return {{"engine", id}};
}

}  // namespace
}  // namespace internal

StatusOr<std::unique_ptr<Engine>> Engine::Open(const Config& config, const EngineOptions& options) {
  LoadOptions lo;
  lo.check_filesystem = true;
  lo.create_dirs = true;
  // Resolves percentages, drops unusable optional tiers, and checks the rest.
  Config resolved = config;
  std::vector<Diagnostic> diags = FinalizeConfig(resolved, lo);
  std::string errors;
  for (const Diagnostic& d : diags) {
    if (d.severity == Diagnostic::Severity::kError) errors += "\n  " + d.ToString();
  }
  if (!errors.empty()) return Status::InvalidArgument("invalid configuration:" + errors);
  auto core = std::make_unique<internal::EngineCore>(std::move(resolved), options);
  SPILLWAY_RETURN_IF_ERROR(core->Init());
  return std::unique_ptr<Engine>(std::move(core));
}

StatusOr<std::unique_ptr<Engine>> Engine::OpenFile(const std::string& path, const EngineOptions& options) {
  LoadOptions lo;
  lo.profile = options.profile;
  LoadResult r = LoadConfigFile(path, lo);
  if (!r.ok()) return Status::InvalidArgument("invalid configuration " + path + ":\n" + r.Summary());
  return Open(r.config, options);
}

namespace internal {

Status EngineCore::Init() {
  if (config_.tiers.empty()) return Status::InvalidArgument("the tier chain is empty");
  if (config_.tiers.size() > static_cast<size_t>(kMaxTiers)) {
    return Status::InvalidArgument("at most " + std::to_string(kMaxTiers) + " tiers are supported");
  }
  const size_t n = config_.tiers.size();
  boundaries_.reset(new BoundaryCounters[kMaxTiers * kMaxTiers]);
  hits_.reset(new StripedCounter[n]);
  pinned_bytes_.reset(new StripedCounter[n]);
  policy_ = std::make_unique<EvictionPolicy>(n);

  Logger* const logger = options_.logger != nullptr   ? options_.logger
                         : options_.file_io != nullptr ? options_.file_io->logger()
                                                       : StderrLogger();
  SPILLWAY_RETURN_IF_ERROR(OpenGpuSupport(logger));
  prefetch_pool_ = std::make_unique<ThreadPool>(2);

  std::unordered_map<int, FileIo*> io_by_engine;
  auto io_for = [&](IoEngine kind) -> FileIo* {
    if (options_.file_io) return options_.file_io;
    auto it = io_by_engine.find(static_cast<int>(kind));
    if (it != io_by_engine.end()) return it->second;
    owned_io_.push_back(MakeFileIo(kind, options_.logger));
    io_by_engine[static_cast<int>(kind)] = owned_io_.back().get();
    return owned_io_.back().get();
  };

  // The event log and the metrics dump: through the caller's FileIo (an
  // in-memory one in tests), else POSIX.
  FileIo* const diag_io = options_.file_io != nullptr ? options_.file_io : io_for(IoEngine::kPosix);

  // Host tiers the pinned pool does not serve keep their freed blocks for
  // reuse (HostBlockCache), within their capacity; so do the file tiers'
  // read buffers when there is no pool.
  uint64_t cached_capacity = 0;
  for (size_t i = 0; i < n; ++i) {
    const TierConfig& tc = config_.tiers[i];
    if (tc.kind == TierKind::kHost && !(tc.pinned && host_alloc_)) {
      host_cache_tiers_.push_back(static_cast<int>(i));
      cached_capacity = SaturatingAdd(cached_capacity, tc.capacity_bytes);
    }
  }
  if (!host_cache_tiers_.empty()) {
    // A process that set a memory limit (SetProcessMemoryLimit: a Dask
    // worker's store) keeps nothing: its memory manager reads the resident
    // set, and kept blocks would look like memory in use: with them a Dask
    // worker's peak resident set passed that of Dask's own store, and the
    // in-memory workload spilled (docs/performance.md, "Tuning constants").
    host_cache_ = std::make_unique<HostBlockCache>(cached_capacity, [this] {
      if (memory_.limit() != 0) return ~uint64_t{0} / 2;  // no room
      uint64_t used = 0;
      for (int t : host_cache_tiers_) {
        if (static_cast<size_t>(t) < tiers_.size()) used += tiers_[t]->used_bytes();
      }
      return used;
    });
  }
  HostAllocator* const read_alloc = host_alloc_ ? host_alloc_.get() : host_cache_.get();

  for (size_t i = 0; i < n; ++i) {
    const TierConfig& tc = config_.tiers[i];
    switch (tc.kind) {
      case TierKind::kHost:
        tiers_.push_back(std::make_unique<HostTier>(
            tc, static_cast<int>(i), tc.pinned && host_alloc_ ? host_alloc_.get() : host_cache_.get()));
        break;
      case TierKind::kFile: {
        auto ft = std::make_unique<FileTier>(tc, static_cast<int>(i), io_for(tc.io.engine), read_alloc);
        SPILLWAY_RETURN_IF_ERROR(ft->Open());
        tiers_.push_back(std::move(ft));
        break;
      }
      case TierKind::kGpu: {
        Status st;
        CreateGpuTier(tc, static_cast<int>(i), &st);
        if (!st.ok()) return st;
        break;
      }
    }
  }

  // Rebuild the index of persistent tiers: the newest record of a key wins,
  // within a tier and across tiers (record sequences are the engine's, kept
  // by copies, docs/format.md). Records written before kFlagEngineSequence
  // carry per-tier sequences (see below).
  struct Chosen {
    int tier;
    RecoveredObject obj;
  };
  std::unordered_map<std::string, Chosen> chosen;
  uint64_t max_sequence = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!persistent_file(static_cast<int>(i))) continue;
    auto* ft = static_cast<FileTier*>(tiers_[i].get());
    std::unordered_map<std::string, RecoveredObject> newest;
    std::vector<Location> stale;
    uint64_t skipped = 0, missing = 0;
    std::string report;
    Status st = ft->Recover(
        [&](RecoveredObject&& obj) {
          auto it = newest.find(obj.key);
          if (it == newest.end()) {
            std::string k = obj.key;
            newest.emplace(std::move(k), std::move(obj));
          } else if (obj.sequence > it->second.sequence) {
            stale.push_back(std::move(it->second.location));
            it->second = std::move(obj);
          } else {
            stale.push_back(std::move(obj.location));
          }
        },
        &skipped, &report, &missing);
    if (!st.ok()) return st.WithContext("recovering tier '" + ft->name() + "'");
    if (skipped > 0 || missing > 0) {
      std::string what;
      if (skipped > 0) what = "skipped " + std::to_string(skipped) + " corrupt or torn records";
      if (missing > 0) {
        what += (what.empty() ? "" : "; ") + std::to_string(missing) +
                " records missing (written before the last Flush, now gone)";
      }
      if (!report.empty() && report.back() == '\n') report.pop_back();
      logger->Log(LogLevel::kWarning, "tier '" + ft->name() + "': " + what + ":\n" + report);
    }
    max_sequence = std::max(max_sequence, ft->next_sequence() - 1);
    // Freed at the next Flush (deferred: see FileTier::CommitFrees).
    for (Location& loc : stale) tiers_[i]->Free(loc);
    for (auto& [key, obj] : newest) {
      auto it = chosen.find(key);
      if (it == chosen.end()) {
        chosen.emplace(key, Chosen{static_cast<int>(i), std::move(obj)});
        continue;
      }
      // Equal sequences are copies of one version (a crash during a move):
      // the upper tier's is kept. A record with the engine's sequence was
      // written after every record without one (older code); between two of
      // those the upper tier's is kept, as it always was.
      const RecoveredObject& prev = it->second.obj;
      const bool newer = obj.engine_sequence != prev.engine_sequence
                             ? obj.engine_sequence
                             : obj.engine_sequence && obj.sequence > prev.sequence;
      if (newer) {
        tiers_[it->second.tier]->Free(it->second.obj.location);
        it->second = Chosen{static_cast<int>(i), std::move(obj)};
      } else {
        tiers_[i]->Free(obj.location);
      }
    }
  }
  for (auto& [key, c] : chosen) {
    Insert(key, c.obj.location.raw_bytes, c.tier, std::move(c.obj.location), c.obj.sequence);
  }
  next_sequence_.store(max_sequence + 1);
  for (size_t i = 0; i < n; ++i) {
    if (!persistent_file(static_cast<int>(i))) continue;
    static_cast<FileTier*>(tiers_[i].get())->set_on_pending_frees([this] { ScheduleCheckpoint(); });
  }
  checkpoint_pool_ = std::make_unique<ThreadPool>(1);

  metrics_labels_ = DefaultMetricsLabels(config_.metrics);
  auto log = EventLog::Open(config_.metrics, nullptr, diag_io, logger);
  if (!log.ok()) return log.status().WithContext("metrics.event_log");
  event_log_ = std::move(*log);
  if (!config_.metrics.prometheus_file.empty()) {
    dumper_ = std::make_unique<MetricsDumper>([this] { return Stats(); }, config_.metrics.prometheus_file,
                                              config_.metrics.dump_interval_s, diag_io, logger);
    SPILLWAY_RETURN_IF_ERROR(dumper_->DumpNow().WithContext("metrics.prometheus_file"));
  }
  if (!config_.metrics.listen.empty()) {
    auto http = MetricsHttpServer::Start(config_.metrics.listen, [this] { return StatsToPrometheus(Stats()); });
    if (!http.ok()) return http.status();
    http_ = std::move(*http);
  }

  std::vector<Tier*> chain;
  for (auto& t : tiers_) chain.push_back(t.get());
  placement_ = std::make_unique<Placement>(chain);
  demoter_ = std::make_unique<Demoter>(this, placement_.get());
  Scheduler* scheduler = options_.scheduler;
  if (scheduler == nullptr && options_.background_mover) {
    // Enough threads for every boundary's batches at once: batches never
    // wait for each other, so this bounds concurrency, not correctness.
    owned_scheduler_ = std::make_unique<ThreadScheduler>(
        std::max<size_t>(2, DemotionPolicy::kMaxInflightPerBoundary * (n - 1)));
    scheduler = owned_scheduler_.get();
  }
  mover_ = std::make_unique<Mover>(this, demoter_.get(), scheduler);
  std::vector<bool> in_pinned_pool(n);
  for (size_t i = 0; i < n; ++i) in_pinned_pool[i] = config_.tiers[i].pinned && host_alloc_ != nullptr;
  memory_.Attach(std::move(chain), in_pinned_pool, mover_.get());
  mover_->Start();
  return Status::OK();
}

EngineStats EngineCore::Stats() {
  EngineStats s;
  const auto r = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
  for (size_t i = 0; i < tiers_.size(); ++i) {
    const Tier& t = *tiers_[i];
    const TierCounters& c = t.counters();
    TierStats ts;
    ts.name = t.name();
    ts.kind = TierKindName(t.kind());
    ts.capacity_bytes = t.capacity_bytes();
    ts.used_bytes = t.used_bytes();
    ts.pinned_bytes = pinned_bytes_[i].Load();
    ts.objects = r(c.objects);
    ts.raw_bytes = r(c.raw_bytes);
    ts.hits = hits_[i].Load();
    ts.bytes_written = r(c.bytes_written);
    ts.raw_bytes_written = r(c.raw_bytes_written);
    ts.bytes_read = r(c.bytes_read);
    ts.checksum_failures = r(c.checksum_failures);
    ts.io_errors = r(c.io_errors);
    if (!t.is_memory()) {
      auto* ft = static_cast<const FileTier*>(&t);
      ts.segments = ft->segment_count();
      ts.disk_bytes = ft->allocated_bytes();
    }
    if (mover_ && i + 1 < tiers_.size()) ts.demotion_idle_ns = mover_->state(static_cast<int>(i)).idle_ns;
    s.objects += ts.objects;
    s.tiers.push_back(std::move(ts));
  }
  for (size_t from = 0; from < tiers_.size(); ++from) {
    for (size_t to = 0; to < tiers_.size(); ++to) {
      if (from == to) continue;
      BoundaryCounters& b = boundary(static_cast<int>(from), static_cast<int>(to));
      if (r(b.objects) == 0 && r(b.failures) == 0) continue;
      BoundaryStats bs;
      bs.from = tiers_[from]->name();
      bs.to = tiers_[to]->name();
      bs.down = to > from;
      bs.objects = r(b.objects);
      bs.bytes = r(b.bytes);
      bs.stored_bytes = r(b.stored_bytes);
      bs.nanos = r(b.nanos);
      bs.failures = r(b.failures);
      bs.retries = r(b.retries);
      for (int k = 0; k < kLatencyBuckets; ++k) bs.latency_us[k] = r(b.latency_us[k]);
      if (bs.down) {
        s.tiers[from].demotions_out += bs.objects;
        s.tiers[to].demotions_in += bs.objects;
      } else {
        s.tiers[from].promotions_out += bs.objects;
        s.tiers[to].promotions_in += bs.objects;
      }
      s.boundaries.push_back(std::move(bs));
    }
  }
  s.puts = r(puts_);
  s.gets = gets_.Load();
  s.misses = r(misses_);
  s.erases = r(erases_);
  s.sync_demotions = r(sync_demotions_);
  s.backpressure_waits = r(backpressure_waits_);
  s.backpressure_wait_ns = r(backpressure_wait_ns_);
  s.clean_copies = r(clean_copies_);
  s.clean_demotions = r(clean_demotions_);
  if (event_log_) {
    s.event_log_lines = event_log_->written();
    s.event_log_dropped = event_log_->dropped();
  }
  s.labels = metrics_labels_;
  s.process_memory_limit = memory_.limit();
  s.process_resident_bytes = ProcessResidentBytes();
  s.process_memory_excess_bytes = s.process_memory_limit ? memory_.excess() : 0;
  if (host_cache_) {
    const HostBlockCacheStats cs = host_cache_->stats();
    s.host_cache_bytes = cs.cached_bytes;
    s.host_cache_hits = cs.hits;
    s.host_cache_misses = cs.misses;
  }
  if (auto* pool = dynamic_cast<PinnedHostAllocator*>(host_alloc_.get())) {
    const PinnedPoolStats ps = pool->stats();
    s.pinned_pool_bytes = ps.slab_bytes;
    s.pinned_fallback_bytes = ps.fallback_bytes;
  }
  return s;
}

}  // namespace internal
}  // namespace spillway
