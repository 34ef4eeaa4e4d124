// Reading a ConfigNode document into Config chains: keys, types, enum names,
// sizes and ${VAR}. Value rules (ranges, order, the machine) live in
// validate.cc; this file only reports what cannot even be put into a Config.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spillway/config.h"
#include "config/diagnostics.h"
#include "config/expand.h"
#include "config/node.h"
#include "base/units.h"

namespace spillway {

// Typed access to scalars; each reports what was expected on failure.
class ValueReader {
 public:
  ValueReader(DiagnosticSink& sink, EnvLookup env, VarResolver vars = {})
      : sink_(sink), env_(std::move(env)), vars_(std::move(vars)) {}

  static Origin At(const ConfigNode& n, const std::string& path) {
    return Origin{path, n.line, n.column};
  }
  DiagnosticSink& sink() { return sink_; }
  const EnvLookup& env() const { return env_; }
  // `text` with ${VAR} expanded (the caller's variables first, then env()).
  StatusOr<std::string> Expand(std::string_view text) const { return ExpandVars(text, env_, vars_); }

  // The scalar with ${VAR} expanded.
  std::optional<std::string> String(const ConfigNode& n, const std::string& path);
  std::optional<bool> Bool(const ConfigNode& n, const std::string& path);
  std::optional<int64_t> Int(const ConfigNode& n, const std::string& path, int64_t min,
                             int64_t max);
  std::optional<double> Number(const ConfigNode& n, const std::string& path);
  // `text`, when given, receives the expanded text as written.
  std::optional<SizeSpec> Size(const ConfigNode& n, const std::string& path, bool allow_percent,
                               std::string* text = nullptr);
  // One name out of `names`; `what` is the noun in "unknown kind 'gpuu'".
  std::optional<std::string> Name(const ConfigNode& n, const std::string& path, const char* what,
                                  const std::vector<std::string_view>& names);
  // A list of strings; a single string is taken as a list of one.
  std::optional<std::vector<std::pair<std::string, Origin>>> StringList(const ConfigNode& n,
                                                                         const std::string& path);

  // Reports (and returns false) when `n` is not a map; `what` names the value.
  bool ExpectMap(const ConfigNode& n, const std::string& path, const char* what);
  // Reports keys not in `allowed` (with a suggestion), duplicate keys, and
  // keys that are not plain strings.
  void CheckKeys(const ConfigNode& map, const std::string& path,
                 const std::vector<std::string_view>& allowed);

 private:
  DiagnosticSink& sink_;
  EnvLookup env_;
  VarResolver vars_;
};

struct ChainResult {
  Config config;
  Origins origins;  // fields of `config` -> where the file says them
  std::vector<std::string> tier_paths;  // config.tiers[r] is tier_paths[r] in the file
};

class SchemaReader {
 public:
  SchemaReader(const ConfigNode& root, DiagnosticSink& sink, const EnvLookup& env,
               const VarResolver& vars = {});

  // Reads the parts every chain shares and the profiles' structure.
  // Returns false when the document is unusable (not a map).
  bool ReadDocument();

  const std::vector<std::string>& profile_names() const { return profile_names_; }
  bool HasProfile(const std::string& name) const;
  // The first profile whose hostname rule matches `hostname`; "" when none.
  std::string ProfileForHost(const std::string& hostname) const;

  // The chain `profile` ("" for none) describes.
  ChainResult ReadChain(const std::string& profile);

 private:
  struct Profile {
    std::string name;
    std::string path;  // "profiles.<name>"
    Origin origin;
    std::vector<std::string> hostname_patterns;
    std::vector<std::pair<std::string, Origin>> exclude;
    Origin exclude_origin;
    const ConfigNode* overrides = nullptr;  // tier name -> map of keys
    const ConfigNode* defaults = nullptr;
  };
  struct TierEntry {
    const ConfigNode* key;
    const ConfigNode* value;
    std::string path;  // "tiers[2].capacity" or "profiles.p.tiers.host.capacity"
  };

  void ReadTop();
  void ReadDefaults(const ConfigNode& n, const std::string& path, Config* config,
                    Origins* origins);
  void ReadWatermarks(const ConfigNode& n, const std::string& path, const std::string& field,
                      Watermarks* wm, Origins* origins);
  void ReadPolicy(const ConfigNode& n);
  void ReadMetrics(const ConfigNode& n);
  void ReadProfiles(const ConfigNode& n);
  void ReadProfile(const ConfigNode& key, const ConfigNode& value);
  void CollectTierNames();
  std::vector<TierEntry> TierEntries(size_t index, const Profile* profile);
  void ReadTier(size_t index, const std::vector<TierEntry>& entries, const std::string& field,
                ChainResult* chain);
  void ReadDevice(const ConfigNode& n, const std::string& path, const std::string& field, TierConfig* tier,
                  Origins* origins);
  void ReadCodec(const ConfigNode& n, const std::string& path, const std::string& field,
                 TierConfig* tier, Origins* origins);
  void ReadIo(const ConfigNode& n, const std::string& path, const std::string& field,
              TierConfig* tier, Origins* origins);
  void ReadPaths(const TierEntry& e, const std::string& field, TierConfig* tier,
                 Origins* origins);
  const Profile* FindProfile(const std::string& name) const;

  const ConfigNode& root_;
  DiagnosticSink& sink_;
  ValueReader values_;
  Config base_;
  Origins base_origins_;
  const ConfigNode* tiers_ = nullptr;
  std::vector<std::string> tier_names_;  // by index in the file; "" when unnamed
  std::vector<Profile> profiles_;
  std::vector<std::string> profile_names_;
};

}  // namespace spillway
