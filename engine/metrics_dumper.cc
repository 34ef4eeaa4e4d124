// MetricsDumper: a thread that renders the engine's statistics as Prometheus
// text and replaces a file atomically (temp file + rename).
//
// Like the event log, this is a diagnostic file outside the tiers, written
// with open(2)/write(2)/rename(2) directly: FileIo has no rename, and fault
// injection on tier I/O should not hit it.
#include "engine/metrics_dumper.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "engine/stats_export.h"

namespace spillway {
namespace {

// ".<base>.<pid>.tmp" next to `path`.
std::string TempPathFor(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  return dir + "." + base + "." + std::to_string(::getpid()) + ".tmp";
}

}  // namespace

MetricsDumper::MetricsDumper(std::function<EngineStats()> snapshot, std::string path, double interval_s)
    : snapshot_(std::move(snapshot)),
      path_(std::move(path)),
      tmp_path_(TempPathFor(path_)),
      interval_s_(std::isfinite(interval_s) ? interval_s : 0.0) {
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
  if (report) std::fprintf(stderr, "spillway: metrics dump: %s\n", st.ToString().c_str());
  return st;
}

Status MetricsDumper::WriteFile(const std::string& text) {
  const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return Status::FromErrno(errno, "creating " + tmp_path_);
  // The umask must not hide the file from the collector (another user).
  (void)::fchmod(fd, 0644);
  size_t off = 0;
  int err = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      break;
    }
    off += static_cast<size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(tmp_path_.c_str());
    return Status::FromErrno(err, "writing " + tmp_path_);
  }
  if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    err = errno;
    ::unlink(tmp_path_.c_str());
    return Status::FromErrno(err, "renaming " + tmp_path_ + " to " + path_);
  }
  return Status::OK();
}

}  // namespace spillway
