// Value rules on a chain: capacities, watermarks, codec levels, I/O settings,
// names, order, shared directories. Each rule has a passing and a failing case.
#include "config_test_util.h"

namespace spillway {
namespace {

using testing::FindError;
using testing::HostChain;
using testing::LoadYaml;

std::string WithCapacity(const std::string& capacity) {
  return "version: 1\ntiers:\n  - {name: h, kind: host, capacity: \"" + capacity + "\"}\n";
}

TEST_CASE("capacity must be a positive size") {
  CHECK(LoadYaml(WithCapacity("1")).ok());
  CHECK(LoadYaml(WithCapacity("1.5GiB")).ok());
  CHECK(FindError(LoadYaml(WithCapacity("0")), "tiers[0].capacity", "greater than zero"));
  CHECK(FindError(LoadYaml(WithCapacity("0GiB")), "tiers[0].capacity", "greater than zero"));
  CHECK(FindError(LoadYaml(WithCapacity("-1GiB")), "tiers[0].capacity", "negative"));
  CHECK(FindError(LoadYaml(WithCapacity("lots")), "tiers[0].capacity", "invalid size"));
  std::optional<Diagnostic> d = FindError(LoadYaml(WithCapacity("8gib")), "tiers[0].capacity", "GiB");
  REQUIRE(d);
  CHECK(d->line == 3);
  CHECK(d->column == 37);
}

TEST_CASE("watermarks need 0 < low < high <= 1") {
  CHECK(LoadYaml(HostChain("    watermarks: {high: 1, low: 0.5}\n")).ok());
  CHECK(FindError(LoadYaml(HostChain("    watermarks: {high: 0.5, low: 0.8}\n")),
                  "tiers[0].watermarks", "must be below"));
  CHECK(FindError(LoadYaml(HostChain("    watermarks: {high: 1.5}\n")),
                  "tiers[0].watermarks.high", "out of range"));
  CHECK(FindError(LoadYaml(HostChain("    watermarks: {low: 0}\n")), "tiers[0].watermarks.low",
                  "out of range"));
  std::string defaults = "defaults: {watermarks: {high: 0.6, low: 0.7}}\n";
  LoadResult r = LoadYaml(HostChain() + defaults);
  std::optional<Diagnostic> d = FindError(r, "defaults.watermarks", "must be below");
  REQUIRE(d);
  CHECK(d->line == 6);
  CHECK(r.errors.size() == 1);
  LoadResult inherit = LoadYaml(HostChain() + "defaults: {watermarks: {high: 0.8, low: 0.6}}\n");
  REQUIRE(inherit.ok());
  CHECK(inherit.config.tiers[0].watermarks.high == doctest::Approx(0.8));
  CHECK(inherit.config.tiers[0].watermarks.low == doctest::Approx(0.6));
}

TEST_CASE("a tier's partial watermarks fill in from defaults") {
  LoadResult r = LoadYaml(HostChain("    watermarks: {high: 0.95}\n") +
                          "defaults: {watermarks: {high: 0.8, low: 0.5}}\n");
  REQUIRE(r.ok());
  CHECK(r.config.tiers[0].watermarks.high == doctest::Approx(0.95));
  CHECK(r.config.tiers[0].watermarks.low == doctest::Approx(0.5));
}

TEST_CASE("zstd levels run from -7 to 22") {
  for (int level : {-7, 0, 3, 22}) {
    CHECK(LoadYaml(HostChain("    codec: {name: zstd, level: " + std::to_string(level) + "}\n"))
              .ok());
  }
  for (int level : {-8, 23}) {
    CHECK(FindError(
        LoadYaml(HostChain("    codec: {name: zstd, level: " + std::to_string(level) + "}\n")),
        "tiers[0].codec.level", "zstd level"));
  }
  LoadResult plain = LoadYaml(HostChain("    codec: zstd\n"));
  REQUIRE(plain.ok());
  CHECK(plain.config.tiers[0].codec.kind == CodecKind::kZstd);
  CHECK(plain.config.tiers[0].codec.level == 3);
}

TEST_CASE("lz4 acceleration is at least 1") {
  LoadResult r = LoadYaml(HostChain("    codec: {name: lz4, level: 1}\n"));
  REQUIRE(r.ok());
  CHECK(r.config.tiers[0].codec.level == 1);
  CHECK(LoadYaml(HostChain("    codec: {name: lz4, level: 9}\n")).ok());
  CHECK(FindError(LoadYaml(HostChain("    codec: {name: lz4, level: 0}\n")),
                  "tiers[0].codec.level", "lz4 acceleration"));
}

TEST_CASE("codec min_savings and chunk") {
  LoadResult r = LoadYaml(HostChain("    codec: {name: lz4, min_savings: 0.2, chunk: 4MiB}\n"));
  REQUIRE(r.ok());
  CHECK(r.config.tiers[0].codec.chunk_bytes == 4ull << 20);
  CHECK(FindError(LoadYaml(HostChain("    codec: {name: lz4, min_savings: 1.5}\n")),
                  "tiers[0].codec.min_savings", "out of range"));
  CHECK(FindError(LoadYaml(HostChain("    codec: {name: lz4, chunk: 100}\n")),
                  "tiers[0].codec.chunk", "too small"));
  CHECK(FindError(LoadYaml(HostChain("    codec: {name: lz4, chunk: 10%}\n")),
                  "tiers[0].codec.chunk", "percentage is not allowed"));
}

TEST_CASE("file tier I/O settings") {
  std::string base = "version: 1\ntiers:\n  - {name: f, kind: file, capacity: 1GiB, paths: [/x], ";
  LoadResult ok = LoadYaml(base + "io: {queue_depth: 4096, block_size: 64KiB, segment_size: 1GiB}}\n");
  REQUIRE_MESSAGE(ok.ok(), ok.Summary());
  CHECK(ok.config.tiers[0].io.queue_depth == 4096);
  CHECK(ok.config.tiers[0].io.block_bytes == 64ull << 10);
  CHECK(FindError(LoadYaml(base + "io: {queue_depth: 0}}\n"), "tiers[0].io.queue_depth", "1 to 4096"));
  CHECK(FindError(LoadYaml(base + "io: {queue_depth: 5000}}\n"), "tiers[0].io.queue_depth",
                  "1 to 4096"));
  CHECK(FindError(LoadYaml(base + "io: {block_size: 1000}}\n"), "tiers[0].io.block_size",
                  "not usable"));
  CHECK(LoadYaml(base + "io: {direct: false, block_size: 1000}}\n").ok());
  CHECK(FindError(LoadYaml(base + "io: {segment_size: 64KiB}}\n"), "tiers[0].io.segment_size",
                  "smaller than block_size"));
}

TEST_CASE("tier names are unique and plain") {
  std::string two = "version: 1\ntiers:\n  - {name: a, kind: host, capacity: 1GiB}\n"
                    "  - {name: NAME, kind: host, capacity: 1GiB}\n";
  CHECK(LoadYaml(std::string(two).replace(two.find("NAME"), 4, "b")).ok());
  std::optional<Diagnostic> d = FindError(LoadYaml(std::string(two).replace(two.find("NAME"), 4, "a")),
                                  "tiers[1].name", "duplicate tier name 'a'");
  REQUIRE(d);
  CHECK(d->hint.find("line 3") != std::string::npos);
  CHECK(FindError(LoadYaml(std::string(two).replace(two.find("NAME"), 4, "\"b c\"")),
                  "tiers[1].name", "characters"));
}

TEST_CASE("the chain may not be empty") {
  CHECK(FindError(LoadYaml("version: 1\ntiers: []\n"), "tiers", "empty"));
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n"), "tiers", "empty"));
  CHECK(LoadYaml(HostChain()).ok());
}

TEST_CASE("gpu tiers come before host tiers, which come before file tiers") {
  std::string host = "  - {name: h, kind: host, capacity: 1GiB}\n";
  std::string file = "  - {name: f, kind: file, capacity: 1GiB, paths: [/x]}\n";
  std::string gpu = "  - {name: g, kind: gpu, capacity: 1GiB, optional: true}\n";
  CHECK(LoadYaml("version: 1\ntiers:\n" + gpu + host + file).ok());
  std::optional<Diagnostic> d =
      FindError(LoadYaml("version: 1\ntiers:\n" + host + file + gpu), "tiers[2].kind",
                "gpu tier 'g' comes after file tier 'f'");
  REQUIRE(d);
  CHECK(d->line == 5);
  CHECK(FindError(LoadYaml("version: 1\ntiers:\n" + file + host), "tiers[1].kind",
                  "comes after"));
}

TEST_CASE("tiers may not share or nest directories") {
  std::string head = "version: 1\ntiers:\n";
  auto file = [](const char* name, const char* dir) {
    return std::string("  - {name: ") + name + ", kind: file, capacity: 1GiB, paths: [" + dir +
           "]}\n";
  };
  CHECK(LoadYaml(head + file("a", "/s/a") + file("b", "/s/b")).ok());
  CHECK(FindError(LoadYaml(head + file("a", "/s/a") + file("b", "/s/a/")), "tiers[1].paths[0]",
                  "also used by tier 'a'"));
  CHECK(FindError(LoadYaml(head + file("a", "/s/a") + file("b", "/s/a/b")), "tiers[1].paths[0]",
                  "overlaps"));
  CHECK(FindError(LoadYaml(head + "  - {name: a, kind: file, capacity: 1GiB, paths: [/s/a, /s/./a]}\n"),
                  "tiers[0].paths[1]", "also used by this tier"));
}

TEST_CASE("file tier paths must be absolute") {
  std::string base = "version: 1\ntiers:\n  - {name: f, kind: file, capacity: 1GiB, paths: [";
  CHECK(LoadYaml(base + "/abs]}\n").ok());
  CHECK(FindError(LoadYaml(base + "rel/dir]}\n"), "tiers[0].paths[0]", "absolute path"));
  CHECK(FindError(LoadYaml(base + "]}\n"), "tiers[0].paths", "at least one directory"));
}

TEST_CASE("version, policy and metrics values") {
  CHECK(FindError(LoadYaml("version: 2\ntiers:\n  - {name: h, kind: host, capacity: 1GiB}\n"),
                  "version", "unsupported version 2"));
  CHECK(LoadYaml(HostChain() + "policy: {eviction: lru, promote_on_read: false}\n").ok());
  std::optional<Diagnostic> d =
      FindError(LoadYaml(HostChain() + "policy: {eviction: lfu}\n"), "policy.eviction", "lfu");
  REQUIRE(d);
  CHECK(d->hint == "did you mean 'lru'?");
  LoadResult m = LoadYaml(HostChain() + "metrics: {prometheus_file: /tmp/p.prom, event_sample: 0.5}\n");
  REQUIRE(m.ok());
  CHECK(m.config.metrics.prometheus_file == "/tmp/p.prom");
  CHECK(FindError(LoadYaml(HostChain() + "metrics: {event_sample: 2}\n"), "metrics.event_sample",
                  "out of range"));
  CHECK(FindError(LoadYaml(HostChain() + "metrics: {dump_interval_s: 0}\n"),
                  "metrics.dump_interval_s", "positive"));
  // Past a year the dumper's period no longer fits the clock's nanoseconds.
  CHECK(FindError(LoadYaml(HostChain() + "metrics: {dump_interval_s: 1e300}\n"),
                  "metrics.dump_interval_s", "1e+300 is more than a year"));
  for (const char* v : {"nan", ".inf", "-.inf", "1e400"}) {
    CAPTURE(v);
    CHECK(FindError(LoadYaml(HostChain() + "metrics: {dump_interval_s: " + v + "}\n"), "metrics.dump_interval_s", ""));
  }
  CHECK(FindError(LoadYaml(HostChain() + "metrics: {event_rate_limit: 0}\n"),
                  "metrics.event_rate_limit", "at least 1"));
}

TEST_CASE("every error is reported, not only the first") {
  LoadResult r = LoadYaml(
      "version: 1\ntiers:\n"
      "  - {name: a, kind: host, capacity: 0}\n"
      "  - {name: b, kind: hots, capacity: 1GiB}\n"
      "  - {name: c, kind: file, capacity: 1GiB, paths: [/x], codec: {name: zstd, level: 99}}\n");
  CHECK(r.errors.size() == 3);
  for (size_t i = 1; i < r.errors.size(); ++i) CHECK(r.errors[i - 1].line <= r.errors[i].line);
}

TEST_CASE("ValidateConfig applies the same rules to a Config built in code") {
  Config c;
  TierConfig host;
  host.name = "host";
  host.kind = TierKind::kHost;
  host.capacity_bytes = 1 << 20;
  c.tiers.push_back(host);
  CHECK(ValidateConfig(c, testing::NoMachine()).empty());

  c.tiers[0].watermarks = {0.5, 0.6};
  c.tiers[0].codec = {CodecKind::kLz4, 0, 0.1, 1 << 20};
  std::vector<Diagnostic> d = ValidateConfig(c, testing::NoMachine());
  REQUIRE(d.size() == 2);
  CHECK(d[0].path == "tiers[0].watermarks");
  CHECK(d[0].line == 0);
  CHECK(d[1].path == "tiers[0].codec.level");
  CHECK(ValidateConfig(Config{}, testing::NoMachine()).at(0).path == "tiers");
}

TEST_CASE("a NUL byte in a tier name is escaped in the message, not cut off") {
  LoadResult r = LoadYaml("version: 1\ntiers:\n  - {name: \"a\\0b\", kind: host, capacity: 1GiB}\n");
  std::optional<Diagnostic> d = FindError(r, "tiers[0].name", "characters other than");
  REQUIRE(d);
  CHECK_MESSAGE(d->message.find('\0') == std::string::npos, "the message holds a NUL byte");
  CHECK_MESSAGE(d->message.find("a\\x00b") != std::string::npos, d->message);
  const std::string text = d->ToString();
  CHECK(std::string(text.c_str()).find("characters other than") != std::string::npos);
}

TEST_CASE("a NUL byte in a YAML key is escaped in the key path, and the diagnostic is whole") {
  LoadResult r = LoadYaml("version: 1\ntiers:\n  - {name: a, kind: host, capacity: 1GiB, \"pin\\0ned\": true}\n");
  REQUIRE(r.errors.size() == 1);
  const Diagnostic& d = r.errors[0];
  CHECK_MESSAGE(d.path == std::string("tiers[0].pin") + '\0' + "ned", d.path);  // as written, for JSON
  CHECK_MESSAGE(d.message.find("unknown key") != std::string::npos, d.message);
  const std::string text = d.ToString();
  CHECK_MESSAGE(text.find('\0') == std::string::npos, "the diagnostic text holds a NUL byte");
  // Printed with %s the text is whole: the key escaped, then the message and hint.
  const std::string printed(text.c_str());
  CHECK_MESSAGE(printed.find("tiers[0].pin\\x00ned: unknown key") != std::string::npos, printed);
  CHECK_MESSAGE(printed.find("(did you mean 'pinned'?)") != std::string::npos, printed);
}

TEST_CASE("pin_at_open: a size or a percentage of a host tier's capacity, never above it") {
  auto yaml = [](const std::string& v) {
    return "version: 1\ntiers:\n  - {name: host, kind: host, capacity: 1GiB, pin_at_open: " + v + "}\n";
  };
  LoadResult bytes = LoadYaml(yaml("256MiB"));
  REQUIRE_MESSAGE(bytes.ok(), bytes.Summary());
  CHECK(bytes.config.tiers[0].pin_at_open_bytes == 256ull << 20);
  LoadResult all = LoadYaml(yaml("100%"));
  REQUIRE_MESSAGE(all.ok(), all.Summary());
  CHECK(all.config.tiers[0].pin_at_open_fraction == doctest::Approx(1.0));
  CHECK(FindError(LoadYaml(yaml("2GiB")), "tiers[0].pin_at_open", "larger than the capacity"));
  CHECK(FindError(LoadYaml(yaml("150%")), "tiers[0].pin_at_open", "at most 100"));
  // Only host tiers pin.
  LoadResult file = LoadYaml(
      "version: 1\ntiers:\n  - {name: d, kind: file, capacity: 1GiB, paths: [/var/tmp/x], pin_at_open: 1GiB}\n");
  CHECK(testing::FindWarning(file, "tiers[0].pin_at_open", "host"));
}

}  // namespace
}  // namespace spillway
