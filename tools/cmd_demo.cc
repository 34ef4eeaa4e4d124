// `spillway demo`: the README's first command. Opens a tier chain, writes a
// workload several times larger than the first tier, reads every object back
// verified (promoting it), and prints per-tier statistics.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "spillway/engine.h"
#include "engine/stats_export.h"
#include "tools/cli_util.h"
#include "tools/command.h"
#include "tools/pattern.h"

namespace spillway::cli {
namespace {

struct Options {
  std::string config;  // empty: examples/tiers.yaml, found by FindDataFile
  std::string profile;
  double multiple = 4.0;
  uint64_t object_bytes = 1 << 20;
  // Keys the read-back asks for ahead of the one it reads (Engine::Prefetch,
  // one batch of reads per window), as a sequential consumer would. 0: one
  // Get at a time, at queue depth one.
  uint64_t read_ahead = 32;
};

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
    std::fprintf(stderr, "spillway demo: %s\n", opened.status().ToString().c_str());
    return 2;
  }
  Engine& engine = **opened;
  const Config& cfg = engine.config();
  std::printf("spillway demo: %s%s\n", cfg.source.c_str(), cfg.profile.empty() ? "" : (" profile " + cfg.profile).c_str());
  for (const TierConfig& t : cfg.tiers) {
    std::printf("  tier %-8s %-5s %12s  codec %s%s\n", t.name.c_str(), TierKindName(t.kind),
                HumanBytes(static_cast<double>(t.capacity_bytes)).c_str(), CodecKindName(t.codec.kind),
                t.paths.empty() ? "" : ("  " + t.paths[0]).c_str());
  }
  const uint64_t first = cfg.tiers.front().capacity_bytes;
  const uint64_t total = static_cast<uint64_t>(o.multiple * first);
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

  if (o.read_ahead > 0) {
    std::printf("reading everything back, verifying every byte (read-ahead %llu keys)...\n",
                static_cast<unsigned long long>(o.read_ahead));
  } else {
    std::printf("reading everything back, verifying every byte (one Get at a time)...\n");
  }
  t0 = std::chrono::steady_clock::now();
  uint64_t bad = 0;
  Progress read_progress("reading");
  for (uint64_t i = 0; i < count; ++i) {
    read_progress.Update(static_cast<double>(i) / static_cast<double>(count));
    if (o.read_ahead > 0 && i % o.read_ahead == 0) {
      // The next window, one window ahead (the first call asks for two).
      std::vector<std::string> ahead;
      for (uint64_t k = i == 0 ? 0 : i + o.read_ahead; k < std::min(count, i + 2 * o.read_ahead); ++k) {
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
  cmd->add_option("--multiple", o->multiple, "Workload size as a multiple of the first tier")->capture_default_str()->check(CLI::Range(0.01, 1000.0));
  cmd->add_option("--read-ahead", o->read_ahead, "Keys the read-back prefetches ahead of the one it reads (0: none)")
      ->capture_default_str()
      ->check(CLI::Range(0ull, 65536ull));
  cmd->add_option("--object-bytes", o->object_bytes, "Size of each object (units allowed: 64KiB)")->capture_default_str()->transform(SizeArg())->check(CLI::Range(65ull, 1ull << 32));
  cmd->callback([o, &exit_code] { exit_code = Run(*o); });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
