// Typed scalar access, the document's top level (version, defaults, policy,
// metrics) and the profiles' structure. Tiers are read in schema_tier.cc.
#include "config/schema.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <map>

namespace spillway {
namespace {

std::string Join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string Quote(std::string_view s) {
  constexpr size_t kMax = 60;
  if (s.size() > kMax) return "'" + std::string(s.substr(0, kMax)) + "...'";
  return "'" + std::string(s) + "'";
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The scalar's text with ${VAR} expanded; reports and returns nullopt otherwise.
std::optional<std::string> Text(DiagnosticSink& sink, const ValueReader& values, const ConfigNode& n,
                                const std::string& path, const char* expected) {
  if (!n.is_scalar()) {
    sink.ErrorAt(ValueReader::At(n, path),
                 std::string("expected ") + expected + ", found " + n.Describe());
    return std::nullopt;
  }
  StatusOr<std::string> s = values.Expand(n.scalar);
  if (!s.ok()) {
    sink.ErrorAt(ValueReader::At(n, path), s.status().message());
    return std::nullopt;
  }
  return std::move(*s);
}

}  // namespace

std::optional<std::string> ValueReader::String(const ConfigNode& n, const std::string& path) {
  return Text(sink_, *this, n, path, "a string");
}

std::optional<bool> ValueReader::Bool(const ConfigNode& n, const std::string& path) {
  std::optional<std::string> t = Text(sink_, *this, n, path, "true or false");
  if (!t) return std::nullopt;
  static const std::vector<std::string_view> kTrue{"true", "True", "TRUE", "yes", "Yes", "on", "On"};
  static const std::vector<std::string_view> kFalse{"false", "False", "FALSE", "no", "No", "off", "Off"};
  if (std::find(kTrue.begin(), kTrue.end(), *t) != kTrue.end()) return true;
  if (std::find(kFalse.begin(), kFalse.end(), *t) != kFalse.end()) return false;
  sink_.ErrorAt(At(n, path), "expected true or false, found " + Quote(*t));
  return std::nullopt;
}

std::optional<int64_t> ValueReader::Int(const ConfigNode& n, const std::string& path,
                                        int64_t min, int64_t max) {
  std::optional<std::string> t = Text(sink_, *this, n, path, "an integer");
  if (!t) return std::nullopt;
  std::string_view s = Trim(*t);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec == std::errc::invalid_argument || end != s.data() + s.size()) {
    sink_.ErrorAt(At(n, path), "expected an integer, found " + Quote(*t));
    return std::nullopt;
  }
  if (ec == std::errc::result_out_of_range || v < min || v > max) {
    sink_.ErrorAt(At(n, path), "expected an integer from " + std::to_string(min) + " to " +
                                   std::to_string(max) + ", found " + Quote(*t));
    return std::nullopt;
  }
  return v;
}

std::optional<double> ValueReader::Number(const ConfigNode& n, const std::string& path) {
  std::optional<std::string> t = Text(sink_, *this, n, path, "a number");
  if (!t) return std::nullopt;
  std::string_view s = Trim(*t);
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) {
    std::string hint = LooksLikePercent(s) ? "write a fraction such as 0.9 instead of 90%" : "";
    sink_.ErrorAt(At(n, path), "expected a number, found " + Quote(*t), hint);
    return std::nullopt;
  }
  return v;
}

std::optional<SizeSpec> ValueReader::Size(const ConfigNode& n, const std::string& path,
                                          bool allow_percent, std::string* text) {
  const char* expected = allow_percent
                             ? "expected bytes, a size like 64GiB or 1.5TB, or a percentage like 80%"
                             : "expected bytes or a size like 64MiB or 1.5GB";
  std::optional<std::string> t = Text(sink_, *this, n, path, "a size");
  if (!t) return std::nullopt;
  StatusOr<SizeSpec> spec = ParseSize(*t);
  if (!spec.ok()) {
    sink_.ErrorAt(At(n, path), spec.status().message(), expected);
    return std::nullopt;
  }
  if (spec->is_percent && !allow_percent) {
    sink_.ErrorAt(At(n, path), "a percentage is not allowed here, found " + Quote(*t), expected);
    return std::nullopt;
  }
  if (text) *text = std::string(Trim(*t));
  return *spec;
}

std::optional<std::string> ValueReader::Name(const ConfigNode& n, const std::string& path,
                                             const char* what,
                                             const std::vector<std::string_view>& names) {
  std::optional<std::string> t = Text(sink_, *this, n, path, "a name");
  if (!t) return std::nullopt;
  if (std::find(names.begin(), names.end(), *t) != names.end()) return t;
  sink_.ErrorAt(At(n, path), std::string("unknown ") + what + " " + Quote(*t),
                SuggestHint(*t, names));
  return std::nullopt;
}

std::optional<std::vector<std::pair<std::string, Origin>>> ValueReader::StringList(
    const ConfigNode& n, const std::string& path) {
  std::vector<std::pair<std::string, Origin>> out;
  if (n.is_scalar()) {
    std::optional<std::string> s = String(n, path);
    if (!s) return std::nullopt;
    out.emplace_back(std::move(*s), At(n, path));
    return out;
  }
  if (!n.is_sequence()) {
    sink_.ErrorAt(At(n, path),
                  std::string("expected a string or a list of strings, found ") + n.Describe());
    return std::nullopt;
  }
  bool ok = true;
  for (size_t i = 0; i < n.items.size(); ++i) {
    std::string item_path = path + "[" + std::to_string(i) + "]";
    std::optional<std::string> s = String(n.items[i], item_path);
    if (s) {
      out.emplace_back(std::move(*s), At(n.items[i], item_path));
    } else {
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

bool ValueReader::ExpectMap(const ConfigNode& n, const std::string& path, const char* what) {
  if (n.is_map()) return true;
  sink_.ErrorAt(At(n, path), std::string("expected ") + what + ", found " + n.Describe());
  return false;
}

void ValueReader::CheckKeys(const ConfigNode& map, const std::string& path,
                            const std::vector<std::string_view>& allowed) {
  std::map<std::string, int> first_line;
  for (const auto& [key, value] : map.entries) {
    if (!key.is_scalar()) {
      sink_.ErrorAt(At(key, path), std::string("expected a plain key, found ") + key.Describe());
      continue;
    }
    std::string key_path = Join(path, key.scalar);
    auto [it, fresh] = first_line.emplace(key.scalar, key.line);
    if (!fresh) {
      sink_.ErrorAt(At(key, key_path), "duplicate key " + Quote(key.scalar),
                    "first given at line " + std::to_string(it->second));
      continue;
    }
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), key.scalar) == allowed.end()) {
      sink_.ErrorAt(At(key, key_path), "unknown key " + Quote(key.scalar),
                    SuggestHint(key.scalar, allowed));
    }
  }
}

SchemaReader::SchemaReader(const ConfigNode& root, DiagnosticSink& sink, const EnvLookup& env,
                           const VarResolver& vars)
    : root_(root), sink_(sink), values_(sink, env, vars) {}

bool SchemaReader::ReadDocument() {
  if (root_.is_null()) {
    sink_.ErrorAt(Origin{"", 1, 1}, "the config is empty: expected a map with 'version' and 'tiers'",
                  "start from examples/tiers.yaml");
    return false;
  }
  if (!values_.ExpectMap(root_, "", "a map with 'version' and 'tiers' at the top level")) {
    return false;
  }
  ReadTop();
  return true;
}

void SchemaReader::ReadTop() {
  values_.CheckKeys(root_, "", {"version", "defaults", "tiers", "policy", "metrics", "profiles"});
  if (const ConfigNode* v = root_.Find("version")) {
    if (auto version = values_.Int(*v, "version", INT32_MIN, INT32_MAX)) {
      base_.version = static_cast<int>(*version);
    }
    base_origins_.Set("version", ValueReader::At(*v, "version"));
  } else {
    sink_.ErrorAt(ValueReader::At(root_, "version"), "missing required key 'version'",
                  "add 'version: 1' at the top");
  }
  if (const ConfigNode* d = root_.Find("defaults")) {
    ReadDefaults(*d, "defaults", &base_, &base_origins_);
  }
  tiers_ = root_.Find("tiers");
  if (!tiers_) {
    sink_.ErrorAt(ValueReader::At(root_, "tiers"), "missing required key 'tiers'",
                  "a list of tiers, fastest first");
    base_origins_.Set("tiers", ValueReader::At(root_, "tiers"));
  } else {
    base_origins_.Set("tiers", ValueReader::At(*tiers_, "tiers"));
    if (!tiers_->is_sequence()) {
      if (!tiers_->is_null()) {
        sink_.ErrorAt(ValueReader::At(*tiers_, "tiers"),
                      std::string("expected a list of tiers, found ") + tiers_->Describe(),
                      "write each tier as a list item: '- name: host'");
      }
      tiers_ = nullptr;
    }
  }
  CollectTierNames();
  if (const ConfigNode* p = root_.Find("policy")) ReadPolicy(*p);
  if (const ConfigNode* m = root_.Find("metrics")) ReadMetrics(*m);
  if (const ConfigNode* p = root_.Find("profiles")) ReadProfiles(*p);
}

void SchemaReader::ReadDefaults(const ConfigNode& n, const std::string& path, Config* config,
                                Origins* origins) {
  if (!values_.ExpectMap(n, path, "a map with 'watermarks' and 'workers_per_node'")) return;
  values_.CheckKeys(n, path, {"watermarks", "workers_per_node"});
  if (const ConfigNode* w = n.Find("watermarks")) {
    ReadWatermarks(*w, path + ".watermarks", "defaults.watermarks", &config->default_watermarks,
                   origins);
  }
  if (const ConfigNode* w = n.Find("workers_per_node")) {
    origins->Set("defaults.workers_per_node", ValueReader::At(*w, path + ".workers_per_node"));
    if (auto v = values_.Int(*w, path + ".workers_per_node", 1, 4096)) config->workers_per_node = static_cast<int>(*v);
  }
}

void SchemaReader::ReadWatermarks(const ConfigNode& n, const std::string& path,
                                  const std::string& field, Watermarks* wm, Origins* origins) {
  if (!values_.ExpectMap(n, path, "a map {high: 0.9, low: 0.75}")) return;
  values_.CheckKeys(n, path, {"high", "low"});
  origins->Set(field, ValueReader::At(n, path));
  for (auto [key, target] : {std::pair{"high", &wm->high}, std::pair{"low", &wm->low}}) {
    const ConfigNode* v = n.Find(key);
    if (!v) continue;
    std::string key_path = path + "." + key;
    if (auto x = values_.Number(*v, key_path)) *target = *x;
    origins->Set(field + "." + key, ValueReader::At(*v, key_path));
  }
}

void SchemaReader::ReadPolicy(const ConfigNode& n) {
  if (!values_.ExpectMap(n, "policy", "a map {eviction, promote_on_read}")) return;
  values_.CheckKeys(n, "policy", {"eviction", "promote_on_read"});
  if (const ConfigNode* v = n.Find("eviction")) {
    if (auto s = values_.String(*v, "policy.eviction")) base_.policy.eviction = *s;
    base_origins_.Set("policy.eviction", ValueReader::At(*v, "policy.eviction"));
  }
  if (const ConfigNode* v = n.Find("promote_on_read")) {
    if (auto b = values_.Bool(*v, "policy.promote_on_read")) base_.policy.promote_on_read = *b;
  }
}

void SchemaReader::ReadMetrics(const ConfigNode& n) {
  if (!values_.ExpectMap(n, "metrics", "a map of metrics settings")) return;
  values_.CheckKeys(n, "metrics", {"prometheus_file", "dump_interval_s", "event_log",
                                   "event_sample", "event_rate_limit", "labels", "listen"});
  MetricsConfig& m = base_.metrics;
  for (const auto& [key, value] : n.entries) {
    if (!key.is_scalar()) continue;
    std::string path = "metrics." + key.scalar;
    base_origins_.Set(path, ValueReader::At(value, path));
    if (key.scalar == "prometheus_file" || key.scalar == "event_log" || key.scalar == "listen") {
      if (auto s = values_.String(value, path)) {
        (key.scalar == "event_log" ? m.event_log : key.scalar == "listen" ? m.listen : m.prometheus_file) = *s;
      }
    } else if (key.scalar == "labels") {
      // A map of label name -> string; names are checked by the validator.
      m.labels_set = true;
      m.labels.clear();
      if (value.is_null()) continue;
      if (!values_.ExpectMap(value, path, "a map of label name -> value, e.g. {worker: w1}")) continue;
      values_.CheckKeys(value, path, {});
      for (const auto& [lk, lv] : value.entries) {
        if (!lk.is_scalar()) continue;
        const std::string lpath = path + "." + lk.scalar;
        base_origins_.Set(lpath, ValueReader::At(lv, lpath));
        if (auto s = values_.String(lv, lpath)) m.labels.emplace_back(lk.scalar, *s);
      }
    } else if (key.scalar == "dump_interval_s" || key.scalar == "event_sample") {
      if (auto x = values_.Number(value, path)) {
        (key.scalar == "event_sample" ? m.event_sample : m.dump_interval_s) = *x;
      }
    } else if (key.scalar == "event_rate_limit") {
      if (auto x = values_.Int(value, path, 0, UINT32_MAX)) {
        m.event_rate_limit = static_cast<uint32_t>(*x);
      }
    }
  }
}

void SchemaReader::ReadProfiles(const ConfigNode& n) {
  if (n.is_null()) return;
  if (!values_.ExpectMap(n, "profiles", "a map of profile name -> {exclude, hostname, tiers}")) {
    return;
  }
  values_.CheckKeys(n, "profiles", {});
  for (const auto& [key, value] : n.entries) {
    if (!key.is_scalar() || HasProfile(key.scalar)) continue;
    ReadProfile(key, value);
  }
}

void SchemaReader::ReadProfile(const ConfigNode& key, const ConfigNode& value) {
  Profile p;
  p.name = key.scalar;
  p.path = "profiles." + p.name;
  p.origin = ValueReader::At(key, p.path);
  p.exclude_origin = p.origin;
  profile_names_.push_back(p.name);
  if (value.is_null() || !values_.ExpectMap(value, p.path, "a map {exclude, hostname, tiers}")) {
    profiles_.push_back(std::move(p));
    return;
  }
  values_.CheckKeys(value, p.path, {"exclude", "hostname", "tiers", "defaults"});
  std::vector<std::string_view> names(tier_names_.begin(), tier_names_.end());
  names.erase(std::remove(names.begin(), names.end(), std::string_view()), names.end());
  if (const ConfigNode* e = value.Find("exclude")) {
    p.exclude_origin = ValueReader::At(*e, p.path + ".exclude");
    if (auto list = values_.StringList(*e, p.path + ".exclude")) {
      for (auto& [name, at] : *list) {
        if (std::find(names.begin(), names.end(), name) == names.end()) {
          sink_.ErrorAt(at, "unknown tier '" + name + "'", SuggestHint(name, names));
        }
      }
      p.exclude = std::move(*list);
    }
  }
  if (const ConfigNode* h = value.Find("hostname")) {
    if (auto list = values_.StringList(*h, p.path + ".hostname")) {
      for (auto& [pattern, at] : *list) {
        if (pattern.empty()) sink_.ErrorAt(at, "empty hostname pattern", "e.g. 'gpu-*'");
        p.hostname_patterns.push_back(pattern);
      }
    }
  }
  if (const ConfigNode* t = value.Find("tiers")) {
    std::string path = p.path + ".tiers";
    if (values_.ExpectMap(*t, path, "a map of tier name -> keys to override")) {
      values_.CheckKeys(*t, path, {});
      for (const auto& [tier_key, tier_value] : t->entries) {
        if (!tier_key.is_scalar()) continue;
        std::string tier_path = path + "." + tier_key.scalar;
        if (std::find(names.begin(), names.end(), tier_key.scalar) == names.end()) {
          sink_.ErrorAt(ValueReader::At(tier_key, tier_path),
                        "unknown tier '" + tier_key.scalar + "'",
                        SuggestHint(tier_key.scalar, names));
        }
        if (values_.ExpectMap(tier_value, tier_path, "a map of tier keys to override") &&
            tier_value.Find("name")) {
          sink_.ErrorAt(ValueReader::At(*tier_value.Find("name"), tier_path + ".name"),
                        "a profile cannot rename a tier", "exclude it and add another instead");
        }
      }
      p.overrides = t;
    }
  }
  p.defaults = value.Find("defaults");
  profiles_.push_back(std::move(p));
}

void SchemaReader::CollectTierNames() {
  tier_names_.clear();
  if (!tiers_) return;
  for (const ConfigNode& t : tiers_->items) {
    const ConfigNode* name = t.is_map() ? t.Find("name") : nullptr;
    std::string text;
    if (name && name->is_scalar()) {
      StatusOr<std::string> expanded = values_.Expand(name->scalar);
      text = expanded.ok() ? *expanded : name->scalar;
    }
    tier_names_.push_back(std::move(text));
  }
}

bool SchemaReader::HasProfile(const std::string& name) const {
  return FindProfile(name) != nullptr;
}

const SchemaReader::Profile* SchemaReader::FindProfile(const std::string& name) const {
  for (const Profile& p : profiles_) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string SchemaReader::ProfileForHost(const std::string& hostname) const {
  for (const Profile& p : profiles_) {
    for (const std::string& pattern : p.hostname_patterns) {
      if (fnmatch(pattern.c_str(), hostname.c_str(), 0) == 0) return p.name;
    }
  }
  return "";
}

}  // namespace spillway
