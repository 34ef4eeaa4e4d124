// The config half of the tier conformance suite (tensorstore's kvstore suite
// checks each driver's spec the same way): for every tier kind, a YAML entry
// that sets every key that kind takes, loaded into a TierConfig, described by
// its JSON (TierConfigToJson: what `validate --json`, `info --json` and the
// Python Engine.tiers show), and that JSON read back as a tier entry must give
// the same TierConfig and the same JSON. A key the loader reads but the JSON
// leaves out, or one the JSON names differently, fails here.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "engine/stats_export.h"
#include "spillway/config_loader.h"
#include "test_util.h"

namespace spillway {
namespace {

using nlohmann::json;

LoadOptions Offline() {
  LoadOptions o;
  o.check_filesystem = false;
  o.create_dirs = false;
  GpuProbe gpu;
  gpu.built_with_cuda = true;
  gpu.device_total_bytes = {80ull << 30, 80ull << 30};
  o.gpu = gpu;
  o.worker = 1;
  return o;
}

TierConfig LoadOne(const std::string& tier_yaml) {
  const std::string text = "version: 1\ntiers:\n  - " + tier_yaml + "\n";
  LoadOptions o = Offline();
  LoadResult r = LoadConfigString(text, "<roundtrip>", o);
  REQUIRE_MESSAGE(r.ok(), r.Summary() << "\n" << text);
  REQUIRE(r.config.tiers.size() == 1);
  return r.config.tiers[0];
}

std::string Percent(double fraction) { return json(fraction * 100).dump() + "%"; }

// The JSON description turned back into a tier entry (flow YAML).
std::string EntryFromJson(const json& j) {
  json e;
  e["name"] = j["name"];
  e["kind"] = j["kind"];
  e["capacity"] = j["capacity_text"];
  e["watermarks"] = j["watermarks"];
  e["codec"] = {{"name", j["codec"]["name"]},
                {"level", j["codec"]["level"]},
                {"min_savings", j["codec"]["min_savings"]},
                {"chunk", j["codec"]["chunk_bytes"]}};
  e["max_object_size"] = j["max_object_bytes"];
  e["optional"] = j["optional"];
  if (j["medium"] != "unspecified") e["medium"] = j["medium"];
  const std::string kind = j["kind"];
  if (kind == "gpu") {
    e["device"] = j["device_per_worker"].is_null() ? j["device"] : j["device_per_worker"];
    e["memory"] = j["memory"];
    e["headroom"] = j["headroom_bytes"];
  } else if (kind == "host") {
    e["pinned"] = j["pinned"];
    if (j["pin_at_open_fraction"].get<double>() > 0) {
      e["pin_at_open"] = Percent(j["pin_at_open_fraction"]);
    } else {
      e["pin_at_open"] = j["pin_at_open_bytes"];
    }
  } else {
    e["paths"] = j["paths"];
    e["persistent"] = j["persistent"];
    e["wipe_persistent"] = j["wipe_persistent"];
    e["allow_symlink"] = j["allow_symlink"];
    if (j["min_free_fraction"].get<double>() > 0) {
      e["min_free"] = Percent(j["min_free_fraction"]);
    } else {
      e["min_free"] = j["min_free_bytes"];
    }
    e["io"] = {{"direct", j["io"]["direct"]},
               {"queue_depth", j["io"]["queue_depth"]},
               {"engine", j["io"]["engine"]},
               {"segment_size", j["io"]["segment_bytes"]},
               {"block_size", j["io"]["block_bytes"]}};
  }
  return e.dump();  // JSON is flow-style YAML
}

void CheckRoundTrip(const std::string& tier_yaml) {
  const TierConfig a = LoadOne(tier_yaml);
  const std::string ja = TierConfigToJson(a);
  const std::string entry = EntryFromJson(json::parse(ja));
  const TierConfig b = LoadOne(entry);
  const std::string jb = TierConfigToJson(b);
  CHECK_MESSAGE(ja == jb, "YAML: " << tier_yaml << "\nfirst JSON:  " << ja << "\nsecond JSON: " << jb);
  CHECK_MESSAGE(a == b, "the TierConfig read back from its JSON differs (a field the JSON lacks?)\nYAML: "
                            << tier_yaml << "\nJSON: " << ja);
}

}  // namespace

TEST_CASE("tier config round trip: host") {
  CheckRoundTrip(
      "{name: h, kind: host, capacity: 3GiB, watermarks: {high: 0.8, low: 0.6}, codec: {name: lz4, level: 2, "
      "min_savings: 0.2, chunk: 2MiB}, max_object_size: 64MiB, optional: true, pinned: false, pin_at_open: 1GiB}");
  CheckRoundTrip("{name: h, kind: host, capacity: 2GiB, pinned: true, pin_at_open: 25%}");
}

TEST_CASE("tier config round trip: file") {
  CheckRoundTrip(
      "{name: f, kind: file, capacity: 100GiB, medium: nvme, paths: [/var/tmp/rt-a, /var/tmp/rt-b], "
      "persistent: true, allow_symlink: true, min_free: 5GiB, codec: zstd, max_object_size: 1GiB, "
      "io: {direct: false, queue_depth: 8, engine: posix, segment_size: 64MiB, block_size: 512KiB}}");
  CheckRoundTrip(
      "{name: f, kind: file, capacity: 10GiB, path: /var/tmp/rt-c, wipe_persistent: true, min_free: 10%, "
      "watermarks: {high: 0.95}}");
}

TEST_CASE("tier config round trip: gpu") {
  CheckRoundTrip(
      "{name: g, kind: gpu, capacity: 8GiB, device: 1, memory: managed, headroom: 1GiB, codec: none, "
      "max_object_size: 2GiB, watermarks: {high: 0.85, low: 0.5}}");
  CheckRoundTrip("{name: g, kind: gpu, capacity: 4GiB, device: auto, optional: true}");
  CheckRoundTrip("{name: g, kind: gpu, capacity: 4GiB, device: [1, 0]}");
}

}  // namespace spillway
