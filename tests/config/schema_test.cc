// The loader on documents that are not even a usable config: YAML syntax,
// unknown and duplicate keys, wrong types, missing keys, unknown names.
// Each rule has a passing and a failing case.
#include "config_test_util.h"

namespace spillway {
namespace {

using testing::FindError;
using testing::FindWarning;
using testing::HostChain;
using testing::LoadYaml;

TEST_CASE("a minimal chain loads") {
  LoadResult r = LoadYaml(HostChain());
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.warnings.empty());
  REQUIRE(r.config.tiers.size() == 1);
  CHECK(r.config.tiers[0].name == "host");
  CHECK(r.config.tiers[0].capacity_bytes == 1ull << 30);
  CHECK(r.config.tiers[0].capacity_text == "1GiB");
  CHECK(r.config.source == "test.yaml");
}

TEST_CASE("YAML syntax errors carry a 1-based position") {
  LoadResult r = LoadYaml("version: 1\ntiers:\n  - name: a\n    kind: host\n   capacity: 1\n");
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].message.find("YAML syntax error") != std::string::npos);
  CHECK(r.errors[0].line == 5);
  CHECK(r.errors[0].column == 4);
  CHECK(r.errors[0].file == "test.yaml");
  LoadResult flow = LoadYaml("version: 1\ntiers: [ {name: a, kind: host, capacity: 1GiB}\n");
  CHECK_FALSE(flow.ok());
}

TEST_CASE("an empty document or a non-map top level is rejected") {
  CHECK(FindError(LoadYaml(""), "", "empty"));
  CHECK(FindError(LoadYaml("# nothing\n"), "", "empty"));
  CHECK(FindError(LoadYaml("- a\n- b\n"), "", "expected a map"));
}

TEST_CASE("unknown keys get a suggestion and a position") {
  LoadResult r = LoadYaml(HostChain("    capactiy: 2GiB\n"));
  std::optional<Diagnostic> d = FindError(r, "tiers[0].capactiy", "unknown key 'capactiy'");
  REQUIRE(d);
  CHECK(d->hint == "did you mean 'capacity'?");
  CHECK(d->line == 6);
  CHECK(d->column == 5);
  CHECK(FindError(LoadYaml(HostChain() + "polcy: {}\n"), "polcy", "unknown key"));
  CHECK(FindError(LoadYaml(HostChain("    codec: {name: zstd, levle: 3}\n")),
                  "tiers[0].codec.levle", "unknown key"));
  CHECK(LoadYaml(HostChain("    codec: {name: zstd, level: 3}\n")).ok());
}

TEST_CASE("duplicate keys are errors") {
  LoadResult r = LoadYaml(HostChain("    capacity: 2GiB\n"));
  std::optional<Diagnostic> d = FindError(r, "tiers[0].capacity", "duplicate key");
  REQUIRE(d);
  CHECK(d->hint == "first given at line 5");
  CHECK(FindError(LoadYaml(HostChain() + "version: 1\n"), "version", "duplicate key"));
}

TEST_CASE("wrong types say what was expected") {
  CHECK(FindError(LoadYaml(HostChain("    pinned: maybe\n")), "tiers[0].pinned",
                  "expected true or false"));
  CHECK(LoadYaml(HostChain("    pinned: false\n")).ok());
  CHECK(FindError(LoadYaml("version: one\ntiers: []\n"), "version", "expected an integer"));
  CHECK(FindError(LoadYaml("version: 1\ntiers: {a: 1}\n"), "tiers", "expected a list of tiers"));
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n  - just a string\n"), "tiers[0]",
                  "expected a tier map"));
  CHECK(FindError(LoadYaml(HostChain("    watermarks: {high: lots}\n")),
                  "tiers[0].watermarks.high", "expected a number"));
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n  - {name: [a], kind: host, capacity: 1GiB}\n"),
                  "tiers[0].name", "expected a string, found a list"));
  CHECK(FindError(LoadYaml(HostChain("    codec: [lz4]\n")), "tiers[0].codec",
                  "expected a codec name"));
}

TEST_CASE("missing required keys are named") {
  LoadResult r = LoadYaml("version: 1\ntiers:\n  - name: a\n    kind: host\n");
  std::optional<Diagnostic> d = FindError(r, "tiers[0].capacity", "missing required key 'capacity'");
  REQUIRE(d);
  CHECK(d->line == 3);
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n  - {kind: host, capacity: 1GiB}\n"),
                  "tiers[0].name", "missing required key"));
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n  - {name: a, capacity: 1GiB}\n"),
                  "tiers[0].kind", "missing required key"));
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n  - {name: a, kind: file, capacity: 1GiB}\n"),
                  "tiers[0].paths", "missing required key 'paths'"));
  CHECK(FindError(LoadYaml("tiers:\n  - {name: a, kind: host, capacity: 1GiB}\n"), "version",
                  "missing required key"));
  CHECK(FindError(LoadYaml("version: 1\n"), "tiers", "missing required key"));
}

TEST_CASE("unknown enum names get a suggestion") {
  std::optional<Diagnostic> kind =
      FindError(LoadYaml("version: 1\ntiers:\n  - {name: a, kind: hots, capacity: 1GiB}\n"),
                "tiers[0].kind", "unknown tier kind 'hots'");
  REQUIRE(kind);
  CHECK(kind->hint == "did you mean 'host'?");
  CHECK(FindError(LoadYaml(HostChain("    codec: zsdt\n")), "tiers[0].codec", "unknown codec"));
  std::string file = "version: 1\ntiers:\n  - {name: f, kind: file, capacity: 1GiB, paths: [/x], ";
  CHECK(FindError(LoadYaml(file + "medium: nvm}\n"), "tiers[0].medium", "unknown medium"));
  CHECK(FindError(LoadYaml(file + "io: {engine: urng}}\n"), "tiers[0].io.engine",
                  "unknown io engine"));
  CHECK(LoadYaml(file + "medium: nvme, io: {engine: posix}}\n").ok());
  std::string gpu = "version: 1\ntiers:\n  - {name: g, kind: gpu, capacity: 1GiB, optional: true, ";
  std::string host = "  - {name: h, kind: host, capacity: 1GiB}\n";
  CHECK(FindError(LoadYaml(gpu + "memory: managd}\n" + host), "tiers[0].memory",
                  "unknown gpu memory"));
  CHECK(LoadYaml(gpu + "memory: managed}\n" + host).ok());
}

TEST_CASE("keys of another tier kind are ignored with a warning") {
  LoadResult r = LoadYaml(HostChain("    paths: [/tmp/x]\n"));
  CHECK(r.ok());
  CHECK(FindWarning(r, "tiers[0].paths", "applies to file tiers"));
  CHECK(r.config.tiers[0].paths.empty());
  CHECK(LoadYaml(HostChain("    pinned: true\n")).warnings.empty());
}

TEST_CASE("path and paths") {
  std::string base = "version: 1\ntiers:\n  - name: f\n    kind: file\n    capacity: 1GiB\n";
  LoadResult one = LoadYaml(base + "    path: /a/b\n");
  REQUIRE_MESSAGE(one.ok(), one.Summary());
  CHECK(one.config.tiers[0].paths == std::vector<std::string>{"/a/b"});
  LoadResult two = LoadYaml(base + "    paths: [/a, /b]\n");
  REQUIRE(two.ok());
  CHECK(two.config.tiers[0].paths.size() == 2);
  CHECK(FindError(LoadYaml(base + "    path: /a\n    paths: [/b]\n"), "tiers[0].paths",
                  "either 'path' or 'paths'"));
}

TEST_CASE("${VAR} in values") {
  setenv("SPILLWAY_TEST_CAP", "2GiB", 1);
  LoadResult r = LoadYaml(HostChain().replace(HostChain().find("1GiB"), 4, "${SPILLWAY_TEST_CAP}"));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.tiers[0].capacity_bytes == 2ull << 30);
  unsetenv("SPILLWAY_TEST_CAP");
  LoadResult unset =
      LoadYaml(HostChain().replace(HostChain().find("1GiB"), 4, "${SPILLWAY_TEST_CAP}"));
  std::optional<Diagnostic> d = FindError(unset, "tiers[0].capacity", "'SPILLWAY_TEST_CAP' is not set");
  REQUIRE(d);
  CHECK(d->line == 5);
  LoadResult fallback =
      LoadYaml(HostChain().replace(HostChain().find("1GiB"), 4, "${SPILLWAY_TEST_CAP:-3GiB}"));
  REQUIRE(fallback.ok());
  CHECK(fallback.config.tiers[0].capacity_bytes == 3ull << 30);
}

TEST_CASE("aliases cannot blow up the document") {
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + prev + ", " + prev +
            ", " + prev + ", " + prev + ", " + prev + ", " + prev + ", " + prev + ", " + prev +
            ", " + prev + ", " + prev + "]\n";
  }
  LoadResult r = LoadYaml(yaml);
  CHECK(FindError(r, "", "more than 100000 values"));
}

TEST_CASE("LoadOptions::vars fill parsed values and scratch_path moves only scratch tiers") {
  LoadOptions o = testing::NoMachine();
  o.vars = [](const std::string& name, const std::optional<std::string>&) -> StatusOr<std::optional<std::string>> {
    if (name == "W") return std::optional<std::string>("/w #1\n  - injected");
    return std::optional<std::string>();
  };
  o.scratch_path = [](const std::string& p) { return p + "/worker-7"; };
  LoadResult r = testing::LoadYaml(
      "version: 1\n"
      "tiers:\n"
      "  - {name: host, kind: host, capacity: 64MiB}\n"
      "  - name: a\n    kind: file\n    capacity: 1MiB\n    paths:\n      - ${W}/a\n"
      "  - name: b\n    kind: file\n    capacity: 1MiB\n    persistent: true\n    paths: [/p/b]\n",
      o);
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  REQUIRE(r.config.tiers.size() == 3);
  CHECK(r.config.tiers[1].paths == std::vector<std::string>{"/w #1\n  - injected/a/worker-7"});
  CHECK(r.config.tiers[2].paths == std::vector<std::string>{"/p/b"});
}

}  // namespace
}  // namespace spillway
