// `spillway inspect DIR [--json] [--summary] [--strict]`: lists and verifies
// every record of a persistent file tier directory (its segment files
// seg-XXXXXXXX.spw, record format in docs/format.md) without writing to it.
//
// The scan is recovery's own (tiers/segment_scan.h): records are found by
// walking each segment, a header valid at its position gives the record's
// length, and after anything unreadable the scan resynchronizes at the next
// 8-byte boundary. Each record is classified:
//   live     the newest valid record of its key: what a reopen serves
//   stale    a valid record superseded by a newer one of the same key
//   erased   a record the engine marked erased (kFlagErased): skipped whole
//   corrupt  a header or payload that fails its checksum or limits, or
//            bytes that are neither a record nor zero padding where one
//            should start
//   torn     a record cut off by the end of the file (an interrupted write)
//   freed    a record whose blocks are punched out or were never written (an
//            erased object, or a write interrupted by a crash): never served
//   missing  records the manifest (tiers/segment_manifest.h) says the last
//            Flush left in a segment, but that are gone: a zeroed block, a
//            truncated file (one problem per segment)
// Exit status: 0 clean, 1 corrupt or missing records found (with --strict
// also torn and freed ones), 2 usage error or an unreadable directory or
// segment.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/escape.h"
#include "base/units.h"
#include "spillway/file_io.h"
#include "tiers/file_tier.h"
#include "tiers/record.h"
#include "tiers/segment.h"
#include "tiers/segment_manifest.h"
#include "tiers/segment_scan.h"
#include "tools/command.h"

namespace spillway::cli {
namespace {

struct InspectArgs {
  std::string dir;
  bool json = false;
  bool summary = false;
  bool strict = false;
  bool progress = true;
};

enum class State : unsigned char { kLive, kStale, kErased, kCorrupt, kTorn, kFreed, kMissing, kUnreadable };

const char* StateName(State s) {
  switch (s) {
    case State::kLive: return "live";
    case State::kStale: return "stale";
    case State::kErased: return "erased";
    case State::kCorrupt: return "corrupt";
    case State::kTorn: return "torn";
    case State::kFreed: return "freed";
    case State::kMissing: return "missing";
    case State::kUnreadable: return "unreadable";
  }
  return "?";
}

// A valid record, or a problem found at `offset`.
struct Row {
  std::string segment;
  uint64_t offset = 0;
  uint64_t length = 0;
  State state = State::kLive;
  bool has_header = false;  // header fields below are meaningful
  RecordHeader header{};
  std::string key;
  std::string message;  // problems only
};

// Keys are arbitrary bytes: printable ASCII as is, the rest as \xNN, long
// keys shortened.
std::string EscapeKey(std::string_view key) {
  constexpr size_t kShown = 80;
  std::string out = EscapeControlBytes(key.substr(0, kShown), EscapeMode::kQuotedBytes);
  if (key.size() > kShown) out += "...(" + std::to_string(key.size()) + " bytes)";
  return out;
}

// Progress on stderr for large tiers when stderr is a terminal.
class Progress {
 public:
  Progress(uint64_t total, bool enabled)
      : total_(total), on_(enabled && total >= (64ull << 20) && isatty(STDERR_FILENO)) {}
  ~Progress() { Done(); }
  void Update(uint64_t done) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double f = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
    const int width = 40, fill = static_cast<int>(f * width);
    std::fprintf(stderr, "\r[%s%s] %3d%% %s / %s ", std::string(fill, '#').c_str(),
                 std::string(width - fill, '.').c_str(), static_cast<int>(f * 100),
                 FormatBytes(done).c_str(), FormatBytes(total_).c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  void Done() {
    if (shown_) std::fprintf(stderr, "\r%*s\r", 80, "");
    shown_ = false;
  }

 private:
  uint64_t total_;
  bool on_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// Problems kept for printing; beyond this they are only counted, so a
// crafted file full of bad headers cannot make the report unbounded.
constexpr uint64_t kMaxProblemRows = 10000;

struct Scan {
  std::vector<Row> rows;  // records and problems, in file order
  uint64_t segments = 0, file_bytes = 0, allocated_bytes = 0, max_sequence = 0;
  uint64_t problem_rows = 0;
  std::map<State, uint64_t> omitted;  // problems counted but not kept
  bool unreadable = false;

  void Add(Row&& r) {
    if (r.state != State::kLive && r.state != State::kErased) {
      if (problem_rows >= kMaxProblemRows) {
        omitted[r.state]++;
        return;
      }
      ++problem_rows;
    }
    rows.push_back(std::move(r));
  }
};

State FromScan(ScanState s) {
  switch (s) {
    case ScanState::kLive: return State::kLive;
    case ScanState::kErased: return State::kErased;
    case ScanState::kCorrupt: return State::kCorrupt;
    case ScanState::kTorn: return State::kTorn;
    case ScanState::kFreed: return State::kFreed;
    case ScanState::kUnreadable: return State::kUnreadable;
  }
  return State::kUnreadable;
}

// Walks one segment with the scanner recovery uses (tiers/segment_scan.h);
// appends its records and problems to `scan`.
void ScanOneSegment(FileIo& io, const std::string& dir, const std::string& name, uint32_t id,
                    const ManifestEntry* expected, Scan& scan, Progress& progress, uint64_t& done_before) {
  auto problem = [&](std::string msg) {
    Row r;
    r.segment = name;
    r.state = State::kUnreadable;
    r.message = std::move(msg);
    scan.Add(std::move(r));
    scan.unreadable = true;
  };
  // Never open what is not a plain file: a FIFO would block, a symlink may
  // point anywhere (FileIo refuses those too).
  struct stat lst;
  if (::lstat((dir + "/" + name).c_str(), &lst) != 0 || !S_ISREG(lst.st_mode)) {
    problem("not a regular file (a symlink, directory or device)");
    return;
  }
  OpenOptions opts;
  opts.write = false;
  opts.try_direct = false;
  auto f = io.Open(dir + "/" + name, opts);
  if (!f.ok()) {
    problem(f.status().ToString());
    return;
  }
  FileHandle file = std::move(*f);
  auto size_or = io.FileSize(file);
  if (!size_or.ok()) {
    problem(size_or.status().ToString());
    (void)io.Close(file);
    return;
  }
  const uint64_t size = *size_or;
  ++scan.segments;
  scan.file_bytes += size;
  if (auto a = io.AllocatedBytes(file); a.ok()) scan.allocated_bytes += *a;
  SegmentTally tally;
  tally.file_size = size;
  Status st = ScanSegment(
      io, file, size, id,
      [&](ScanItem&& it) {
        if (expected && it.state != ScanState::kUnreadable && it.offset < expected->committed_end) {
          ++tally.headers_below;
        }
        Row r;
        r.segment = name;
        r.offset = it.offset;
        r.length = it.length;
        r.state = FromScan(it.state);
        r.has_header = it.has_header;
        r.header = it.header;
        r.key = std::move(it.key);
        r.message = std::move(it.message);
        if (r.state == State::kLive) scan.max_sequence = std::max(scan.max_sequence, r.header.sequence);
        scan.Add(std::move(r));
      },
      [&](uint64_t pos) { progress.Update(done_before + pos); });
  if (!st.ok()) scan.unreadable = true;
  if (st.ok() && expected) {
    if (std::string lost = CheckSegment(*expected, tally); !lost.empty()) {
      Row r;
      r.segment = name;
      r.offset = std::min(size, expected->committed_end);
      r.state = State::kMissing;
      r.message = std::move(lost);
      scan.Add(std::move(r));
    }
  }
  done_before += size;
  (void)io.Close(file);
}

nlohmann::json RowJson(const Row& r) {
  nlohmann::json j = {{"segment", r.segment}, {"offset", r.offset}, {"length", r.length},
                      {"state", StateName(r.state)}};
  if (r.has_header) {
    j["key"] = EscapeKey(r.key);
    j["key_bytes"] = r.key.size();
    j["sequence"] = r.header.sequence;
    j["codec"] = r.header.codec <= 2 ? CodecKindName(static_cast<CodecKind>(r.header.codec)) : "?";
    j["raw_bytes"] = r.header.raw_size;
    j["stored_bytes"] = r.header.stored_size;
    j["buffers"] = r.header.num_buffers;
  }
  if (!r.message.empty()) j["message"] = r.message;
  return j;
}

int RunInspect(const InspectArgs& a) {
  // The directory as printed: it may come from a ${VAR} holding any byte.
  const std::string shown_dir = EscapeControlBytes(a.dir);
  struct stat st;
  if (::stat(a.dir.c_str(), &st) != 0) {
    std::fprintf(stderr, "spillway inspect: cannot access '%s': %s\n", shown_dir.c_str(), std::strerror(errno));
    return 2;
  }
  if (!S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "spillway inspect: '%s' is not a directory\n", shown_dir.c_str());
    return 2;
  }
  auto io = MakePosixFileIo();
  auto names = io->ListDir(a.dir);
  if (!names.ok()) {
    std::fprintf(stderr, "spillway inspect: %s\n", EscapeControlBytes(names.status().ToString()).c_str());
    return 2;
  }
  std::vector<std::string> segs;
  uint64_t total = 0;
  for (const std::string& n : *names) {
    uint32_t id;
    if (!Segment::ParseFileName(n, &id)) continue;
    segs.push_back(n);
    struct stat s;
    if (::lstat((a.dir + "/" + n).c_str(), &s) == 0) total += static_cast<uint64_t>(s.st_size);
  }
  std::sort(segs.begin(), segs.end());
  // What the last Flush left, to tell records lost whole (none: a tier
  // written before manifests existed, or never flushed; nothing to check).
  Manifest manifest;
  std::string manifest_problem;
  bool manifest_unreadable = false;
  // A tier emptied by erases keeps its LOCK and MANIFEST and has no
  // segment: empty and clean, not a wrong path.
  bool tier_files = std::find(names->begin(), names->end(), kLockName) != names->end();
  if (auto m = ReadManifest(*io, a.dir); m.ok()) {
    manifest = std::move(*m);
    tier_files = true;
  } else if (m.status().code() == StatusCode::kCorruption) {
    manifest_problem = m.status().message();
  } else if (!m.status().IsNotFound()) {
    manifest_problem = m.status().ToString();
    manifest_unreadable = true;
  }
  if (!manifest_problem.empty()) tier_files = true;
  const bool no_tier = segs.empty() && !tier_files;

  Scan scan;
  if (!manifest_problem.empty()) {
    Row r;
    r.segment = kManifestName;
    r.state = manifest_unreadable ? State::kUnreadable : State::kCorrupt;
    r.message = manifest_problem;
    scan.Add(std::move(r));
    scan.unreadable = scan.unreadable || manifest_unreadable;
  }
  {
    Progress progress(total, a.progress);
    uint64_t done = 0;
    for (const std::string& n : segs) {
      uint32_t id = 0;
      Segment::ParseFileName(n, &id);
      auto listed = manifest.find(id);
      ScanOneSegment(*io, a.dir, n, id, listed == manifest.end() ? nullptr : &listed->second, scan, progress,
                     done);
    }
  }

  // Newest valid record of each key is live; older ones are stale.
  std::unordered_map<std::string, size_t> newest;
  for (size_t i = 0; i < scan.rows.size(); ++i) {
    Row& r = scan.rows[i];
    if (r.state != State::kLive) continue;
    auto [it, fresh] = newest.emplace(r.key, i);
    if (fresh) continue;
    Row& other = scan.rows[it->second];
    if (r.header.sequence > other.header.sequence) {
      other.state = State::kStale;
      it->second = i;
    } else {
      r.state = State::kStale;
    }
  }
  std::map<State, uint64_t> count = scan.omitted;
  uint64_t omitted = 0;
  for (auto& [state, n] : scan.omitted) omitted += n;
  uint64_t live_bytes = 0, raw_bytes = 0;
  for (const Row& r : scan.rows) {
    count[r.state]++;
    if (r.state == State::kLive) {
      live_bytes += r.length;
      raw_bytes += r.header.raw_size;
    }
  }
  const uint64_t records = count[State::kLive] + count[State::kStale] + count[State::kErased];
  const bool corrupt = count[State::kCorrupt] + count[State::kMissing] > 0;
  const bool damaged = count[State::kTorn] + count[State::kFreed] > 0;
  // A directory holding no segment, LOCK or MANIFEST is no tier: most likely a wrong path.
  const int rc = scan.unreadable || no_tier ? 2 : (corrupt || (a.strict && damaged)) ? 1 : 0;
  const char* verdict = no_tier ? "NO TIER (no segment files)" : scan.unreadable ? "UNREADABLE"
                        : count[State::kCorrupt] > 0 ? "CORRUPT"
                        : count[State::kMissing] > 0 ? "RECORDS MISSING" : damaged ? "clean (with torn or freed records)"
                        : segs.empty() ? "clean (empty tier)" : "clean";

  if (a.json) {
    nlohmann::json j;
    j["dir"] = a.dir;
    if (!a.summary) {
      j["records"] = nlohmann::json::array();
      for (const Row& r : scan.rows) {
        if (r.state == State::kLive || r.state == State::kStale || r.state == State::kErased) {
          j["records"].push_back(RowJson(r));
        }
      }
    }
    j["problems"] = nlohmann::json::array();
    for (const Row& r : scan.rows) {
      if (r.state > State::kErased) j["problems"].push_back(RowJson(r));
    }
    j["totals"] = {{"segments", scan.segments},
                   {"file_bytes", scan.file_bytes},
                   {"allocated_bytes", scan.allocated_bytes},
                   {"records", records},
                   {"live", count[State::kLive]},
                   {"stale", count[State::kStale]},
                   {"erased", count[State::kErased]},
                   {"keys", newest.size()},
                   {"live_bytes", live_bytes},
                   {"raw_bytes", raw_bytes},
                   {"max_sequence", scan.max_sequence},
                   {"corrupt", count[State::kCorrupt]},
                   {"torn", count[State::kTorn]},
                   {"freed", count[State::kFreed]},
                   {"missing", count[State::kMissing]},
                   {"unreadable", count[State::kUnreadable]}};
    j["problems_omitted"] = omitted;
    j["ok"] = rc == 0;  // the verdict of every --json output (docs/cli.md)
    j["exit"] = rc;
    std::printf("%s\n", j.dump(2).c_str());
    return rc;
  }

  if (no_tier) std::fprintf(stderr, "spillway inspect: no segment files (seg-XXXXXXXX.spw) in '%s'\n", shown_dir.c_str());
  if (!a.summary) {
    bool header = false;
    for (const Row& r : scan.rows) {
      if (r.state > State::kErased) continue;
      if (!header) {
        std::printf("%-16s %10s %10s  %-12s %-5s %-14s %-5s %s\n", "segment", "offset", "length", "sequence", "codec",
                    "raw bytes", "state", "key");
        header = true;
      }
      std::printf("%s %10llu %10llu  seq %-8llu %-5s raw %-10llu %-5s \"%s\"\n", r.segment.c_str(),
                  static_cast<unsigned long long>(r.offset), static_cast<unsigned long long>(r.length),
                  static_cast<unsigned long long>(r.header.sequence),
                  r.header.codec <= 2 ? CodecKindName(static_cast<CodecKind>(r.header.codec)) : "?",
                  static_cast<unsigned long long>(r.header.raw_size), StateName(r.state), EscapeKey(r.key).c_str());
    }
  }
  bool any_problem = false;
  for (const Row& r : scan.rows) {
    if (r.state <= State::kErased) continue;
    if (r.state == State::kFreed && !a.strict) continue;  // normal after Erase: counted only
    if (!any_problem) std::printf("problems:\n");
    any_problem = true;
    std::printf("  %s/%s offset %llu: %s: %s%s\n", shown_dir.c_str(), EscapeControlBytes(r.segment).c_str(),
                static_cast<unsigned long long>(r.offset), StateName(r.state), EscapeControlBytes(r.message).c_str(),
                r.key.empty() ? "" : (" (key \"" + EscapeKey(r.key) + "\")").c_str());
  }
  if (omitted > 0) std::printf("  ... and %llu more problems\n", static_cast<unsigned long long>(omitted));
  std::printf("totals: %llu segments, %s on disk (%s allocated); %llu records (%llu live, %llu stale, %llu erased) "
              "for %zu keys, %s live (%s raw)\n",
              static_cast<unsigned long long>(scan.segments), FormatBytes(scan.file_bytes).c_str(),
              FormatBytes(scan.allocated_bytes).c_str(), static_cast<unsigned long long>(records),
              static_cast<unsigned long long>(count[State::kLive]), static_cast<unsigned long long>(count[State::kStale]),
              static_cast<unsigned long long>(count[State::kErased]), newest.size(), FormatBytes(live_bytes).c_str(), FormatBytes(raw_bytes).c_str());
  std::printf("        corrupt %llu, torn %llu, freed %llu, missing %llu, unreadable %llu: %s\n",
              static_cast<unsigned long long>(count[State::kCorrupt]),
              static_cast<unsigned long long>(count[State::kTorn]),
              static_cast<unsigned long long>(count[State::kFreed]),
              static_cast<unsigned long long>(count[State::kMissing]),
              static_cast<unsigned long long>(count[State::kUnreadable]), verdict);
  return rc;
}

void Register(CLI::App& root, int& exit_code) {
  auto a = std::make_shared<InspectArgs>();
  auto* cmd = root.add_subcommand("inspect", "List and verify every record of a persistent file tier directory (read-only)");
  cmd->add_option("dir", a->dir, "The tier directory holding seg-XXXXXXXX.spw files")->required();
  cmd->add_flag("--json", a->json, "Print one JSON object");
  cmd->add_flag("--summary", a->summary, "Print only problems and totals, not every record");
  cmd->add_flag("--strict", a->strict, "Exit 1 also for torn and freed records");
  cmd->add_flag("--progress,!--no-progress", a->progress, "Progress bar on a terminal for large tiers (default on)");
  cmd->callback([a, &exit_code] { exit_code = RunInspect(*a); });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
