// `spillway stress`: random Put/Get/Erase/Flush from several threads against
// an in-memory reference model, verifying every byte read. Each thread owns
// the keys k with k % threads == thread, so the model needs no locking and a
// run is reproducible from its seed. With --faults, I/O errors are injected
// and, at the end, cleared before a final pass verifies every key: an object
// the engine acknowledged must come back byte-identical ("lost" counts those
// that do not, "corrupt" those that come back wrong). With --reopen the
// engine is then closed, reopened and every key verified again (lost, stale,
// resurrected, corrupt). Keys are stress/0 .. stress/K-1; objects under those
// keys left by an earlier run (a persistent tier) are erased before the run
// starts (and counted: "cleared"), so the model begins empty and matches the
// engine; other keys are never touched. --seconds bounds the run's wall
// time, the final verification included; the close is timed after it
// (stress_budget.h says what lies outside and why).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/checked_math.h"
#include "base/escape.h"
#include "base/pattern.h"
#include "base/units.h"
#include "config/fs_probe.h"
#include "engine/stats_export.h"
#include "spillway/config_loader.h"
#include "spillway/engine.h"
#include "tiers/io/fault_file_io.h"
#include "tools/cli_util.h"
#include "tools/command.h"
#include "tools/stress_budget.h"
#include "tools/stress_device.h"

namespace spillway::cli {
namespace {

// --seconds at most about three years: a bound the steady clock's nanoseconds
// hold with room to spare (converting 1e300 s to them is undefined).
constexpr double kMaxSeconds = 1e8;

struct Options {
  std::string config;
  std::string profile;
  int threads = 4;
  uint64_t ops = 100000;
  double seconds = 0;
  uint64_t seed = 1;
  std::string sizes = "64:65536";
  uint64_t keys = 2000;
  std::string faults;
  bool json = false;
  bool verify = true;
  bool device = false;  // --device: tools/stress_device.cc
  bool reopen = false;
};

struct ModelEntry {
  uint64_t seed = 0;  // 0: absent
  uint64_t size = 0;
  uint32_t buffers = 1;
  std::vector<uint64_t> earlier;  // seeds of every other value put (or tried) for the key
};

struct Result {
  std::atomic<uint64_t> ops{0}, puts{0}, gets{0}, erases{0}, flushes{0};
  std::atomic<uint64_t> lost{0}, corrupt{0}, io_errors{0}, no_space{0};
  // The verification after --reopen.
  std::atomic<uint64_t> reopen_verified{0}, reopen_lost{0}, reopen_stale{0}, reopen_resurrected{0},
      reopen_corrupt{0};
  std::mutex mu;
  std::string first_problem;
  void Problem(const std::string& what, std::atomic<uint64_t>& counter) {
    counter.fetch_add(1);
    std::lock_guard<std::mutex> l(mu);
    if (first_problem.empty()) first_problem = what;
  }
};

std::string KeyName(uint64_t k) { return "stress/" + std::to_string(k); }

// Verifies a handle against the model; returns "" when it matches.
std::string Verify(const Handle& h, const ModelEntry& m) {
  if (h.size() != m.size) return "size " + std::to_string(h.size()) + " != " + std::to_string(m.size);
  if (h.num_buffers() != m.buffers) return "buffer count mismatch";
  uint64_t off = 0;
  for (size_t i = 0; i < h.num_buffers(); ++i) {
    auto b = h.buffer(i);
    if (!CheckPattern(m.seed, off, b)) return "bytes differ in buffer " + std::to_string(i);
    off += b.size();
  }
  return "";
}

void PutObject(Engine& e, const std::string& key, const ModelEntry& m, std::vector<std::byte>& scratch, Status* st) {
  scratch.resize(m.size);
  FillPattern(m.seed, 0, scratch);
  std::vector<std::span<const std::byte>> bufs;
  uint64_t off = 0;
  for (uint32_t i = 0; i < m.buffers; ++i) {
    uint64_t n = (i + 1 == m.buffers) ? m.size - off : m.size / m.buffers;
    bufs.emplace_back(scratch.data() + off, n);
    off += n;
  }
  *st = e.Put(key, bufs);
}

void Worker(Engine& engine, const Options& o, int tid, uint64_t min_size, uint64_t max_size,
            std::vector<ModelEntry>& model, Result& r, StressBudget& budget) {
  std::mt19937_64 rng(o.seed * 1000003 + tid);
  std::vector<std::byte> scratch;
  const uint64_t my_ops = o.ops / o.threads + (static_cast<uint64_t>(tid) < o.ops % o.threads ? 1 : 0);
  std::vector<uint64_t> my_keys;
  for (uint64_t k = tid; k < o.keys; k += o.threads) my_keys.push_back(k);
  if (my_keys.empty()) return;
  // Log-uniform sizes so small and large objects both appear.
  std::uniform_real_distribution<double> logsize(std::log(double(min_size)), std::log(double(max_size) + 1));
  for (uint64_t i = 0;; ++i) {
    if (o.seconds > 0 ? budget.WorkloadOver() : i >= my_ops) break;
    const uint64_t k = my_keys[rng() % my_keys.size()];
    ModelEntry& m = model[k];
    const std::string key = KeyName(k);
    const int dice = static_cast<int>(rng() % 1000);
    r.ops.fetch_add(1, std::memory_order_relaxed);
    if (dice < 420) {
      ModelEntry n;
      n.seed = rng() | 1;
      n.size = std::min<uint64_t>(max_size, static_cast<uint64_t>(std::exp(logsize(rng))));
      n.buffers = 1 + static_cast<uint32_t>(rng() % 3);
      Status st;
      PutObject(engine, key, n, scratch, &st);
      r.puts.fetch_add(1, std::memory_order_relaxed);
      if (st.ok()) {
        if (m.seed == 0) budget.AddStored(1);
        if (m.seed != 0) m.earlier.push_back(m.seed);
        n.earlier = std::move(m.earlier);
        m = std::move(n);
      } else {
        m.earlier.push_back(n.seed);
      }
      if (st.IsNoSpace()) {
        r.no_space.fetch_add(1);  // the old value (if any) must remain
      } else if (!st.ok()) {
        r.io_errors.fetch_add(1);
      }
    } else if (dice < 900) {
      r.gets.fetch_add(1, std::memory_order_relaxed);
      const auto t0 = std::chrono::steady_clock::now();
      auto h = engine.Get(key);
      budget.RecordGet(static_cast<uint64_t>((std::chrono::steady_clock::now() - t0).count()));
      if (m.seed == 0) {
        if (h.ok()) r.Problem("seed " + std::to_string(o.seed) + ": erased key " + key + " came back", r.corrupt);
        continue;
      }
      if (!h.ok()) {
        if (h.status().IsIOError()) {
          r.io_errors.fetch_add(1);  // allowed under injected faults; the final pass decides
        } else if (h.status().IsCorruption()) {
          r.Problem("seed " + std::to_string(o.seed) + ": " + key + ": " + h.status().ToString(), r.corrupt);
        } else {
          r.Problem("seed " + std::to_string(o.seed) + ": " + key + ": " + h.status().ToString(), r.lost);
        }
        continue;
      }
      std::string bad = Verify(*h, m);
      if (!bad.empty()) r.Problem("seed " + std::to_string(o.seed) + ": " + key + ": " + bad, r.corrupt);
    } else if (dice < 995) {
      r.erases.fetch_add(1, std::memory_order_relaxed);
      // The close frees every object as an Erase does; the costly ones are
      // in file tiers (a hole punched per record), so time those.
      const int where = budget.bounded() ? engine.TierOf(key) : -1;
      const bool in_file = where >= 0 && engine.config().tiers[where].kind == TierKind::kFile;
      const auto t0 = std::chrono::steady_clock::now();
      Status st = engine.Erase(key);
      if (in_file) budget.RecordErase(static_cast<uint64_t>((std::chrono::steady_clock::now() - t0).count()));
      if (st.ok()) {
        budget.AddStored(-1);
        m.earlier.push_back(m.seed);
        m.seed = 0;
      } else if (!st.IsNotFound() || m.seed != 0) {
        r.Problem("seed " + std::to_string(o.seed) + ": erase " + key + ": " + st.ToString(), r.lost);
      }
    } else {
      r.flushes.fetch_add(1, std::memory_order_relaxed);
      const auto t0 = std::chrono::steady_clock::now();
      Status st = engine.Flush();
      budget.RecordFlush(static_cast<uint64_t>((std::chrono::steady_clock::now() - t0).count()));
      if (!st.ok()) r.io_errors.fetch_add(1);
    }
  }
}

// After --reopen: every key against the model. A wrong value is "stale" when
// it is one the key held (or a Put tried to give it) earlier, else "corrupt".
void VerifyAfterReopen(Engine& engine, const Options& o, const std::vector<ModelEntry>& model, Result& r) {
  const std::string tag = "seed " + std::to_string(o.seed) + ": after reopen: ";
  for (uint64_t k = 0; k < o.keys; ++k) {
    const ModelEntry& m = model[k];
    auto h = engine.Get(KeyName(k));
    if (m.seed == 0) {
      if (h.ok()) r.Problem(tag + "erased key " + KeyName(k) + " came back", r.reopen_resurrected);
      continue;
    }
    if (!h.ok()) {
      r.Problem(tag + KeyName(k) + ": " + h.status().ToString(),
                h.status().IsCorruption() ? r.reopen_corrupt : r.reopen_lost);
      continue;
    }
    if (Verify(*h, m).empty()) {
      r.reopen_verified.fetch_add(1);
      continue;
    }
    bool stale = false;
    for (uint64_t s : m.earlier) {
      ModelEntry old = m;
      old.seed = s;
      // Sizes and buffer counts of earlier values are not kept: compare the bytes held.
      old.size = h->size();
      old.buffers = static_cast<uint32_t>(h->num_buffers());
      stale |= Verify(*h, old).empty();
    }
    r.Problem(tag + KeyName(k) + (stale ? ": an older value was served" : ": wrong bytes"),
              stale ? r.reopen_stale : r.reopen_corrupt);
  }
}

// Erases whatever an earlier run left under this run's keys (a persistent
// tier keeps it), without faults, so the model can start empty. Returns how
// many objects were erased.
StatusOr<uint64_t> ClearEarlierObjects(Engine& engine, const Options& o) {
  uint64_t n = 0;
  for (uint64_t k = 0; k < o.keys; ++k) n += engine.Erase(KeyName(k)).ok() ? 1 : 0;
  if (n > 0) SPILLWAY_RETURN_IF_ERROR(engine.Flush());
  return n;
}

// The final pass over every key, `threads` threads each taking the keys
// k % threads == t; stops at the budget's bound. Returns the keys left
// unverified there.
uint64_t FinalVerify(Engine& engine, const Options& o, const std::vector<ModelEntry>& model, Result& r,
                     const StressBudget& budget, std::atomic<uint64_t>& verified) {
  std::atomic<uint64_t> unverified{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t k = t; k < o.keys; k += o.threads) {
        const ModelEntry& m = model[k];
        if (budget.Expired()) {
          unverified.fetch_add(m.seed != 0 ? 1 : 0);
          continue;
        }
        auto h = engine.Get(KeyName(k));
        if (m.seed == 0) {
          if (h.ok()) r.Problem("seed " + std::to_string(o.seed) + ": erased key " + KeyName(k) + " came back", r.corrupt);
          continue;
        }
        if (!h.ok()) {
          auto& counter = h.status().IsCorruption() ? r.corrupt : r.lost;
          r.Problem("seed " + std::to_string(o.seed) + ": final read of " + KeyName(k) + ": " + h.status().ToString(),
                    counter);
          continue;
        }
        std::string bad = Verify(*h, m);
        if (!bad.empty()) {
          r.Problem("seed " + std::to_string(o.seed) + ": final read of " + KeyName(k) + ": " + bad, r.corrupt);
        }
        verified.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  return unverified.load();
}

int Run(const Options& o) {
  StressBudget budget(o.seconds);
  uint64_t min_size = 0, max_size = 0;
  std::string why;
  if (!ParseSizeRange(o.sizes, &min_size, &max_size, &why)) {
    std::fprintf(stderr, "spillway stress: --sizes '%s': %s\n", o.sizes.c_str(), why.c_str());
    return 2;
  }
  if (min_size == 0) min_size = 1;
  // Each thread holds an object it writes and one it reads back: a MAX the
  // machine cannot allocate is refused here, not met as bad_alloc mid-run.
  if (!StressSizesFit(max_size, o.threads, &why)) {
    std::fprintf(stderr, "spillway stress: --sizes '%s': %s\n", o.sizes.c_str(), why.c_str());
    return 2;
  }
  std::unique_ptr<FileIo> base;
  std::unique_ptr<FaultFileIo> faulty;
  EngineOptions eo;
  eo.profile = o.profile;
  if (!o.faults.empty()) {
    auto spec = ParseFaultSpec(o.faults);
    if (!spec.ok()) {
      std::fprintf(stderr, "spillway stress: --faults: %s\n", spec.status().ToString().c_str());
      return 2;
    }
    if (spec->seed == 1) spec->seed = o.seed;
    base = MakeFileIo();
    faulty = std::make_unique<FaultFileIo>(base.get(), *spec);
    eo.file_io = faulty.get();
  }
  // Faults are injected into the workload only: Open (recovery) and the
  // clearing of an earlier run's objects run on a healthy disk.
  if (faulty) faulty->SetEnabled(false);
  auto engine = Engine::OpenFile(o.config, eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "spillway stress: %s\n",
                 EscapeControlBytes(engine.status().ToString(), EscapeMode::kControlKeepNewlines).c_str());
    return 2;
  }
  budget.Mark("open");
  auto cleared = ClearEarlierObjects(**engine, o);
  if (!cleared.ok()) {
    std::fprintf(stderr, "spillway stress: erasing the objects of an earlier run: %s\n",
                 EscapeControlBytes(cleared.status().ToString()).c_str());
    return 2;
  }
  if (faulty) faulty->SetEnabled(true);
  if (o.reopen) {
    for (const TierConfig& t : (*engine)->config().tiers) {
      if (t.kind == TierKind::kFile && t.persistent) continue;
      std::fprintf(stderr,
                   "spillway stress: --reopen needs every tier to be a persistent file tier; tier '%s' is not, "
                   "and what it holds does not survive a close\n",
                   EscapeControlBytes(t.name).c_str());
      return 2;
    }
  }
  std::vector<ModelEntry> model(o.keys);
  Result r;
  budget.Mark("clear");
  budget.SetVerification(o.verify, o.threads);
  const auto start = std::chrono::steady_clock::now();
  const double workload_limit = o.seconds > 0 ? o.seconds - budget.Elapsed() : 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] { Worker(**engine, o, t, min_size, max_size, model, r, budget); });
  }
  {
    // Progress on a terminal only: by time with --seconds, else by operations.
    Progress progress("stress");
    std::atomic<bool> done{false};
    std::thread ticker;
    if (progress.enabled()) {
      ticker = std::thread([&] {
        while (!done.load()) {
          const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          progress.Update(o.seconds > 0 ? el / std::max(workload_limit, 1e-3) : static_cast<double>(r.ops.load()) / std::max<uint64_t>(1, o.ops),
                          std::to_string(r.ops.load()) + " ops");
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      });
    }
    for (auto& t : threads) t.join();
    done.store(true);
    if (ticker.joinable()) ticker.join();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  budget.Mark("workload");

  // Final pass: faults off, everything acknowledged must read back exactly.
  if (faulty) faulty->SetEnabled(false);
  Status fs = (*engine)->Flush();
  if (!fs.ok()) r.Problem("final flush: " + fs.ToString(), r.lost);
  budget.Mark("final flush");
  // The workload's statistics, before the verification's reads add to them
  // (and so that the snapshot, which can take a while on a large file tier,
  // is not what runs past the bound).
  EngineStats stats = (*engine)->Stats();
  budget.Mark("stats");
  std::atomic<uint64_t> verified_count{0};
  const uint64_t unverified = o.verify ? FinalVerify(**engine, o, model, r, budget, verified_count) : 0;
  const uint64_t verified = verified_count.load();
  budget.Mark("verify");
  const double run_seconds = budget.Elapsed();
  if (!o.reopen) {
    engine->reset();  // frees every object; the budget reserved time for it, but it cannot be cut short
    budget.Mark("close", /*inside=*/false);
  }
  const double wall = budget.Elapsed();
  if (o.reopen) {
    // A clean close, then a reopen without faults: the persistent tiers must
    // hold exactly what the model says.
    engine->reset();
    EngineOptions plain;
    plain.profile = o.profile;
    auto again = Engine::OpenFile(o.config, plain);
    if (!again.ok()) {
      r.Problem("reopen: " + again.status().ToString(), r.reopen_lost);
    } else {
      VerifyAfterReopen(**again, o, model, r);
    }
    r.lost.fetch_add(r.reopen_lost.load());
    r.corrupt.fetch_add(r.reopen_stale.load() + r.reopen_resurrected.load() + r.reopen_corrupt.load());
    budget.Mark("close and reopen", /*inside=*/false);
  }
  const double ops_per_s = secs > 0 ? r.ops.load() / secs : 0;
  if (o.json) {
    nlohmann::json j = {{"ops", r.ops.load()},       {"ops_per_s", ops_per_s}, {"seconds", secs},
                        {"puts", r.puts.load()},     {"gets", r.gets.load()},  {"erases", r.erases.load()},
                        {"flushes", r.flushes.load()}, {"lost", r.lost.load()}, {"corrupt", r.corrupt.load()},
                        {"io_errors", r.io_errors.load()}, {"no_space", r.no_space.load()},
                        {"verified", verified},     {"seed", o.seed},         {"threads", o.threads},
                        {"first_problem", r.first_problem},
                        {"cleared", *cleared},
                        {"unverified", unverified},
                        {"wall_seconds", wall},
                        {"bounded_seconds", run_seconds},
                        {"seconds_limit", o.seconds},
                        {"phases", [&] {
                           nlohmann::json p = nlohmann::json::object();
                           for (const auto& [n, s] : budget.phases()) p[n] = s;
                           return p;
                         }()},
                        {"reopen", o.reopen ? nlohmann::json{{"verified", r.reopen_verified.load()},
                                                             {"lost", r.reopen_lost.load()},
                                                             {"stale", r.reopen_stale.load()},
                                                             {"resurrected", r.reopen_resurrected.load()},
                                                             {"corrupt", r.reopen_corrupt.load()}}
                                            : nlohmann::json()},
                        {"stats", nlohmann::json::parse(StatsToJson(stats))}};
    if (faulty) {
      auto c = faulty->counts();
      j["faults_injected"] = c.total_failures();
    }
    j["ok"] = r.lost.load() == 0 && r.corrupt.load() == 0;  // as the exit status says (docs/cli.md)
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", FormatStatsTable(stats).c_str());
    if (*cleared > 0) {
      std::printf("\nstress: erased %llu objects an earlier run left under stress/0..stress/%llu before starting\n",
                  static_cast<unsigned long long>(*cleared), static_cast<unsigned long long>(o.keys - 1));
    }
    std::printf("\nstress: seed %llu, %d threads, %llu ops in %.2f s = %.0f ops/s\n",
                static_cast<unsigned long long>(o.seed), o.threads, static_cast<unsigned long long>(r.ops.load()),
                secs, ops_per_s);
    std::printf("        puts %llu gets %llu erases %llu flushes %llu, io errors %llu, no space %llu\n",
                static_cast<unsigned long long>(r.puts.load()), static_cast<unsigned long long>(r.gets.load()),
                static_cast<unsigned long long>(r.erases.load()), static_cast<unsigned long long>(r.flushes.load()),
                static_cast<unsigned long long>(r.io_errors.load()), static_cast<unsigned long long>(r.no_space.load()));
    if (faulty) {
      std::printf("        faults injected %llu\n", static_cast<unsigned long long>(faulty->counts().total_failures()));
    }
    std::printf("        verified %llu objects: lost %llu corrupt %llu\n", static_cast<unsigned long long>(verified),
                static_cast<unsigned long long>(r.lost.load()), static_cast<unsigned long long>(r.corrupt.load()));
    if (unverified > 0) {
      std::printf("        %llu objects NOT verified: the --seconds %.2f bound was reached during the final pass "
                  "(give more seconds, or use --ops)\n",
                  static_cast<unsigned long long>(unverified), o.seconds);
    }
    std::printf("        time: %s\n", budget.Describe().c_str());
    if (o.reopen) {
      std::printf("        after reopen: verified %llu objects: lost %llu stale %llu resurrected %llu corrupt %llu\n",
                  static_cast<unsigned long long>(r.reopen_verified.load()),
                  static_cast<unsigned long long>(r.reopen_lost.load()),
                  static_cast<unsigned long long>(r.reopen_stale.load()),
                  static_cast<unsigned long long>(r.reopen_resurrected.load()),
                  static_cast<unsigned long long>(r.reopen_corrupt.load()));
    }
    if (!r.first_problem.empty()) {
      std::printf("first discrepancy: %s (replay with --seed %llu)\n", r.first_problem.c_str(),
                  static_cast<unsigned long long>(o.seed));
    }
  }
  return (r.lost.load() == 0 && r.corrupt.load() == 0) ? 0 : 1;
}

void Register(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<Options>();
  auto* cmd = root.add_subcommand("stress", "Random Put/Get/Erase/Flush against a reference model, verifying every byte");
  cmd->add_option("--config,-c", o->config, "Tier-chain YAML file")->required();
  cmd->add_option("--profile", o->profile, "Profile to select");
  cmd->add_option("--threads,-t", o->threads, "Worker threads (1-256)")->transform(WholeNumber(1, 256));
  auto* ops = cmd->add_option("--ops,-n", o->ops, "Total operations")->transform(WholeNumber(0, UINT64_MAX));
  cmd->add_option("--seconds,-s", o->seconds,
                  "Run for this long instead of --ops: a bound on the run's wall time (open, workload, "
                  "final flush and verification; keys the verification cannot reach in time are reported as "
                  "unverified). The engine's close comes after and is timed on its own")
      ->transform(RealNumber(0, kMaxSeconds, /*above_lo=*/true))
      ->excludes(ops);
  cmd->add_option("--seed", o->seed, "Random seed (replay a run)")->transform(WholeNumber(0, UINT64_MAX));
  auto* sizes = cmd->add_option("--sizes", o->sizes, "Object sizes MIN:MAX, units allowed: 4KiB:1MiB (log-uniform)");
  cmd->add_option("--keys", o->keys, "Distinct keys (1-100000000)")->transform(WholeNumber(1, 100000000));
  cmd->add_option("--faults", o->faults, "Inject I/O faults, e.g. eio=0.01,enospc=0.001,short=0.01,torn=0.001");
  cmd->add_flag("--verify,!--no-verify", o->verify, "Verify every key at the end (default on)");
  cmd->add_flag("--reopen", o->reopen,
                "Then close, reopen and verify every key again (every tier must be a persistent file tier)");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  cmd->add_flag("--device", o->device,
                "Device objects (gpu tier needed): adopted and copied device Puts, Get(kDevice), Acquire, Erase; "
                "every byte copied back from the device and verified (sizes default 4096:4194304)");
  // Placeholders in --help (tools/help_format.h): what the value is.
  cmd->get_option("--config")->type_name("FILE");
  cmd->get_option("--profile")->type_name("NAME");
  cmd->get_option("--seconds")->type_name("SECONDS");
  sizes->type_name("MIN:MAX");
  cmd->get_option("--faults")->type_name("SPEC");
  cmd->callback([o, sizes, &exit_code] {
    if (!o->device) {
      exit_code = Run(*o);
      return;
    }
    exit_code = RunDeviceStress({o->config, o->profile, o->threads, o->ops, o->seconds, o->seed,
                                 sizes->count() > 0 ? o->sizes : std::string(), o->keys, o->json, o->verify});
  });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
