// EventLog: the spill event log, one JSON line per object moved between
// tiers (docs/observability.md "Event log"):
//
//   {"ts":"2024-05-01T12:00:00.123456Z","key_hash":"9f3b...","size":1048576,
//    "stored":524288,"from":"host","to":"disk","codec":"lz4","ratio":0.5,
//    "us":412,"direction":"down","outcome":"ok"}
//
// A failed move has "outcome":"failed" and an "error" field saying why.
//
// The key itself is never written: key_hash is the xxh3-64 of its bytes (hex),
// so a user can find a key's lines by hashing it. Sampling is by key (a
// sampled key has all its moves logged, so one object's path through the
// tiers can be followed); failed moves are logged whatever the sampling.
// Lines are rate limited by a token bucket (burst and rate: event_rate_limit
// lines per second); what the limit refuses is counted in dropped().
//
// Off costs nothing: Open returns null when no path is configured, and the
// engine's move paths test the pointer.
//
// Thread-safety: Record and the counters may be called from any thread.
// A line is one write(2) on an O_APPEND file, so lines never interleave.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "spillway/config.h"
#include "spillway/file_io.h"
#include "spillway/status.h"

namespace spillway {

// One object crossing a boundary. Views are only read during Record.
struct MoveEvent {
  std::string_view key;      // hashed, never logged
  uint64_t raw_bytes, stored_bytes;  // stored: after the destination's codec
  std::string_view from, to;  // tier names
  std::string_view codec;     // destination codec ("none", "lz4", "zstd")
  bool down;                  // demotion (true) or promotion
  uint64_t micros;            // time the move (or its batch) took
  bool ok;                    // false: the move was abandoned
  std::string_view error = {};  // why it was abandoned (Status::ToString()); "unspecified" when empty
};

class EventLog {
 public:
  // Monotonic nanoseconds; tests inject one to drive the rate limiter.
  using Clock = std::function<uint64_t()>;

  // Opens config.event_log for appending (created 0600; O_NOFOLLOW, so a
  // symlink is refused; it must be a regular file). Returns null (and OK)
  // when config.event_log is empty. InvalidArgument for a sample outside
  // 0..1 or a rate limit of 0; IOError/NotFound when the file cannot be opened.
  // The file is opened through `io` (null: POSIX), errors go to `logger`
  // (null: io's logger); `io` and `logger` must outlive the log.
  static StatusOr<std::unique_ptr<EventLog>> Open(const MetricsConfig& config, Clock clock = nullptr,
                                                  FileIo* io = nullptr, Logger* logger = nullptr);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  // Writes the event's line if sampling and the rate limit allow it. Never
  // fails: a line that cannot be written counts as dropped (the first write
  // error is reported once to the logger).
  void Record(const MoveEvent& event);

  uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  // Lines refused by the rate limit or lost to a write error.
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // Events left out by sampling (not counted in dropped()).
  uint64_t sampled_out() const { return sampled_out_.load(std::memory_order_relaxed); }
  const std::string& path() const { return path_; }

  // The line Record writes for `event` at wall time `unix_micros`, with its
  // trailing newline. Exposed for tests and tools.
  static std::string FormatLine(const MoveEvent& event, uint64_t unix_micros);
  // xxh3-64 of the key: the "key_hash" field and the sampling decision.
  static uint64_t KeyHash(std::string_view key);

 private:
  EventLog(std::unique_ptr<AppendFile> file, std::string path, double sample, uint32_t rate, Clock clock,
           Logger* logger);
  bool Sampled(const MoveEvent& event) const;
  bool TakeToken();

  const std::unique_ptr<AppendFile> file_;  // written under write_mu_
  Logger* const logger_;
  const std::string path_;
  const double sample_;
  const double rate_per_s_;
  const Clock clock_;

  std::mutex bucket_mu_;  // guards tokens_, last_ns_
  double tokens_;
  uint64_t last_ns_;

  std::mutex write_mu_;  // one line at a time, so a short write cannot split lines
  std::atomic<bool> reported_error_{false};
  std::atomic<uint64_t> written_{0}, dropped_{0}, sampled_out_{0};
};

}  // namespace spillway
