// Utilities shared by the `spillway bench` sections (see common.h).
#include "bench/harness/common.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/pattern.h"

namespace spillway::bench {

bool Options::Runs(int section) const {
  std::stringstream ss(sections);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == std::to_string(section) || item == "all") return true;
  }
  return false;
}

std::string Row::Verdict() const {
  const double x = Compared();
  if (skipped) return "SKIPPED";
  if (std::isnan(value)) return "NOT MEASURED";
  if (std::isnan(target)) return "";
  if (std::isnan(x)) return "NOT MEASURED";
  const bool met = better == Better::kHigher ? x >= target : x <= target;
  return met ? "MET" : "MISSED";
}

Row& Report::Add(Row r) {
  rows.push_back(std::move(r));
  return rows.back();
}

Series& Report::Line(const std::string& plot, const std::string& name) {
  for (Series& s : series) {
    if (s.plot == plot && s.name == name) return s;
  }
  series.push_back(Series{plot, name, {}});
  return series.back();
}

double Median(std::vector<double> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](double x) { return std::isnan(x); }), v.end());
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Max(const std::vector<double>& v) {
  double m = kNaN;
  for (double x : v) {
    if (!std::isnan(x) && (std::isnan(m) || x > m)) m = x;
  }
  return m;
}

double Quantile(std::vector<double>& v, double q) {
  if (v.empty()) return kNaN;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

double LogLogSlope(const std::vector<std::pair<double, double>>& xy) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int n = 0;
  for (auto [x, y] : xy) {
    if (!(x > 0) || !(y > 0)) continue;
    const double lx = std::log(x), ly = std::log(y);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
    ++n;
  }
  if (n < 2) return kNaN;
  const double d = n * sxx - sx * sx;
  return d == 0 ? kNaN : (n * sxy - sx * sy) / d;
}

std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

std::string RunCapture(const std::string& command, int* exit_code) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) {
    *exit_code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  *exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

bool HaveProgram(const std::string& program) {
  int rc = 0;
  RunCapture("command -v " + ShellQuote(program) + " >/dev/null", &rc);
  return rc == 0;
}

std::string LoadAverage() {
  std::ifstream f("/proc/loadavg");
  std::string a, b, c;
  f >> a >> b >> c;
  return a + " " + b + " " + c;
}

double ProcessCpuSeconds() {
  double total = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    struct rusage ru {};
    ::getrusage(who, &ru);
    total += ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  }
  return total;
}

std::string MachineName() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0 || host[0] == '\0') return "machine";
  std::string s;
  for (const char* p = host; *p && *p != '.'; ++p) {
    const char c = *p;
    s += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '-';
  }
  return s.empty() ? "machine" : s;
}

std::string MachineDescription() {
  std::string cpu = "unknown CPU";
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  uint64_t mem_kib = 0;
  std::ifstream m("/proc/meminfo");
  for (std::string line; std::getline(m, line);) {
    if (line.rfind("MemTotal:", 0) == 0) mem_kib = std::strtoull(line.c_str() + 9, nullptr, 10);
  }
  struct utsname u {};
  ::uname(&u);
  char buf[512];
  std::snprintf(buf, sizeof(buf), "%s, %ld cores online, %.1f GiB memory, Linux %s", cpu.c_str(),
                ::sysconf(_SC_NPROCESSORS_ONLN), mem_kib / 1048576.0, u.release);
  return buf;
}

std::string SizeName(uint64_t bytes) {
  char buf[32];
  if (bytes >= kGiB && bytes % kGiB == 0) std::snprintf(buf, sizeof(buf), "%llu GiB", (unsigned long long)(bytes / kGiB));
  else if (bytes >= kMiB && bytes % kMiB == 0) std::snprintf(buf, sizeof(buf), "%llu MiB", (unsigned long long)(bytes / kMiB));
  else if (bytes >= kKiB && bytes % kKiB == 0) std::snprintf(buf, sizeof(buf), "%llu KiB", (unsigned long long)(bytes / kKiB));
  else std::snprintf(buf, sizeof(buf), "%llu B", (unsigned long long)bytes);
  return buf;
}

Progress::Progress(double total_weight) : tty_(::isatty(2) != 0), total_(total_weight), started_(Now()) {}

Progress::~Progress() { Finish(); }

void Progress::Begin(const std::string& section, double weight, int steps) {
  done_ += section_weight_;  // whatever the last section left undone
  section_ = section;
  section_weight_ = weight;
  steps_ = std::max(1, steps);
  step_ = 0;
  what_.clear();
  Draw();
}

void Progress::Step(const std::string& what) {
  if (step_ < steps_) ++step_;
  what_ = what;
  Draw();
}

void Progress::Finish() {
  if (!tty_ || total_ <= 0) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  total_ = 0;
}

void Progress::Draw() {
  if (!tty_ || total_ <= 0) return;
  const double frac = std::clamp((done_ + section_weight_ * step_ / steps_) / total_, 0.0, 1.0);
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(frac * kWidth + 0.5);
  std::string bar(filled, '#');
  bar += std::string(kWidth - filled, '.');
  std::fprintf(stderr, "\r\033[K[%s] %3.0f%% %5.0fs  %s: %s", bar.c_str(), frac * 100, Now() - started_,
               section_.c_str(), what_.substr(0, 50).c_str());
  std::fflush(stderr);
}

DataPool::DataPool(uint64_t bytes) : data_(bytes) {
  uint64_t x = 0x5eed5eed5eedull;
  for (size_t i = 0; i + 8 <= data_.size(); i += 8) {
    const uint64_t w = SplitMix64(x);
    std::memcpy(data_.data() + i, &w, 8);
  }
}

std::span<const std::byte> DataPool::Slice(uint64_t i, uint64_t n) const {
  const uint64_t span = data_.size() > n ? data_.size() - n : 0;
  // 7919 * 64 is odd times 64: consecutive objects start far apart.
  const uint64_t off = span ? (i * 7919 * 64) % (span + 1) / 64 * 64 : 0;
  return {data_.data() + off, static_cast<size_t>(std::min<uint64_t>(n, data_.size()))};
}

TierConfig BenchHostTier(uint64_t capacity) {
  TierConfig host;
  host.name = "host";
  host.kind = TierKind::kHost;
  host.capacity_bytes = capacity;
  host.capacity_text = std::to_string(capacity);
  host.pinned = false;
  return host;
}

Config SpillChain(const std::string& dir, uint64_t host_bytes, uint64_t file_bytes, CodecKind codec) {
  Config c;
  c.source = "<spillway bench>";
  TierConfig host = BenchHostTier(host_bytes);
  TierConfig file;
  file.name = "file";
  file.kind = TierKind::kFile;
  file.capacity_bytes = file_bytes;
  file.capacity_text = std::to_string(file_bytes);
  file.medium = Medium::kSsd;
  file.paths = {dir};
  file.codec.kind = codec;
  file.codec.level = DefaultCodecLevel(codec);
  file.io.direct = true;
  file.io.queue_depth = 32;
  c.tiers.push_back(std::move(host));
  c.tiers.push_back(std::move(file));
  // Reading back measures file -> host only: a promotion would make the host
  // tier demote again and mix writes into the read figure.
  c.policy.promote_on_read = false;
  return c;
}

}  // namespace spillway::bench
