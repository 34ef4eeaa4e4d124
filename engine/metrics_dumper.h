// MetricsDumper: writes StatsToPrometheus(snapshot()) to a file every
// `interval_s` seconds, for the node_exporter textfile collector
// (metrics.prometheus_file, metrics.dump_interval_s in the YAML).
//
// Each dump goes to a hidden temporary file in the same directory
// (".<name>.<random>.tmp", created exclusively, which the collector
// ignores) and is renamed over
// `path`, so a reader sees either the previous or the next complete file.
// The file is mode 0644: the collector usually runs as another user.
//
// Thread-safety: DumpNow and the accessors may be called from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "spillway/file_io.h"
#include "spillway/stats.h"
#include "spillway/status.h"

namespace spillway {

class MetricsDumper {
 public:
  // Starts the background thread; the first periodic dump is one interval
  // after construction (call DumpNow for one at once). interval_s <= 0: no
  // thread, DumpNow only. `snapshot` must stay callable until the destructor
  // returns. The file is written through `io` (null: POSIX); failures go to
  // `logger` (null: io's logger); both must outlive the dumper.
  MetricsDumper(std::function<EngineStats()> snapshot, std::string path, double interval_s, FileIo* io = nullptr,
                Logger* logger = nullptr);
  // Stops and joins the thread (waking it at once); writes no final dump:
  // call DumpNow first for one with the last counters.
  ~MetricsDumper();
  MetricsDumper(const MetricsDumper&) = delete;
  MetricsDumper& operator=(const MetricsDumper&) = delete;

  // Takes a snapshot and replaces the file. Background failures are kept in
  // last_status() and reported once to the logger.
  Status DumpNow();

  const std::string& path() const { return path_; }
  uint64_t dumps() const { return dumps_.load(std::memory_order_relaxed); }        // files written
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }  // dumps that failed
  Status last_status() const;

 private:
  void Loop();
  Status WriteFile(const std::string& text);

  const std::function<EngineStats()> snapshot_;
  const std::string path_;
  const double interval_s_;
  FileIo* const io_;
  Logger* const logger_;

  std::mutex dump_mu_;  // one dump at a time

  mutable std::mutex mu_;  // guards stop_, last_status_, reported_
  std::condition_variable cv_;
  bool stop_ = false;
  Status last_status_;
  bool reported_ = false;

  std::atomic<uint64_t> dumps_{0}, failures_{0};
  std::thread thread_;
};

}  // namespace spillway
