// MetricsDumper: a thread that renders the engine's statistics as Prometheus
// text and replaces a file atomically (temp file + rename).
//
// Like the event log, this is a diagnostic file outside the tiers, written
// through FileIo's AppendFile and Rename (WriteFileAtomic), which fault
// injection on tier I/O leaves alone.
#include "engine/metrics_dumper.h"


#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>

#include "engine/stats_export.h"

namespace spillway {
namespace {

// ".<base>.<random>.tmp" next to `path`: a name nobody can prepare a hard
// link or symlink at in advance (created with O_EXCL as well, mkstemp-style).
std::string TempPathFor(const std::string& path, uint64_t nonce) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(nonce));
  return dir + "." + base + "." + hex + ".tmp";
}

// Attempts at a fresh name before giving up (each collision is 2^-64 unless
// someone is racing us with the same names, which they cannot predict).
constexpr int kTempAttempts = 8;

}  // namespace

FileIo* PosixForDiagnostics() {
  static FileIo* const posix = MakePosixFileIo().release();  // for callers without a FileIo
  return posix;
}

MetricsDumper::MetricsDumper(std::function<EngineStats()> snapshot, std::string path, double interval_s,
                             FileIo* io, Logger* logger)
    : snapshot_(std::move(snapshot)),
      path_(std::move(path)),
      interval_s_(std::isfinite(interval_s) ? interval_s : 0.0),
      io_(io != nullptr ? io : PosixForDiagnostics()),
      logger_(logger != nullptr ? logger : io_->logger()) {
  if (interval_s_ > 0) thread_ = std::thread([this] { Loop(); });
}

MetricsDumper::~MetricsDumper() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

Status MetricsDumper::last_status() const {
  std::lock_guard<std::mutex> l(mu_);
  return last_status_;
}

void MetricsDumper::Loop() {
  using Clock = std::chrono::steady_clock;
  const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_s_));
  auto next = Clock::now() + period;
  std::unique_lock<std::mutex> l(mu_);
  while (!stop_) {
    if (cv_.wait_until(l, next, [this] { return stop_; })) break;
    l.unlock();
    (void)DumpNow();  // the outcome is kept in last_status_
    l.lock();
    // Fixed schedule without drift; a dump slower than the period does not queue up more.
    next += period;
    const auto now = Clock::now();
    if (next <= now) next = now + period;
  }
}

Status MetricsDumper::DumpNow() {
  Status st;
  {
    std::lock_guard<std::mutex> d(dump_mu_);
    st = WriteFile(StatsToPrometheus(snapshot_()));
  }
  if (st.ok()) {
    dumps_.fetch_add(1, std::memory_order_relaxed);
  } else {
    failures_.fetch_add(1, std::memory_order_relaxed);
  }
  bool report = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    last_status_ = st;
    if (!st.ok() && !reported_) report = reported_ = true;
    if (st.ok()) reported_ = false;  // report again if it breaks again later
  }
  if (report) logger_->Log(LogLevel::kWarning, "metrics dump: " + st.ToString());
  return st;
}

Status MetricsDumper::WriteFile(const std::string& text) {
  AppendOptions o;
  o.exclusive = true;
  o.mode = 0644;  // the collector may run as another user
  Status st;
  std::random_device random;  // getrandom(2): names an observer of earlier ones cannot predict
  for (int attempt = 0; attempt < kTempAttempts; ++attempt) {
    const std::string tmp = TempPathFor(path_, (uint64_t{random()} << 32) | random());
    // Exclusive create fails before writing anything when the name is taken,
    // and WriteFileAtomic then removes nothing of anyone else's.
    st = WriteFileAtomic(*io_, path_, tmp, text, o);
    if (st.ok() || st.message().find("File exists") == std::string::npos) return st;
  }
  return st;
}

}  // namespace spillway
