// Diagnostic formatting, origin lookup, the sink, and suggestions.
#include "config/diagnostics.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "base/escape.h"

namespace spillway {

std::string Diagnostic::ToString() const {
  // The key path and file are kept as written (JSON shows them exactly); a
  // NUL or ESC in a YAML key is escaped only here, where it would reach a terminal.
  std::string s = file.empty() ? "<config>" : EscapeControlBytes(file);
  if (line > 0) s += ":" + std::to_string(line) + ":" + std::to_string(column);
  s += severity == Severity::kError ? ": error: " : ": warning: ";
  if (!path.empty()) s += EscapeControlBytes(path) + ": ";
  s += message;
  if (!hint.empty()) s += " (" + hint + ")";
  return s;
}

std::string LoadResult::Summary() const {
  std::string s;
  for (const auto* list : {&errors, &warnings}) {
    for (const Diagnostic& d : *list) {
      if (!s.empty()) s += '\n';
      s += d.ToString();
    }
  }
  return s;
}

Origin Origins::Find(const std::string& field) const {
  std::string prefix = field;
  while (true) {
    auto it = map_.find(prefix);
    if (it != map_.end()) {
      Origin o = it->second;
      o.path += field.substr(prefix.size());
      return o;
    }
    size_t cut = prefix.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) break;
    prefix.resize(cut);
  }
  return Origin{field, 0, 0};
}

void DiagnosticSink::Error(const std::string& field, std::string message, std::string hint) {
  Origin at = origins_ ? origins_->Find(field) : Origin{field, 0, 0};
  if (Covered(at.path)) return;
  Add(Diagnostic::Severity::kError, at, std::move(message), std::move(hint));
}

bool DiagnosticSink::Covered(const std::string& path) const {
  // An error at `path` itself, or at a parent of it ("tiers[1]" for "tiers[1].paths")...
  std::string parent = path;
  while (true) {
    if (error_paths_.count(parent)) return true;
    size_t cut = parent.find_last_of(".[");
    if (cut == std::string::npos || cut == 0) break;
    parent.resize(cut);
  }
  // ...or inside it ("tiers[1].paths[0]" for "tiers[1].paths").
  for (char sep : {'.', '['}) {
    auto it = error_paths_.lower_bound(path + sep);
    if (it != error_paths_.end() && it->compare(0, path.size() + 1, path + sep) == 0) return true;
  }
  return false;
}

void DiagnosticSink::Warning(const std::string& field, std::string message, std::string hint) {
  Origin at = origins_ ? origins_->Find(field) : Origin{field, 0, 0};
  Add(Diagnostic::Severity::kWarning, at, std::move(message), std::move(hint));
}

void DiagnosticSink::ErrorAt(const Origin& at, std::string message, std::string hint) {
  Add(Diagnostic::Severity::kError, at, std::move(message), std::move(hint));
}

void DiagnosticSink::WarningAt(const Origin& at, std::string message, std::string hint) {
  Add(Diagnostic::Severity::kWarning, at, std::move(message), std::move(hint));
}

void DiagnosticSink::Add(Diagnostic::Severity severity, const Origin& at, std::string message,
                         std::string hint) {
  // Stored escaped: printed with %s, a NUL (in a tier name, say) would cut
  // the message short and the reason would be lost.
  message = EscapeControlBytes(message);
  hint = EscapeControlBytes(hint);
  auto key = std::make_tuple(static_cast<int>(severity), at.line, at.column, at.path, message);
  if (!seen_.insert(std::move(key)).second) return;
  Diagnostic d;
  d.severity = severity;
  d.file = file_;
  d.line = at.line;
  d.column = at.column;
  d.path = at.path;
  d.message = std::move(message);
  d.hint = std::move(hint);
  if (severity == Diagnostic::Severity::kError) error_paths_.insert(d.path);
  (severity == Diagnostic::Severity::kError ? errors_ : warnings_).push_back(std::move(d));
}

namespace {
std::vector<Diagnostic> Sorted(std::vector<Diagnostic> v) {
  std::stable_sort(v.begin(), v.end(), [](const Diagnostic& a, const Diagnostic& b) {
    auto key = [](const Diagnostic& d) { return std::make_tuple(d.line == 0, d.line, d.column); };
    return key(a) < key(b);
  });
  return v;
}
}  // namespace

std::vector<Diagnostic> DiagnosticSink::TakeErrors() { return Sorted(std::move(errors_)); }
std::vector<Diagnostic> DiagnosticSink::TakeWarnings() { return Sorted(std::move(warnings_)); }

size_t EditDistance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                            std::tolower(static_cast<unsigned char>(b[j - 1]))
                        ? 0
                        : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::string SuggestHint(std::string_view word, const std::vector<std::string_view>& candidates) {
  constexpr size_t kMaxCompared = 256;
  constexpr size_t kMaxListed = 12;
  std::string_view best;
  size_t best_distance = SIZE_MAX;
  if (word.size() <= 64 && candidates.size() <= kMaxCompared) {
    for (std::string_view c : candidates) {
      size_t dist = EditDistance(word, c);
      if (dist < best_distance) {
        best_distance = dist;
        best = c;
      }
    }
  }
  size_t limit = std::max<size_t>(1, std::min(word.size(), best.size()) / 3);
  if (!best.empty() && best_distance <= limit && best_distance < word.size()) {
    return "did you mean '" + std::string(best) + "'?";
  }
  std::string s = "expected one of: ";
  for (size_t i = 0; i < candidates.size() && i < kMaxListed; ++i) {
    if (i) s += ", ";
    s += candidates[i];
  }
  if (candidates.size() > kMaxListed) s += ", ...";
  return s;
}

}  // namespace spillway
