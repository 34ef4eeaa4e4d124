// StatsToPrometheus against a small strict parser of the text exposition
// format (0.0.4): metric and label name syntax, label value escapes, HELP and
// TYPE before a family's samples, families contiguous, no duplicate series,
// counters named *_total and never negative, histogram buckets cumulative,
// ending in le="+Inf" and agreeing with _count. promtool is not installed
// here; this parser is stricter than it on ordering.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <fstream>
#include <sstream>

#include "engine_test_util.h"
#include "engine/stats_export.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

using LabelSet = std::map<std::string, std::string>;

struct Sample {
  std::string name;
  LabelSet labels;
  double value = 0;
};

struct Family {
  std::string name, type, help;
  std::vector<Sample> samples;
};

struct Exposition {
  std::vector<Family> families;
  std::string error;  // empty when the text parsed
  const Family* Find(const std::string& name) const {
    for (const Family& f : families) {
      if (f.name == name) return &f;
    }
    return nullptr;
  }
  // The value of the one sample of `name` whose labels include `want`.
  std::optional<double> Value(const std::string& family, const std::string& name, const LabelSet& want) const {
    const Family* f = Find(family);
    if (!f) return std::nullopt;
    std::optional<double> found;
    for (const Sample& s : f->samples) {
      if (s.name != name) continue;
      bool match = true;
      for (const auto& [k, v] : want) {
        auto it = s.labels.find(k);
        if (it == s.labels.end() || it->second != v) match = false;
      }
      if (!match) continue;
      if (found) return std::nullopt;  // ambiguous
      found = s.value;
    }
    return found;
  }
};

const std::regex kMetricName("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");

bool ParseValue(const std::string& s, double* v) {
  if (s == "NaN") return *v = NAN, true;
  if (s == "+Inf") return *v = INFINITY, true;
  if (s == "-Inf") return *v = -INFINITY, true;
  if (s.empty()) return false;
  char* end = nullptr;
  *v = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*v);
}

// Parses "{a="x",b="y"}" starting at line[i] == '{'; leaves i after '}'.
bool ParseLabels(const std::string& line, size_t& i, LabelSet* out, std::string* err) {
  ++i;
  while (true) {
    if (i < line.size() && line[i] == '}') {
      ++i;
      return true;
    }
    size_t eq = line.find('=', i);
    if (eq == std::string::npos) return *err = "label without '='", false;
    std::string name = line.substr(i, eq - i);
    if (!std::regex_match(name, kLabelName)) return *err = "bad label name '" + name + "'", false;
    i = eq + 1;
    if (i >= line.size() || line[i] != '"') return *err = "label value not quoted", false;
    ++i;
    std::string value;
    while (true) {
      if (i >= line.size()) return *err = "unterminated label value", false;
      char c = line[i++];
      if (c == '"') break;
      if (c == '\\') {
        if (i >= line.size()) return *err = "dangling backslash", false;
        char e = line[i++];
        if (e == '\\') value += '\\';
        else if (e == '"') value += '"';
        else if (e == 'n') value += '\n';
        else return *err = std::string("bad escape \\") + e, false;
      } else {
        value += c;
      }
    }
    if (!out->emplace(name, value).second) return *err = "duplicate label " + name, false;
    if (i < line.size() && line[i] == ',') ++i;
    else if (i >= line.size() || line[i] != '}') return *err = "expected ',' or '}' after a label", false;
  }
}

std::string FamilyOf(const std::string& sample, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      std::string base = sample.substr(0, sample.size() - s.size());
      auto it = types.find(base);
      if (it != types.end() && it->second == "histogram") return base;
    }
  }
  return sample;
}

std::string CheckHistogram(const Family& f) {
  // Group by the labels other than le.
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // (le, count) in text order
    std::optional<double> sum, count;
  };
  std::map<LabelSet, Series> series;
  for (const Sample& s : f.samples) {
    LabelSet base = s.labels;
    base.erase("le");
    Series& ser = series[base];
    if (s.name == f.name + "_bucket") {
      auto it = s.labels.find("le");
      if (it == s.labels.end()) return "bucket without le";
      double le;
      if (!ParseValue(it->second, &le) && it->second != "+Inf") return "bad le " + it->second;
      ser.buckets.emplace_back(le, s.value);
    } else if (s.name == f.name + "_sum") {
      ser.sum = s.value;
    } else if (s.name == f.name + "_count") {
      ser.count = s.value;
    } else {
      return "unexpected sample " + s.name + " in histogram";
    }
  }
  for (const auto& [labels, ser] : series) {
    if (ser.buckets.empty()) return "histogram series without buckets";
    for (size_t i = 1; i < ser.buckets.size(); ++i) {
      if (!(ser.buckets[i].first > ser.buckets[i - 1].first)) return "le not increasing";
      if (ser.buckets[i].second < ser.buckets[i - 1].second) return "buckets not cumulative";
    }
    if (!std::isinf(ser.buckets.back().first)) return "last bucket is not +Inf";
    if (!ser.sum || !ser.count) return "histogram without _sum or _count";
    if (*ser.count != ser.buckets.back().second) return "_count differs from the +Inf bucket";
  }
  return "";
}

Exposition ParsePrometheus(const std::string& text) {
  Exposition ex;
  auto fail = [&](size_t lineno, const std::string& why) {
    ex.error = "line " + std::to_string(lineno) + ": " + why;
    return ex;
  };
  if (!text.empty() && text.back() != '\n') return fail(0, "text does not end in a newline");
  std::map<std::string, std::string> types, helps;
  std::set<std::string> closed;  // families whose block has ended
  std::set<std::pair<std::string, LabelSet>> seen;
  std::string current;
  size_t lineno = 0, pos = 0;
  auto enter = [&](const std::string& fam) -> std::string {
    if (fam == current) return "";
    if (closed.count(fam)) return "family " + fam + " is not contiguous";
    if (!current.empty()) closed.insert(current);
    current = fam;
    return "";
  };
  auto family = [&](const std::string& name) -> Family& {
    for (Family& f : ex.families) {
      if (f.name == name) return f;
    }
    ex.families.push_back(Family{name, "", "", {}});
    return ex.families.back();
  };
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (line.empty()) continue;
    if (line.find('\r') != std::string::npos) return fail(lineno, "carriage return");
    if (line[0] == '#') {
      std::istringstream in(line);
      std::string hash, kw, name;
      in >> hash >> kw >> name;
      if (hash != "#" || (kw != "HELP" && kw != "TYPE")) continue;  // a comment
      if (!std::regex_match(name, kMetricName)) return fail(lineno, "bad metric name '" + name + "'");
      if (std::string e = enter(name); !e.empty()) return fail(lineno, e);
      const size_t start = line.find(name, 2 + kw.size()) + name.size();
      std::string rest = start < line.size() ? line.substr(start + 1) : "";
      if (kw == "TYPE") {
        if (types.count(name)) return fail(lineno, "second TYPE for " + name);
        if (!family(name).samples.empty()) return fail(lineno, "TYPE after samples of " + name);
        static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary", "untyped"};
        if (!kTypes.count(rest)) return fail(lineno, "bad type '" + rest + "'");
        types[name] = rest;
        family(name).type = rest;
      } else {
        if (helps.count(name)) return fail(lineno, "second HELP for " + name);
        std::string help;
        for (size_t i = 0; i < rest.size(); ++i) {
          if (rest[i] != '\\') {
            help += rest[i];
            continue;
          }
          if (++i >= rest.size()) return fail(lineno, "dangling backslash in HELP");
          if (rest[i] == '\\') help += '\\';
          else if (rest[i] == 'n') help += '\n';
          else return fail(lineno, "bad escape in HELP");
        }
        helps[name] = help;
        family(name).help = help;
      }
      continue;
    }
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    Sample s;
    s.name = line.substr(0, i);
    if (!std::regex_match(s.name, kMetricName)) return fail(lineno, "bad metric name '" + s.name + "'");
    std::string err;
    if (i < line.size() && line[i] == '{' && !ParseLabels(line, i, &s.labels, &err)) return fail(lineno, err);
    if (i >= line.size() || line[i] != ' ') return fail(lineno, "expected a space before the value");
    std::string rest = line.substr(i + 1);
    const size_t sp = rest.find(' ');
    if (sp != std::string::npos) {  // optional integer timestamp
      std::string ts = rest.substr(sp + 1);
      if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos) return fail(lineno, "bad timestamp");
      rest = rest.substr(0, sp);
    }
    if (!ParseValue(rest, &s.value)) return fail(lineno, "bad value '" + rest + "'");
    const std::string fam = FamilyOf(s.name, types);
    if (!types.count(fam)) return fail(lineno, "sample of " + s.name + " before its TYPE");
    if (!helps.count(fam)) return fail(lineno, "sample of " + s.name + " before its HELP");
    if (std::string e = enter(fam); !e.empty()) return fail(lineno, e);
    if (!seen.emplace(s.name, s.labels).second) return fail(lineno, "duplicate series " + s.name);
    const std::string& type = types[fam];
    if (type == "counter") {
      if (s.name.size() < 6 || s.name.compare(s.name.size() - 6, 6, "_total") != 0) {
        return fail(lineno, "counter " + s.name + " not named *_total");
      }
      if (s.value < 0 || std::isnan(s.value)) return fail(lineno, "negative counter " + s.name);
    }
    family(fam).samples.push_back(std::move(s));
  }
  for (const Family& f : ex.families) {
    if (f.type.empty()) return fail(0, "family " + f.name + " without TYPE");
    if (f.type == "histogram") {
      if (std::string e = CheckHistogram(f); !e.empty()) return fail(0, f.name + ": " + e);
    }
  }
  return ex;
}

EngineStats SyntheticStats() {
  EngineStats s;
  TierStats a;
  a.name = "host";
  a.kind = "host";
  a.capacity_bytes = 1 << 20;
  a.objects = 3;
  a.used_bytes = 1000;
  TierStats b;
  b.name = "we\"ird\\na\nme";  // every character that needs escaping
  b.kind = "file";
  b.bytes_written = 500;
  b.raw_bytes_written = 1000;
  b.segments = 2;
  s.tiers = {a, b};
  BoundaryStats d;
  d.from = a.name;
  d.to = b.name;
  d.down = true;
  d.objects = 7;
  d.bytes = 7000;
  d.stored_bytes = 3500;
  d.nanos = 2'500'000;
  d.latency_us[0] = 1;
  d.latency_us[3] = 2;
  d.latency_us[kLatencyBuckets - 1] = 4;  // the open-ended bucket
  BoundaryStats u = d;
  std::swap(u.from, u.to);
  u.down = false;
  for (auto& c : u.latency_us) c = 0;
  s.boundaries = {d, u};
  s.objects = 3;
  s.puts = 10;
  s.gets = 4;
  s.misses = 1;
  s.backpressure_waits = 4;
  s.backpressure_wait_ns = 1'500'000'000;
  return s;
}

}  // namespace

TEST_CASE("the parser rejects what it should") {
  CHECK(ParsePrometheus("# HELP x_total h\n# TYPE x_total counter\nx_total 1\n").error.empty());
  CHECK_FALSE(ParsePrometheus("x_total 1\n").error.empty());                            // no TYPE
  CHECK_FALSE(ParsePrometheus("# HELP x h\n# TYPE x gauge\nx{a=\"b} 1\n").error.empty());  // unterminated
  CHECK_FALSE(ParsePrometheus("# HELP x h\n# TYPE x gauge\nx{a=\"\\q\"} 1\n").error.empty());  // bad escape
  CHECK_FALSE(ParsePrometheus("# HELP x h\n# TYPE x gauge\nx 1\nx 2\n").error.empty());  // duplicate
  CHECK_FALSE(ParsePrometheus("# HELP x h\n# TYPE x counter\nx 1\n").error.empty());     // not *_total
  CHECK_FALSE(ParsePrometheus("# HELP x h\n# TYPE x gauge\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\nx{a=\"1\"} 2\n")
                  .error.empty());  // not contiguous
  const std::string hist_head = "# HELP h h\n# TYPE h histogram\n";
  CHECK(ParsePrometheus(hist_head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n")
            .error.empty());
  CHECK_FALSE(ParsePrometheus(hist_head + "h_bucket{le=\"1\"} 3\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n")
                  .error.empty());  // not cumulative
  CHECK_FALSE(ParsePrometheus(hist_head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"2\"} 2\nh_sum 3\nh_count 2\n")
                  .error.empty());  // no +Inf
  CHECK_FALSE(ParsePrometheus(hist_head + "h_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 5\n")
                  .error.empty());  // count disagrees
}

TEST_CASE("synthetic stats: escaping, per-tier and per-boundary labels, histogram in seconds") {
  const EngineStats s = SyntheticStats();
  const std::string text = StatsToPrometheus(s);
  Exposition ex = ParsePrometheus(text);
  REQUIRE_MESSAGE(ex.error.empty(), ex.error << "\n" << text);
  const std::string weird = s.tiers[1].name;

  CHECK(ex.Value("spillway_tier_objects", "spillway_tier_objects", {{"tier", "host"}, {"kind", "host"}}) == 3.0);
  CHECK(ex.Value("spillway_tier_written_bytes_total", "spillway_tier_written_bytes_total",
                 {{"tier", weird}, {"kind", "file"}}) == 500.0);
  CHECK(ex.Value("spillway_tier_compression_ratio", "spillway_tier_compression_ratio", {{"tier", weird}}) == 0.5);
  // file-only gauges carry only file tiers
  const Family* seg = ex.Find("spillway_tier_segments");
  REQUIRE(seg);
  REQUIRE(seg->samples.size() == 1);
  CHECK(seg->samples[0].labels.at("tier") == weird);

  const LabelSet down = {{"from", "host"}, {"to", weird}, {"direction", "down"}};
  const LabelSet up = {{"from", weird}, {"to", "host"}, {"direction", "up"}};
  CHECK(ex.Value("spillway_moved_objects_total", "spillway_moved_objects_total", down) == 7.0);
  CHECK(ex.Value("spillway_moved_stored_bytes_total", "spillway_moved_stored_bytes_total", up) == 3500.0);
  CHECK(ex.Value("spillway_move_seconds_total", "spillway_move_seconds_total", down) == doctest::Approx(0.0025));

  // Histogram: le in seconds from the log2 microsecond buckets.
  const std::string h = "spillway_move_duration_seconds";
  auto bucket = [&](const std::string& le) {
    LabelSet l = down;
    l["le"] = le;
    return ex.Value(h, h + "_bucket", l);
  };
  CHECK(bucket("1e-06") == 1.0);   // bucket 0: < 1 us
  CHECK(bucket("4e-06") == 1.0);   // bucket 2: < 4 us
  CHECK(bucket("8e-06") == 3.0);   // bucket 3: < 8 us
  CHECK(bucket("1073.741824") == 3.0);  // last finite bound, 2^30 us
  CHECK(bucket("+Inf") == 7.0);
  CHECK(ex.Value(h, h + "_count", down) == 7.0);
  CHECK(ex.Value(h, h + "_sum", down) == doctest::Approx(0.0025));
  CHECK(ex.Value(h, h + "_count", up) == 0.0);

  CHECK(ex.Value("spillway_requests_total", "spillway_requests_total", {{"op", "put"}}) == 10.0);
  CHECK(ex.Value("spillway_get_misses_total", "spillway_get_misses_total", {}) == 1.0);
  CHECK(ex.Value("spillway_backpressure_waits_total", "spillway_backpressure_waits_total", {}) == 4.0);
  CHECK(ex.Value("spillway_backpressure_wait_seconds_total", "spillway_backpressure_wait_seconds_total", {}) ==
        doctest::Approx(1.5));
  for (const Family& f : ex.families) {
    CHECK_MESSAGE(!f.help.empty(), f.name);
    CHECK_MESSAGE(f.name.rfind("spillway_", 0) == 0, f.name);
  }
}

// docs/observability.md's tables against the export: every family the
// exporter writes is documented with its type, and every documented name is
// written (for stats with every kind of tier and a boundary between them).
TEST_CASE("the documented metric names and types are the ones exported") {
  std::ifstream doc(std::string(SPILLWAY_SOURCE_DIR) + "/docs/observability.md");
  REQUIRE(doc.good());
  std::map<std::string, std::string> documented;  // name -> type
  const std::regex row(R"(^\| `(spillway_[a-z0-9_]+)` \| (counter|gauge|histogram) \|)");
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      CHECK_MESSAGE(documented.emplace(m[1], m[2]).second, "documented twice: " << m[1]);
    }
  }
  REQUIRE(documented.size() > 20);

  EngineStats s = SyntheticStats();
  TierStats gpu;
  gpu.name = "gpu";
  gpu.kind = "gpu";
  s.tiers.insert(s.tiers.begin(), gpu);
  Exposition ex = ParsePrometheus(StatsToPrometheus(s));
  REQUIRE_MESSAGE(ex.error.empty(), ex.error);
  std::set<std::string> exported;
  for (const Family& f : ex.families) {
    exported.insert(f.name);
    auto it = documented.find(f.name);
    CHECK_MESSAGE(it != documented.end(), "exported but not in docs/observability.md: " << f.name);
    if (it != documented.end()) {
      CHECK_MESSAGE(it->second == f.type, f.name << " is a " << f.type << ", documented as " << it->second);
    }
  }
  for (const auto& [name, type] : documented) {
    CHECK_MESSAGE(exported.count(name), "documented but not exported: " << name);
  }
}

TEST_CASE("empty stats still parse") {
  Exposition ex = ParsePrometheus(StatsToPrometheus(EngineStats{}));
  CHECK_MESSAGE(ex.error.empty(), ex.error);
}

TEST_CASE("a real engine's export parses and agrees with Stats()") {
  TempDir dir("obs-prom");
  EngineOptions o;
  o.background_mover = false;
  auto opened = Engine::Open(HostFileChain(dir.path(), 1 << 20, 64 << 20, CodecKind::kLz4), o);
  REQUIRE_MESSAGE(opened.ok(), opened.status().ToString());
  Engine& e = **opened;
  for (int i = 0; i < 64; ++i) {
    auto data = CompressibleBytes(48 << 10, i);
    REQUIRE(e.Put("p/" + std::to_string(i), data).ok());
  }
  for (int i = 0; i < 64; i += 5) REQUIRE(e.Get("p/" + std::to_string(i)).ok());
  CHECK(e.Get("absent").status().IsNotFound());
  REQUIRE(e.Flush().ok());

  const EngineStats s = e.Stats();
  REQUIRE(s.boundaries.size() >= 2);  // demotions and promotions happened
  Exposition ex = ParsePrometheus(StatsToPrometheus(s));
  REQUIRE_MESSAGE(ex.error.empty(), ex.error);
  for (const TierStats& t : s.tiers) {
    const LabelSet l = {{"tier", t.name}, {"kind", t.kind}};
    CHECK(ex.Value("spillway_tier_objects", "spillway_tier_objects", l) == double(t.objects));
    CHECK(ex.Value("spillway_tier_used_bytes", "spillway_tier_used_bytes", l) == double(t.used_bytes));
    CHECK(ex.Value("spillway_tier_hits_total", "spillway_tier_hits_total", l) == double(t.hits));
    CHECK(ex.Value("spillway_tier_demotions_in_total", "spillway_tier_demotions_in_total", l) ==
          double(t.demotions_in));
    CHECK(ex.Value("spillway_tier_written_bytes_total", "spillway_tier_written_bytes_total", l) ==
          double(t.bytes_written));
  }
  CHECK(ex.Value("spillway_tier_objects", "spillway_tier_objects", {{"tier", "disk"}, {"kind", "file"}}));
  for (const BoundaryStats& b : s.boundaries) {
    const LabelSet l = {{"from", b.from}, {"to", b.to}, {"direction", b.down ? "down" : "up"}};
    CHECK(ex.Value("spillway_moved_bytes_total", "spillway_moved_bytes_total", l) == double(b.bytes));
    uint64_t n = 0;
    for (uint64_t c : b.latency_us) n += c;
    CHECK(n > 0);
    CHECK(ex.Value("spillway_move_duration_seconds", "spillway_move_duration_seconds_count", l) == double(n));
  }
  CHECK(ex.Value("spillway_objects", "spillway_objects", {}) == 64.0);
  CHECK(ex.Value("spillway_get_misses_total", "spillway_get_misses_total", {}) == 1.0);
}
