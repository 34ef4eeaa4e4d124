// Collecting diagnostics: where a config value came from (Origins), the sink
// every check reports into, and did-you-mean suggestions.
//
// Checks name a field of the resolved chain ("tiers[1].codec.level"); Origins
// maps it to the key path and position the user wrote, which may differ: the
// tier may be tiers[2] in the file (a profile excluded one before it), or the
// value may come from `defaults` or from a profile override.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "spillway/config_loader.h"

namespace spillway {

struct Origin {
  std::string path;  // as the user sees it, e.g. "profiles.cpu.tiers.host.capacity"
  int line = 0;      // 1-based; 0 when unknown
  int column = 0;
};

class Origins {
 public:
  void Set(const std::string& field, Origin origin) { map_[field] = std::move(origin); }
  // The origin recorded for exactly `field`, or null.
  const Origin* Get(const std::string& field) const {
    auto it = map_.find(field);
    return it == map_.end() ? nullptr : &it->second;
  }
  // The origin of `field`, else of its nearest recorded parent with the rest of
  // the field appended to the path, else `field` itself without a position.
  Origin Find(const std::string& field) const;

 private:
  std::map<std::string, Origin> map_;
};

class DiagnosticSink {
 public:
  explicit DiagnosticSink(std::string file) : file_(std::move(file)) {}

  // Origins used to place field-named diagnostics; null places none.
  void set_origins(const Origins* origins) { origins_ = origins; }
  const Origins* origins() const { return origins_; }

  // Field-named reports. An error is dropped when an error at the same key
  // path, or one inside or around it, is already reported, so one mistake does
  // not cascade (a missing capacity is not also "capacity must be greater
  // than zero"; an unset ${VAR} in paths[0] is not also "no directory").
  void Error(const std::string& field, std::string message, std::string hint = {});
  void Warning(const std::string& field, std::string message, std::string hint = {});
  void ErrorAt(const Origin& at, std::string message, std::string hint = {});
  void WarningAt(const Origin& at, std::string message, std::string hint = {});

  size_t error_count() const { return errors_.size(); }
  // Sorted by position (positionless ones last); identical reports appear once.
  std::vector<Diagnostic> TakeErrors();
  std::vector<Diagnostic> TakeWarnings();

 private:
  bool Covered(const std::string& path) const;
  void Add(Diagnostic::Severity severity, const Origin& at, std::string message, std::string hint);

  std::string file_;
  const Origins* origins_ = nullptr;
  std::vector<Diagnostic> errors_;
  std::vector<Diagnostic> warnings_;
  std::set<std::tuple<int, int, int, std::string, std::string>> seen_;
  std::set<std::string> error_paths_;
};

// Optimal string alignment distance (an adjacent swap counts as one edit).
size_t EditDistance(std::string_view a, std::string_view b);

// "did you mean 'capacity'?" when a candidate is close to `word`, otherwise
// "expected one of: a, b, c".
std::string SuggestHint(std::string_view word, const std::vector<std::string_view>& candidates);

}  // namespace spillway
