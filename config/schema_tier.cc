// Reading the tier list into a chain, with a profile's exclusions and
// per-tier overrides applied. An override replaces the tier's key as a whole.
#include <algorithm>
#include <climits>
#include <map>

#include "config/schema.h"

namespace spillway {
namespace {

// Keys a tier may have, and the kind each kind-specific key belongs to.
struct TierKey {
  std::string_view name;
  std::optional<TierKind> owner;  // nullopt: every kind
};
constexpr TierKey kTierKeys[] = {
    {"name", std::nullopt},           {"kind", std::nullopt},
    {"capacity", std::nullopt},       {"watermarks", std::nullopt},
    {"codec", std::nullopt},          {"optional", std::nullopt},
    {"device", TierKind::kGpu},       {"memory", TierKind::kGpu},
    {"headroom", TierKind::kGpu},     {"pinned", TierKind::kHost},
    {"medium", TierKind::kFile},      {"paths", TierKind::kFile},
    {"path", TierKind::kFile},        {"io", TierKind::kFile},
    {"persistent", TierKind::kFile},  {"allow_symlink", TierKind::kFile},
    {"wipe_persistent", TierKind::kFile},
    {"max_object_size", std::nullopt}, {"min_free", TierKind::kFile},
    {"pin_at_open", TierKind::kHost},
};

const TierKey* FindTierKey(std::string_view name) {
  for (const TierKey& k : kTierKeys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string_view> TierKeyNames() {
  std::vector<std::string_view> v;
  for (const TierKey& k : kTierKeys) v.push_back(k.name);
  return v;
}

const char* RequiredHint(std::string_view key) {
  if (key == "name") return "e.g. name: host";
  if (key == "kind") return "one of gpu, host, file";
  return "a size like 64GiB or a percentage like 80%";
}

}  // namespace

ChainResult SchemaReader::ReadChain(const std::string& profile) {
  ChainResult chain;
  chain.config = base_;
  chain.origins = base_origins_;
  const Profile* p = profile.empty() ? nullptr : FindProfile(profile);
  if (p) {
    chain.config.profile = p->name;
    if (p->defaults) {
      ReadDefaults(*p->defaults, p->path + ".defaults", &chain.config, &chain.origins);
    }
    if (!p->exclude.empty()) chain.origins.Set("tiers", p->exclude_origin);
  }
  if (!tiers_) return chain;
  for (size_t i = 0; i < tiers_->items.size(); ++i) {
    if (p && std::any_of(p->exclude.begin(), p->exclude.end(),
                         [&](const auto& e) { return e.first == tier_names_[i]; })) {
      continue;
    }
    std::string field = "tiers[" + std::to_string(chain.config.tiers.size()) + "]";
    ReadTier(i, TierEntries(i, p), field, &chain);
  }
  return chain;
}

std::vector<SchemaReader::TierEntry> SchemaReader::TierEntries(size_t index,
                                                               const Profile* profile) {
  const ConfigNode& node = tiers_->items[index];
  std::vector<TierEntry> out;
  if (!node.is_map()) return out;
  const ConfigNode* over = nullptr;
  std::string over_path;
  if (profile && profile->overrides && !tier_names_[index].empty()) {
    over = profile->overrides->Find(tier_names_[index]);
    over_path = profile->path + ".tiers." + tier_names_[index];
    if (over && !over->is_map()) over = nullptr;
  }
  auto overridden = [&](const std::string& key) {
    if (!over) return false;
    if (key == "path" || key == "paths") return over->Find("path") || over->Find("paths");
    return over->Find(key) != nullptr && key != "name";
  };
  const std::string tier_path = "tiers[" + std::to_string(index) + "]";
  for (const auto& [k, v] : node.entries) {
    if (k.is_scalar() && overridden(k.scalar)) continue;
    out.push_back({&k, &v, tier_path + "." + (k.is_scalar() ? k.scalar : "")});
  }
  if (over) {
    for (const auto& [k, v] : over->entries) {
      if (!k.is_scalar() || k.scalar == "name") continue;
      out.push_back({&k, &v, over_path + "." + k.scalar});
    }
  }
  return out;
}

void SchemaReader::ReadTier(size_t index, const std::vector<TierEntry>& entries,
                            const std::string& field, ChainResult* chain) {
  const ConfigNode& node = tiers_->items[index];
  const std::string tier_path = "tiers[" + std::to_string(index) + "]";
  if (!values_.ExpectMap(node, tier_path, "a tier map with name, kind and capacity")) return;
  Origins& origins = chain->origins;
  origins.Set(field, ValueReader::At(node, tier_path));
  TierConfig t;
  t.watermarks = chain->config.default_watermarks;
  for (std::string suffix : {"", ".high", ".low"}) {
    if (const Origin* o = origins.Get("defaults.watermarks" + suffix)) {
      origins.Set(field + ".watermarks" + suffix, *o);
    }
  }

  std::optional<TierKind> kind;
  for (const TierEntry& e : entries) {
    if (!e.key->is_scalar() || e.key->scalar != "kind") continue;
    if (auto name = values_.Name(*e.value, e.path, "tier kind", {"gpu", "host", "file"})) {
      kind = TierKindFromName(*name);
      t.kind = *kind;
    }
    break;
  }

  std::map<std::string, int> seen;
  bool has_paths = false;
  for (const TierEntry& e : entries) {
    if (!e.key->is_scalar()) {
      sink_.ErrorAt(ValueReader::At(*e.key, tier_path),
                    std::string("expected a plain key, found ") + e.key->Describe());
      continue;
    }
    const std::string& key = e.key->scalar;
    auto [first, fresh] = seen.emplace(key, e.key->line);
    if (!fresh) {
      sink_.ErrorAt(ValueReader::At(*e.key, e.path), "duplicate key '" + key + "'",
                    "first given at line " + std::to_string(first->second));
      continue;
    }
    const TierKey* known = FindTierKey(key);
    if (!known) {
      sink_.ErrorAt(ValueReader::At(*e.key, e.path), "unknown key '" + key + "'",
                    SuggestHint(key, TierKeyNames()));
      continue;
    }
    if (known->owner && kind && *known->owner != *kind) {
      sink_.WarningAt(ValueReader::At(*e.key, e.path),
                      "key '" + key + "' applies to " + TierKindName(*known->owner) +
                          " tiers and is ignored for a " + TierKindName(*kind) + " tier");
      continue;
    }
    const ConfigNode& v = *e.value;
    const Origin at = ValueReader::At(v, e.path);
    const std::string f = field + "." + key;
    if (key != "path" && key != "paths") origins.Set(f, at);
    if (key == "name") {
      if (auto s = values_.String(v, e.path)) t.name = *s;
    } else if (key == "capacity") {
      std::string text;
      if (auto spec = values_.Size(v, e.path, true, &text)) {
        t.capacity_text = text;
        t.capacity_bytes = spec->is_percent ? 0 : spec->bytes;
      }
    } else if (key == "watermarks") {
      ReadWatermarks(v, e.path, field + ".watermarks", &t.watermarks, &origins);
    } else if (key == "codec") {
      ReadCodec(v, e.path, field, &t, &origins);
    } else if (key == "optional" || key == "pinned" || key == "persistent" ||
               key == "allow_symlink" || key == "wipe_persistent") {
      if (auto b = values_.Bool(v, e.path)) {
        (key == "optional" ? t.optional
         : key == "pinned" ? t.pinned
         : key == "persistent" ? t.persistent
         : key == "wipe_persistent" ? t.wipe_persistent
                               : t.allow_symlink) = *b;
      }
    } else if (key == "device") {
      ReadDevice(v, e.path, f, &t, &origins);
    } else if (key == "memory") {
      if (auto m = values_.Name(v, e.path, "gpu memory kind", {"device", "managed"})) {
        t.memory = *GpuMemoryFromName(*m);
      }
    } else if (key == "max_object_size") {
      if (auto spec = values_.Size(v, e.path, false)) t.max_object_bytes = spec->bytes;
    } else if (key == "min_free") {
      std::string text;
      if (auto spec = values_.Size(v, e.path, true, &text)) {
        if (spec->is_percent) {
          t.min_free_fraction = spec->percent / 100.0;
        } else {
          t.min_free_bytes = spec->bytes;
        }
      }
    } else if (key == "pin_at_open") {
      if (auto spec = values_.Size(v, e.path, true)) {
        if (spec->is_percent) {
          t.pin_at_open_fraction = spec->percent / 100.0;
        } else {
          t.pin_at_open_bytes = spec->bytes;
        }
      }
    } else if (key == "headroom") {
      if (auto spec = values_.Size(v, e.path, false)) t.headroom_bytes = spec->bytes;
    } else if (key == "medium") {
      if (auto m = values_.Name(v, e.path, "medium", {"nvme", "ssd", "hdd", "nfs"})) {
        t.medium = *MediumFromName(*m);
      }
    } else if (key == "path" || key == "paths") {
      if (has_paths) {
        sink_.ErrorAt(ValueReader::At(*e.key, e.path), "give either 'path' or 'paths', not both");
        continue;
      }
      has_paths = true;
      ReadPaths(e, field, &t, &origins);
    } else if (key == "io") {
      ReadIo(v, e.path, field, &t, &origins);
    }
  }

  for (std::string_view key : {"name", "kind", "capacity"}) {
    if (seen.count(std::string(key))) continue;
    sink_.ErrorAt(Origin{tier_path + "." + std::string(key), node.line, node.column},
                  "missing required key '" + std::string(key) + "'", RequiredHint(key));
  }
  if (kind == TierKind::kFile && !has_paths) {
    sink_.ErrorAt(Origin{tier_path + ".paths", node.line, node.column},
                  "missing required key 'paths'",
                  "file tiers need at least one directory, e.g. paths: [/var/tmp/spillway]");
  }
  if (!kind) t.paths.clear();  // no kind to judge them by; do not report them as misplaced
  chain->config.tiers.push_back(std::move(t));
  chain->tier_paths.push_back(tier_path);
}

// `device: N`, `device: auto` (the worker's own GPU) or `device: [N, ...]`
// (one per worker, by worker index).
void SchemaReader::ReadDevice(const ConfigNode& n, const std::string& path, const std::string& field,
                              TierConfig* tier, Origins* origins) {
  tier->device_auto = false;
  tier->device_list.clear();
  if (n.is_sequence()) {
    if (n.items.empty()) {
      sink_.ErrorAt(ValueReader::At(n, path), "the device list is empty",
                    "one CUDA device per worker, e.g. device: [0, 1], or device: auto");
      return;
    }
    for (size_t k = 0; k < n.items.size(); ++k) {
      const std::string item = path + "[" + std::to_string(k) + "]";
      origins->Set(field + "[" + std::to_string(k) + "]", ValueReader::At(n.items[k], item));
      if (auto d = values_.Int(n.items[k], item, 0, INT16_MAX)) tier->device_list.push_back(static_cast<int>(*d));
    }
    if (!tier->device_list.empty()) tier->device = tier->device_list[0];
    return;
  }
  if (n.is_scalar()) {
    StatusOr<std::string> text = values_.Expand(n.scalar);
    if (text.ok() && *text == "auto") {
      tier->device_auto = true;
      tier->device = 0;
      return;
    }
  }
  if (!n.is_scalar() && !n.is_null()) {
    sink_.ErrorAt(ValueReader::At(n, path), std::string("expected a device number, auto or a list, found ") + n.Describe(),
                  "e.g. device: 0, device: auto or device: [0, 1]");
    return;
  }
  if (auto d = values_.Int(n, path, 0, INT16_MAX)) tier->device = static_cast<int>(*d);
}

void SchemaReader::ReadCodec(const ConfigNode& n, const std::string& path,
                             const std::string& field, TierConfig* tier, Origins* origins) {
  static const std::vector<std::string_view> kNames{"none", "lz4", "zstd"};
  const std::string f = field + ".codec";
  origins->Set(f, ValueReader::At(n, path));
  if (n.is_scalar()) {
    if (auto name = values_.Name(n, path, "codec", kNames)) {
      tier->codec.kind = *CodecKindFromName(*name);
      tier->codec.level = DefaultCodecLevel(tier->codec.kind);
    }
    return;
  }
  if (!n.is_map()) {
    sink_.ErrorAt(ValueReader::At(n, path),
                  std::string("expected a codec name or a map {name, level}, found ") +
                      n.Describe(),
                  "e.g. codec: lz4 or codec: {name: zstd, level: 3}");
    return;
  }
  values_.CheckKeys(n, path, {"name", "level", "min_savings", "chunk"});
  if (const ConfigNode* name_node = n.Find("name")) {
    origins->Set(f + ".name", ValueReader::At(*name_node, path + ".name"));
    if (auto name = values_.Name(*name_node, path + ".name", "codec", kNames)) {
      tier->codec.kind = *CodecKindFromName(*name);
      tier->codec.level = DefaultCodecLevel(tier->codec.kind);
    }
  } else {
    sink_.ErrorAt(Origin{path + ".name", n.line, n.column}, "missing required key 'name'",
                  "one of none, lz4, zstd");
  }
  if (const ConfigNode* v = n.Find("level")) {
    origins->Set(f + ".level", ValueReader::At(*v, path + ".level"));
    if (auto level = values_.Int(*v, path + ".level", INT32_MIN, INT32_MAX)) {
      tier->codec.level = static_cast<int>(*level);
    }
  }
  if (const ConfigNode* v = n.Find("min_savings")) {
    origins->Set(f + ".min_savings", ValueReader::At(*v, path + ".min_savings"));
    if (auto x = values_.Number(*v, path + ".min_savings")) tier->codec.min_savings = *x;
  }
  if (const ConfigNode* v = n.Find("chunk")) {
    origins->Set(f + ".chunk", ValueReader::At(*v, path + ".chunk"));
    if (auto spec = values_.Size(*v, path + ".chunk", false)) tier->codec.chunk_bytes = spec->bytes;
  }
}

void SchemaReader::ReadIo(const ConfigNode& n, const std::string& path, const std::string& field,
                          TierConfig* tier, Origins* origins) {
  if (!values_.ExpectMap(n, path, "a map {direct, queue_depth, engine, segment_size, block_size}")) {
    return;
  }
  values_.CheckKeys(n, path, {"direct", "queue_depth", "engine", "segment_size", "block_size"});
  IoConfig& io = tier->io;
  for (const auto& [key, v] : n.entries) {
    if (!key.is_scalar()) continue;
    const std::string key_path = path + "." + key.scalar;
    origins->Set(field + ".io." + key.scalar, ValueReader::At(v, key_path));
    if (key.scalar == "direct") {
      if (auto b = values_.Bool(v, key_path)) io.direct = *b;
    } else if (key.scalar == "queue_depth") {
      if (auto q = values_.Int(v, key_path, 1, 4096)) io.queue_depth = static_cast<uint32_t>(*q);
    } else if (key.scalar == "engine") {
      if (auto e = values_.Name(v, key_path, "io engine", {"auto", "uring", "posix"})) {
        io.engine = *IoEngineFromName(*e);
      }
    } else if (key.scalar == "segment_size") {
      if (auto s = values_.Size(v, key_path, false)) io.segment_bytes = s->bytes;
    } else if (key.scalar == "block_size") {
      if (auto s = values_.Size(v, key_path, false)) io.block_bytes = s->bytes;
    }
  }
}

void SchemaReader::ReadPaths(const TierEntry& e, const std::string& field, TierConfig* tier,
                             Origins* origins) {
  origins->Set(field + ".paths", ValueReader::At(*e.value, e.path));
  if (e.key->scalar == "path") {
    if (auto s = values_.String(*e.value, e.path)) {
      tier->paths = {*s};
      origins->Set(field + ".paths[0]", ValueReader::At(*e.value, e.path));
    }
    return;
  }
  auto list = values_.StringList(*e.value, e.path);
  if (!list) return;
  tier->paths.clear();
  for (size_t k = 0; k < list->size(); ++k) {
    tier->paths.push_back((*list)[k].first);
    origins->Set(field + ".paths[" + std::to_string(k) + "]", (*list)[k].second);
  }
}

}  // namespace spillway
