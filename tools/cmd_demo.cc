// `spillway demo`: the README's first command. Opens a tier chain, writes a
// workload several times larger than the first tier, reads every object back
// verified (promoting it), and prints per-tier statistics.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/escape.h"
#include "base/pattern.h"
#include "base/units.h"
#include "engine/stats_export.h"
#include "spillway/engine.h"
#include "tools/cli_util.h"
#include "tools/command.h"

namespace spillway::cli {
namespace {

struct Options {
  std::string config;  // empty: examples/tiers.yaml, found by FindDataFile
  std::string profile;
  double multiple = 4.0;
  uint64_t object_bytes = 1 << 20;
  // Bytes the read-back asks for ahead of the one it reads (Engine::Prefetch,
  // one batch of reads per window of half of it), as a sequential consumer
  // would; "auto": a quarter of the first host tier (where Prefetch puts
  // what it reads; the Dask store's read-ahead takes a quarter of all host
  // tiers, the same for a chain of one). "0": one Get at a
  // time, at queue depth one. A byte budget, not a key count: 128 keys of
  // 1 MiB ahead through a 256 MiB host tier evicted what had been read ahead
  // before it was read, and the read-back ran at half speed.
  std::string read_ahead = "auto";
};

// Keys per read-ahead window for `o.read_ahead` (0: no read-ahead).
uint64_t ReadAheadKeys(const Options& o, const Config& cfg, uint64_t* budget_bytes) {
  uint64_t budget = 0;
  if (o.read_ahead == "auto") {
    const TierConfig* host = nullptr;
    for (const TierConfig& t : cfg.tiers) {
      if (t.kind == TierKind::kHost) {
        host = &t;
        break;
      }
    }
    budget = (host != nullptr ? host->capacity_bytes : cfg.tiers.front().capacity_bytes) / 4;
  } else {
    budget = std::stoull(o.read_ahead);  // bytes: the option's validator rewrote a size to them
  }
  *budget_bytes = budget;
  if (budget == 0) return 0;
  return std::max<uint64_t>(1, budget / 2 / o.object_bytes);
}

int Run(const Options& o) {
  EngineOptions eo;
  eo.profile = o.profile;
  std::string config = o.config;
  if (config.empty()) {
    config = FindDataFile("examples/tiers.yaml");
    if (config.empty()) {
      std::fprintf(stderr, "spillway demo: examples/tiers.yaml not found here, above the binary or in "
                           "<prefix>/share/spillway; pass --config FILE\n");
      return 2;
    }
  }
  auto opened = Engine::OpenFile(config, eo);
  if (!opened.ok()) {
    // Several lines when the config is invalid, each diagnostic escaped already.
    std::fprintf(stderr, "spillway demo: %s\n",
                 EscapeControlBytes(opened.status().ToString(), EscapeMode::kControlKeepNewlines).c_str());
    return 2;
  }
  Engine& engine = **opened;
  const Config& cfg = engine.config();
  std::printf("spillway demo: %s%s\n", EscapeControlBytes(cfg.source).c_str(),
              cfg.profile.empty() ? "" : (" profile " + EscapeControlBytes(cfg.profile)).c_str());
  for (const TierConfig& t : cfg.tiers) {
    std::printf("  tier %-8s %-5s %12s  codec %s%s\n", EscapeControlBytes(t.name).c_str(), TierKindName(t.kind),
                HumanBytes(static_cast<double>(t.capacity_bytes)).c_str(), CodecKindName(t.codec.kind),
                t.paths.empty() ? "" : ("  " + EscapeControlBytes(t.paths[0])).c_str());
  }
  const uint64_t first = cfg.tiers.front().capacity_bytes;
  // A capacity near 2^64 times --multiple does not fit the byte count (and
  // converting it would be undefined).
  const double total_d = o.multiple * static_cast<double>(first);
  if (!(total_d < 18446744073709551616.0)) {
    std::fprintf(stderr, "spillway demo: --multiple %g of the first tier's %s is more than 2^64 bytes\n", o.multiple,
                 FormatBytes(first).c_str());
    return 2;
  }
  const uint64_t total = static_cast<uint64_t>(total_d);
  const uint64_t count = std::max<uint64_t>(1, total / o.object_bytes);
  std::printf("\nwriting %llu objects of %s (%s, %.1fx the first tier)...\n",
              static_cast<unsigned long long>(count), HumanBytes(o.object_bytes).c_str(),
              HumanBytes(static_cast<double>(count * o.object_bytes)).c_str(), o.multiple);
  std::vector<std::byte> buf(o.object_bytes);
  auto t0 = std::chrono::steady_clock::now();
  Progress write_progress("writing");
  for (uint64_t i = 0; i < count; ++i) {
    write_progress.Update(static_cast<double>(i) / static_cast<double>(count));
    FillPattern(i + 1, 0, buf);
    // Two buffers per object, like a serialized header plus frames.
    std::span<const std::byte> parts[2] = {std::span<const std::byte>(buf).first(64),
                                           std::span<const std::byte>(buf).subspan(64)};
    Status st = engine.Put("demo/" + std::to_string(i), parts);
    if (!st.ok()) {
      std::fprintf(stderr, "put %llu failed: %s\n", static_cast<unsigned long long>(i), st.ToString().c_str());
      return 1;
    }
  }
  write_progress.Done();
  Status st = engine.Flush();
  if (!st.ok()) {
    std::fprintf(stderr, "flush failed: %s\n", st.ToString().c_str());
    return 1;
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  wrote %s in %.2f s (%s/s)\n", HumanBytes(double(count * o.object_bytes)).c_str(), secs,
              HumanBytes(count * o.object_bytes / secs).c_str());

  uint64_t budget = 0;
  const uint64_t window = ReadAheadKeys(o, cfg, &budget);
  if (window > 0) {
    std::printf("reading everything back, verifying every byte (read-ahead %s: windows of %llu keys)...\n",
                HumanBytes(static_cast<double>(budget)).c_str(), static_cast<unsigned long long>(window));
  } else {
    std::printf("reading everything back, verifying every byte (one Get at a time)...\n");
  }
  t0 = std::chrono::steady_clock::now();
  uint64_t bad = 0;
  Progress read_progress("reading");
  for (uint64_t i = 0; i < count; ++i) {
    read_progress.Update(static_cast<double>(i) / static_cast<double>(count));
    if (window > 0 && i % window == 0) {
      // The next window, one window ahead (the first call asks for two).
      std::vector<std::string> ahead;
      for (uint64_t k = i == 0 ? 0 : i + window; k < std::min(count, i + 2 * window); ++k) {
        ahead.push_back("demo/" + std::to_string(k));
      }
      engine.Prefetch(ahead, Where::kHost);
    }
    auto h = engine.Get("demo/" + std::to_string(i));
    if (!h.ok()) {
      std::fprintf(stderr, "get %llu failed: %s\n", static_cast<unsigned long long>(i), h.status().ToString().c_str());
      ++bad;
      continue;
    }
    if (h->size() != o.object_bytes || h->num_buffers() != 2 || !CheckPattern(i + 1, 0, h->buffer(0)) ||
        !CheckPattern(i + 1, 64, h->buffer(1))) {
      std::fprintf(stderr, "object %llu: wrong bytes\n", static_cast<unsigned long long>(i));
      ++bad;
    }
  }
  read_progress.Done();
  secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  read %s in %.2f s (%s/s): %llu of %llu objects verified\n\n",
              HumanBytes(double(count * o.object_bytes)).c_str(), secs,
              HumanBytes(count * o.object_bytes / secs).c_str(), static_cast<unsigned long long>(count - bad),
              static_cast<unsigned long long>(count));
  std::printf("%s", FormatStatsTable(engine.Stats()).c_str());
  if (bad) {
    std::printf("\ndemo FAILED: %llu objects did not verify\n", static_cast<unsigned long long>(bad));
    return 1;
  }
  std::printf("\ndemo OK: every object verified\n");
  return 0;
}

void Register(CLI::App& root, int& exit_code) {
  auto o = std::make_shared<Options>();
  auto* cmd = root.add_subcommand("demo", "Write a workload larger than the first tier, read it back verified, print statistics");
  cmd->add_option("--config,-c", o->config, "Tier-chain YAML file (default: examples/tiers.yaml, installed or in the source tree)");
  cmd->add_option("--profile", o->profile, "Profile to select");
  cmd->add_option("--multiple", o->multiple, "Workload size as a multiple of the first tier (0.01-1000)")
      ->capture_default_str()
      ->transform(RealNumber(0.01, 1000.0));
  cmd->add_option("--read-ahead", o->read_ahead,
                  "Bytes the read-back prefetches ahead of the object it reads, in two windows (auto: a quarter of "
                  "the first host tier; 0: none)")
      ->capture_default_str()
      ->transform(CLI::Validator(
          [](std::string& text) -> std::string {
            if (text == "auto") return "";
            return SizeArg()(text);
          },
          "SIZE|auto", "size or auto"));
  cmd->add_option("--object-bytes", o->object_bytes, "Size of each object (units allowed: 64KiB)")->capture_default_str()->transform(SizeArg())->check(CLI::Range(65ull, 1ull << 32));
  // Placeholders in --help (tools/help_format.h): what the value is.
  cmd->get_option("--config")->type_name("FILE");
  cmd->get_option("--profile")->type_name("NAME");
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
