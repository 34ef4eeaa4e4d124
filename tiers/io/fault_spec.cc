// The fault spec language of FaultFileIo ("eio=0.01,torn=0.001,seed=7"):
// parsing with errors a user can act on, and printing back. Kept apart from
// the wrapper so the wrapper reads as mechanism only.
#include <algorithm>
#include <charconv>
#include <map>
#include <string>
#include <system_error>

#include "tiers/io/fault_file_io.h"

namespace spillway {

namespace {

constexpr const char* kKindNames[kFaultKindCount] = {"eio_read", "eio_write", "eio_sync", "enospc",
                                                    "short",    "torn",      "latency"};
// Every key the parser knows, for "did you mean" suggestions.
constexpr const char* kKeys[] = {"eio",   "eio_read", "eio_write", "eio_sync",   "enospc", "short",
                                 "torn",  "latency",  "latency_us", "seed"};

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

Status Unknown(std::string_view key) {
  std::string msg = "fault spec: unknown fault '" + std::string(key) + "'";
  const char* best = nullptr;
  size_t best_d = 3;  // suggest only close matches
  for (const char* k : kKeys) {
    size_t d = EditDistance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  if (best != nullptr) {
    msg += ", did you mean '";
    msg += best;
    msg += "'?";
  } else {
    msg += " (known: eio, eio_read, eio_write, eio_sync, enospc, short, torn, latency, latency_us, seed)";
  }
  return Status::InvalidArgument(msg);
}

bool ParseU64(std::string_view s, uint64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

Status ParseProbability(std::string_view key, std::string_view v, double* out) {
  double d = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty()) {
    return Status::InvalidArgument("fault spec: '" + std::string(key) + "' expects a probability from 0 to 1, got '" +
                                   std::string(v) + "'");
  }
  if (!(d >= 0.0 && d <= 1.0)) {
    return Status::InvalidArgument("fault spec: '" + std::string(key) + "' probability " + std::string(v) +
                                   " is out of range: expected 0 to 1");
  }
  *out = d;
  return Status::OK();
}

// "eio_write@5" or "torn@3-9" -> windows (several for plain "eio").
Status ParseWindow(std::string_view item, size_t at, FaultSpec* spec) {
  std::string_view key = Trim(item.substr(0, at));
  std::string_view range = Trim(item.substr(at + 1));
  uint64_t first = 0, last = 0;
  size_t dash = range.find('-');
  bool ok = dash == std::string_view::npos
                ? ParseU64(range, &first) && (last = first, true)
                : ParseU64(range.substr(0, dash), &first) && ParseU64(range.substr(dash + 1), &last);
  if (!ok || last < first) {
    return Status::InvalidArgument("fault spec: '" + std::string(item) +
                                   "': expected KIND@N or KIND@FIRST-LAST (operation indices from 0)");
  }
  if (key == "eio") {
    for (FaultKind k : {FaultKind::kEioRead, FaultKind::kEioWrite, FaultKind::kEioSync}) {
      spec->schedule.push_back({k, first, last});
    }
    return Status::OK();
  }
  for (size_t k = 0; k < kFaultKindCount; ++k) {
    if (key == kKindNames[k]) {
      spec->schedule.push_back({static_cast<FaultKind>(k), first, last});
      return Status::OK();
    }
  }
  return Unknown(key);
}

void AppendProbability(std::string* out, const char* key, double p, bool even_zero = false) {
  if (p <= 0 && !even_zero) return;
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), p);  // shortest form that round-trips
  if (!out->empty()) *out += ',';
  *out += key;
  *out += '=';
  out->append(buf, r.ptr);
}

}  // namespace

const char* FaultKindName(FaultKind kind) {
  size_t i = static_cast<size_t>(kind);
  return i < kFaultKindCount ? kKindNames[i] : "?";
}

uint64_t FaultCounts::total_failures() const {
  uint64_t n = 0;
  for (size_t k = 0; k < kFaultKindCount; ++k) {
    if (static_cast<FaultKind>(k) != FaultKind::kLatency) n += injected[k];
  }
  return n;
}

StatusOr<FaultSpec> ParseFaultSpec(std::string_view text) {
  FaultSpec spec;
  std::map<std::string, std::string_view> values;  // key -> value, to apply "eio" before its specifics
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = Trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    if (size_t at = item.find('@'); at != std::string_view::npos) {
      SPILLWAY_RETURN_IF_ERROR(ParseWindow(item, at, &spec));
      continue;
    }
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return Status::InvalidArgument("fault spec: '" + std::string(item) + "': expected KEY=VALUE or KIND@N");
    }
    std::string key(Trim(item.substr(0, eq)));
    std::string_view value = Trim(item.substr(eq + 1));
    if (std::find_if(std::begin(kKeys), std::end(kKeys), [&](const char* k) { return key == k; }) ==
        std::end(kKeys)) {
      return Unknown(key);
    }
    if (!values.emplace(key, value).second) {
      return Status::InvalidArgument("fault spec: '" + key + "' is given twice");
    }
  }
  // "eio" first, so eio_read/eio_write/eio_sync override it whatever the order.
  if (auto it = values.find("eio"); it != values.end()) {
    double p = 0;
    SPILLWAY_RETURN_IF_ERROR(ParseProbability("eio", it->second, &p));
    spec.eio_read = spec.eio_write = spec.eio_sync = p;
  }
  for (const auto& [key, value] : values) {
    if (key == "eio") continue;
    if (key == "seed" || key == "latency_us") {
      uint64_t n = 0;
      if (!ParseU64(value, &n)) {
        return Status::InvalidArgument("fault spec: '" + key + "' expects a whole number, got '" +
                                       std::string(value) + "'");
      }
      if (key == "seed") {
        spec.seed = n;
      } else if (n > 10'000'000) {
        return Status::InvalidArgument("fault spec: latency_us=" + std::string(value) +
                                       " is out of range: expected at most 10000000 (10 s)");
      } else {
        spec.latency_us = static_cast<uint32_t>(n);
      }
      continue;
    }
    double* field = key == "eio_read"    ? &spec.eio_read
                    : key == "eio_write" ? &spec.eio_write
                    : key == "eio_sync"  ? &spec.eio_sync
                    : key == "enospc"    ? &spec.enospc
                    : key == "short"     ? &spec.short_write
                    : key == "torn"      ? &spec.torn_write
                                         : &spec.latency;
    SPILLWAY_RETURN_IF_ERROR(ParseProbability(key, value, field));
  }
  return spec;
}

std::string FaultSpec::ToString() const {
  std::string s;
  AppendProbability(&s, "eio_read", eio_read);
  AppendProbability(&s, "eio_write", eio_write);
  AppendProbability(&s, "eio_sync", eio_sync);
  AppendProbability(&s, "enospc", enospc);
  AppendProbability(&s, "short", short_write);
  AppendProbability(&s, "torn", torn_write);
  if (latency_us > 0) {
    s += (s.empty() ? "" : ",") + std::string("latency_us=") + std::to_string(latency_us);
    if (latency < 1.0) AppendProbability(&s, "latency", latency, /*even_zero=*/true);
  }
  for (const FaultWindow& w : schedule) {
    s += (s.empty() ? "" : ",") + std::string(FaultKindName(w.kind)) + "@" + std::to_string(w.first);
    if (w.last != w.first) s += "-" + std::to_string(w.last);
  }
  s += (s.empty() ? "" : ",") + std::string("seed=") + std::to_string(seed);
  return s;
}

}  // namespace spillway
