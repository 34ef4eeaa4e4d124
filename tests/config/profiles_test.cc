// Profiles: exclusion, overrides, selection by option, environment and
// hostname, and checking every profile.
#include <unistd.h>

#include <climits>

#include "config_test_util.h"

namespace spillway {
namespace {

using testing::FindError;
using testing::LoadYaml;

const std::string kTiers =
    "version: 1\n"
    "tiers:\n"
    "  - {name: gpu0, kind: gpu, capacity: 1GiB, optional: true}\n"
    "  - {name: host, kind: host, capacity: 1GiB}\n"
    "  - {name: disk, kind: file, capacity: 8GiB, paths: [/s/disk]}\n";

LoadOptions Profile(const std::string& name, bool all = false) {
  LoadOptions o = testing::NoMachine();
  o.gpu.emplace();
  o.gpu->built_with_cuda = true;
  o.gpu->device_total_bytes = {16ull << 30};
  o.profile = name;
  o.all_profiles = all;
  return o;
}

std::vector<std::string> Names(const Config& c) {
  std::vector<std::string> v;
  for (const TierConfig& t : c.tiers) v.push_back(t.name);
  return v;
}

struct EnvGuard {
  explicit EnvGuard(const char* name) : name_(name) { unsetenv(name_); }
  ~EnvGuard() { unsetenv(name_); }
  const char* name_;
};

TEST_CASE("a profile excludes tiers and overrides keys") {
  std::string yaml = kTiers +
                     "profiles:\n"
                     "  gpu-node: {}\n"
                     "  cpu-node:\n"
                     "    exclude: [gpu0]\n"
                     "    tiers:\n"
                     "      host: {capacity: 4GiB}\n";
  LoadResult gpu = LoadYaml(yaml, Profile("gpu-node"));
  REQUIRE_MESSAGE(gpu.ok(), gpu.Summary());
  CHECK(Names(gpu.config) == std::vector<std::string>{"gpu0", "host", "disk"});
  CHECK(gpu.config.profile == "gpu-node");
  CHECK(gpu.profiles == std::vector<std::string>{"gpu-node", "cpu-node"});
  LoadResult cpu = LoadYaml(yaml, Profile("cpu-node"));
  REQUIRE_MESSAGE(cpu.ok(), cpu.Summary());
  CHECK(Names(cpu.config) == std::vector<std::string>{"host", "disk"});
  CHECK(cpu.config.tiers[0].capacity_bytes == 4ull << 30);
}

TEST_CASE("an error in an override points at the profile") {
  std::string yaml = kTiers +
                     "profiles:\n"
                     "  small:\n"
                     "    tiers:\n"
                     "      disk: {capacity: 0}\n";
  LoadResult r = LoadYaml(yaml, Profile("small"));
  std::optional<Diagnostic> d = FindError(r, "profiles.small.tiers.disk.capacity", "greater than zero");
  REQUIRE(d);
  CHECK(d->line == 9);
  CHECK(d->column == 24);
}

TEST_CASE("unknown tiers in exclude and overrides") {
  std::string yaml = kTiers + "profiles:\n  p: {exclude: [gpu], tiers: {hots: {capacity: 1GiB}}}\n";
  LoadResult r = LoadYaml(yaml, Profile("p"));
  std::optional<Diagnostic> d = FindError(r, "profiles.p.exclude[0]", "unknown tier 'gpu'");
  REQUIRE(d);
  CHECK(d->hint == "did you mean 'gpu0'?");
  CHECK(FindError(r, "profiles.p.tiers.hots", "unknown tier 'hots'"));
}

TEST_CASE("excluding every tier leaves an empty chain") {
  std::string yaml = kTiers + "profiles:\n  none: {exclude: [gpu0, host, disk]}\n";
  LoadResult r = LoadYaml(yaml, Profile("none"));
  CHECK(FindError(r, "profiles.none.exclude", "empty"));
}

TEST_CASE("an unknown profile is an error") {
  std::string yaml = kTiers + "profiles:\n  gpu-node: {}\n";
  LoadResult r = LoadYaml(yaml, Profile("gpu-nod"));
  std::optional<Diagnostic> d = FindError(r, "profiles", "unknown profile 'gpu-nod'");
  REQUIRE(d);
  CHECK(d->hint == "did you mean 'gpu-node'?");
  CHECK(FindError(LoadYaml(kTiers, Profile("x")), "profiles", "unknown profile"));
}

TEST_CASE("SPILLWAY_PROFILE picks the profile when the caller does not") {
  EnvGuard guard("SPILLWAY_PROFILE");
  std::string yaml = kTiers + "profiles:\n  a: {}\n  b: {exclude: [gpu0]}\n";
  setenv("SPILLWAY_PROFILE", "b", 1);
  LoadResult r = LoadYaml(yaml, Profile(""));
  REQUIRE(r.ok());
  CHECK(r.config.profile == "b");
  LoadResult explicit_choice = LoadYaml(yaml, Profile("a"));
  CHECK(explicit_choice.config.profile == "a");
  setenv("SPILLWAY_PROFILE", "c", 1);
  CHECK(FindError(LoadYaml(yaml, Profile("")), "profiles", "SPILLWAY_PROFILE"));
}

TEST_CASE("the first profile whose hostname rule matches is chosen") {
  EnvGuard guard("SPILLWAY_PROFILE");
  char host[HOST_NAME_MAX + 1] = {};
  REQUIRE(gethostname(host, sizeof host - 1) == 0);
  std::string yaml = kTiers +
                     "profiles:\n"
                     "  elsewhere: {hostname: [\"no-such-host-*\"]}\n"
                     "  here: {hostname: \"" + std::string(host) + "\", exclude: [gpu0]}\n"
                     "  all: {hostname: \"*\"}\n";
  LoadResult r = LoadYaml(yaml, Profile(""));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.profile == "here");
  std::string nomatch = kTiers + "profiles:\n  elsewhere: {hostname: \"no-such-host-*\"}\n";
  LoadResult none = LoadYaml(nomatch, Profile(""));
  REQUIRE(none.ok());
  CHECK(none.config.profile.empty());
  CHECK(none.config.tiers.size() == 3);
}

TEST_CASE("all_profiles checks every profile, not only the chosen one") {
  std::string yaml = kTiers +
                     "profiles:\n"
                     "  good: {}\n"
                     "  bad:\n"
                     "    tiers:\n"
                     "      host: {capacity: 1GiB, codec: {name: zstd, level: 40}}\n";
  CHECK(LoadYaml(yaml, Profile("good")).ok());
  LoadResult all = LoadYaml(yaml, Profile("good", true));
  std::optional<Diagnostic> d = FindError(all, "profiles.bad.tiers.host.codec.level", "zstd level 40");
  REQUIRE(d);
  CHECK(d->line == 10);
  CHECK(all.config.profile == "good");
}

TEST_CASE("profile defaults replace the shared defaults") {
  std::string yaml = kTiers +
                     "defaults: {watermarks: {high: 0.9, low: 0.7}}\n"
                     "profiles:\n"
                     "  tight: {defaults: {watermarks: {high: 0.6, low: 0.5}}}\n";
  LoadResult r = LoadYaml(yaml, Profile("tight"));
  REQUIRE(r.ok());
  CHECK(r.config.tiers[1].watermarks.high == doctest::Approx(0.6));
  LoadResult base = LoadYaml(yaml, Profile(""));
  CHECK(base.config.tiers[1].watermarks.high == doctest::Approx(0.9));
}

TEST_CASE("profile structure errors") {
  CHECK(FindError(LoadYaml(kTiers + "profiles: [a]\n"), "profiles", "expected a map"));
  CHECK(FindError(LoadYaml(kTiers + "profiles:\n  p: {exlude: [gpu0]}\n"), "profiles.p.exlude",
                  "unknown key"));
  CHECK(FindError(LoadYaml(kTiers + "profiles:\n  p: {tiers: {host: {name: h2}}}\n"),
                  "profiles.p.tiers.host.name", "cannot rename"));
}

}  // namespace
}  // namespace spillway
