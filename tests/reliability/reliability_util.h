// Helpers shared by the reliability tests: chains with persistent and
// fault-injected file tiers, and object contents checked by seed.
#pragma once

#include <doctest/doctest.h>
#include <dirent.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "spillway/engine.h"
#include "tiers/io/fault_file_io.h"
#include "spillway/file_io.h"
#include "tiers/record.h"
#include "tiers/segment.h"
#include "../engine/engine_test_util.h"
#include "test_util.h"

namespace spillway::testing {

// A file tier as engine tests build it, with small segments (several files,
// sealing exercised) and optionally persistent.
inline TierConfig RelFileTier(const std::string& name, const std::string& dir, uint64_t capacity,
                              bool persistent = false, CodecKind codec = CodecKind::kNone) {
  TierConfig t = FileTierConfig(name, dir, capacity, codec);
  t.persistent = persistent;
  t.io.segment_bytes = 4ull << 20;
  return t;
}

// host (host_cap) -> one file tier per entry of `file_caps` under root/f<i>.
inline Config RelChain(const std::string& root, uint64_t host_cap, std::vector<uint64_t> file_caps,
                       bool persistent = false, CodecKind codec = CodecKind::kNone) {
  Config c;
  c.source = "<reliability test>";
  if (host_cap > 0) c.tiers.push_back(HostTierConfig("host", host_cap));
  for (size_t i = 0; i < file_caps.size(); ++i) {
    c.tiers.push_back(RelFileTier("f" + std::to_string(i), root + "/f" + std::to_string(i), file_caps[i],
                                  persistent, codec));
  }
  return c;
}

// True when the handle holds exactly `want` (buffers concatenated).
inline bool SameBytes(const Handle& h, const std::vector<std::byte>& want) {
  if (h.size() != want.size()) return false;
  size_t off = 0;
  for (size_t i = 0; i < h.num_buffers(); ++i) {
    auto b = h.buffer(i);
    if (!b.empty() && std::memcmp(b.data(), want.data() + off, b.size()) != 0) return false;
    off += b.size();
  }
  return off == want.size();
}


// Segment files (seg-XXXXXXXX.spw) in `dir`, full paths, sorted.
inline std::vector<std::string> SegmentFiles(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto& ent : std::filesystem::directory_iterator(dir, ec)) {
    const std::string n = ent.path().filename().string();
    if (n.size() == 16 && n.rfind("seg-", 0) == 0 && n.substr(12) == ".spw") out.push_back(ent.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Every regular file below `root` (recursive), full paths.
inline std::vector<std::string> AllFiles(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(root, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    out.push_back(it->path().string());
  }
  return out;
}

// Copies the segment files of tier directory `from` into a new directory `to`
// (0700). Taken after a Flush while the engine is still open, it is the tier
// as a crash would leave it, whatever closing the engine does to the files.
// Holes (punched blocks) stay holes in the copy.
inline void CopySegments(const std::string& from, const std::string& to) {
  std::filesystem::create_directories(to);
  ::chmod(to.c_str(), 0700);
  for (const std::string& f : SegmentFiles(from)) {
    const int in = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    const int out = ::open((to + f.substr(f.rfind('/'))).c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE((in >= 0 && out >= 0));
    const off_t size = ::lseek(in, 0, SEEK_END);
    REQUIRE(::ftruncate(out, size) == 0);
    std::vector<char> buf(1 << 20);
    off_t pos = 0;
    while (pos < size) {
      off_t data = ::lseek(in, pos, SEEK_DATA);
      if (data < 0) break;  // only a hole is left
      off_t hole = ::lseek(in, data, SEEK_HOLE);
      if (hole < 0) hole = size;
      for (off_t p = data; p < hole;) {
        const ssize_t n = ::pread(in, buf.data(), std::min<off_t>(hole - p, static_cast<off_t>(buf.size())), p);
        REQUIRE(n > 0);
        REQUIRE(::pwrite(out, buf.data(), n, p) == n);
        p += n;
      }
      pos = hole;
    }
    ::close(in);
    ::close(out);
  }
}

// Runs the spillway CLI with `args` (shell words); stdout and exit status.
struct CliResult {
  int rc = -1;
  std::string out;
};
inline CliResult RunCli(const std::string& args) {
  CliResult r;
#ifdef SPILLWAY_CLI
  const std::string cmd = std::string(SPILLWAY_CLI) + " " + args + " 2>/dev/null";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
#endif
  return r;
}

// Sends this process's stderr to a file until Stop(), which returns what was written.
class StderrCapture {
 public:
  explicit StderrCapture(const std::string& path) : path_(path) {
    std::fflush(stderr);
    saved_ = ::dup(STDERR_FILENO);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ::dup2(fd, STDERR_FILENO);
    ::close(fd);
  }
  ~StderrCapture() { Stop(); }
  std::string Stop() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      ::dup2(saved_, STDERR_FILENO);
      ::close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct RecLoc {
  std::string file;
  uint64_t offset = 0;
  uint64_t length = 0;
  uint64_t sequence = 0;
};

// Valid records of every segment in `dir`, newest per key (a scan like
// recovery's; records marked erased are left out).
inline std::map<std::string, RecLoc> ScanRecords(const std::string& dir) {
  std::map<std::string, RecLoc> out;
  for (const std::string& path : SegmentFiles(dir)) {
    const std::string data = ReadFile(path);
    const auto* p = reinterpret_cast<const std::byte*>(data.data());
    uint32_t id = 0;
    Segment::ParseFileName(path.substr(path.rfind('/') + 1), &id);
    uint64_t pos = 0;
    while (pos + kRecordHeaderSize <= data.size()) {
      auto h = ParseRecordHeader(std::span<const std::byte>(p + pos, kRecordHeaderSize), RecordSeed(id, pos));
      if (h.ok() && RecordSize(*h) <= data.size() - pos) {
        const uint64_t len = RecordSize(*h);
        auto info = ParseRecord(std::span<const std::byte>(p + pos, len), RecordSeed(id, pos));
        if (info.ok() && !(h->flags & kFlagErased)) {
          RecLoc& r = out[std::string(info->key)];
          if (h->sequence >= r.sequence) r = RecLoc{path, pos, len, h->sequence};
          pos += len;
          continue;
        }
      }
      pos += kRecordAlign;
    }
  }
  return out;
}

}  // namespace spillway::testing
