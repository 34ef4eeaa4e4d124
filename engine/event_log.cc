// EventLog: sampling, a token-bucket rate limit, and hand-written JSON lines
// (the line is flat and small; no JSON library on the move path).
//
// The log is an append-only diagnostic file, not tier data: it is a FileIo
// AppendFile, which FaultFileIo leaves alone, so fault injection on tier I/O
// does not also hit the log.
#include "engine/event_log.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "codecs/codec.h"

namespace spillway {
namespace {

uint64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

uint64_t UnixMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// A JSON string literal. Tier and codec names are ASCII (the validator
// allows letters, digits, '-', '_', '.'); any other byte is escaped as \u00XX
// so a line always parses.
void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

}  // namespace

uint64_t EventLog::KeyHash(std::string_view key) { return Checksum64(key.data(), key.size()); }

std::string EventLog::FormatLine(const MoveEvent& e, uint64_t unix_micros) {
  std::string out;
  out.reserve(256);
  const time_t secs = static_cast<time_t>(unix_micros / 1000000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  char ts[64];
  std::snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<unsigned>(unix_micros % 1000000));
  out += "{\"ts\":\"";
  out += ts;
  char hash[24];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(KeyHash(e.key)));
  out += "\",\"key_hash\":\"";
  out += hash;
  out += "\",\"size\":";
  AppendUint(out, e.raw_bytes);
  out += ",\"stored\":";
  AppendUint(out, e.stored_bytes);
  out += ",\"from\":";
  AppendJsonString(out, e.from);
  out += ",\"to\":";
  AppendJsonString(out, e.to);
  out += ",\"codec\":";
  AppendJsonString(out, e.codec);
  // stored / raw, as TierStats::compression_ratio: < 1 compresses.
  const double ratio = e.raw_bytes ? static_cast<double>(e.stored_bytes) / static_cast<double>(e.raw_bytes) : 1.0;
  char r[32];
  std::snprintf(r, sizeof(r), "%.4f", std::isfinite(ratio) ? ratio : 1.0);
  out += ",\"ratio\":";
  out += r;
  out += ",\"us\":";
  AppendUint(out, e.micros);
  out += e.down ? ",\"direction\":\"down\"" : ",\"direction\":\"up\"";
  if (e.ok) {
    out += ",\"outcome\":\"ok\"}\n";
  } else {
    out += ",\"outcome\":\"failed\",\"error\":";
    AppendJsonString(out, e.error.empty() ? std::string_view("unspecified") : e.error);
    out += "}\n";
  }
  return out;
}

StatusOr<std::unique_ptr<EventLog>> EventLog::Open(const MetricsConfig& config, Clock clock, FileIo* io,
                                                  Logger* logger) {
  if (config.event_log.empty()) return std::unique_ptr<EventLog>();
  if (!(config.event_sample >= 0.0 && config.event_sample <= 1.0)) {
    return Status::InvalidArgument("metrics.event_sample must be between 0 and 1, found " +
                                   std::to_string(config.event_sample));
  }
  if (config.event_rate_limit == 0) {
    return Status::InvalidArgument("metrics.event_rate_limit must be at least 1 line per second");
  }
  static FileIo* const posix = MakePosixFileIo().release();  // for callers without a FileIo
  if (io == nullptr) io = posix;
  auto file = io->NewAppendFile(config.event_log, AppendOptions{});
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kInvalidArgument) return Status::InvalidArgument("event log " + file.status().message());
    return file.status().WithContext("opening event log " + config.event_log);
  }
  return std::unique_ptr<EventLog>(new EventLog(std::move(*file), config.event_log, config.event_sample,
                                                config.event_rate_limit, std::move(clock),
                                                logger != nullptr ? logger : io->logger()));
}

EventLog::EventLog(std::unique_ptr<AppendFile> file, std::string path, double sample, uint32_t rate, Clock clock,
                   Logger* logger)
    : file_(std::move(file)),
      logger_(logger),
      path_(std::move(path)),
      sample_(sample),
      rate_per_s_(rate),
      clock_(clock ? std::move(clock) : Clock(SteadyNanos)),
      tokens_(rate),
      last_ns_(clock_()) {}

EventLog::~EventLog() = default;

bool EventLog::Sampled(const MoveEvent& e) const {
  if (!e.ok || sample_ >= 1.0) return true;
  if (sample_ <= 0.0) return false;
  // The top 53 bits of the key hash as a uniform fraction in [0, 1).
  return static_cast<double>(KeyHash(e.key) >> 11) * 0x1p-53 < sample_;
}

bool EventLog::TakeToken() {
  std::lock_guard<std::mutex> l(bucket_mu_);
  const uint64_t now = clock_();
  if (now > last_ns_) {
    tokens_ = std::min(rate_per_s_, tokens_ + static_cast<double>(now - last_ns_) * 1e-9 * rate_per_s_);
    last_ns_ = now;
  }
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

void EventLog::Record(const MoveEvent& e) {
  if (!Sampled(e)) {
    sampled_out_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!TakeToken()) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const std::string line = FormatLine(e, UnixMicros());
  Status st;
  {
    std::lock_guard<std::mutex> l(write_mu_);
    st = file_->Append(line);
  }
  if (st.ok()) {
    written_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  dropped_.fetch_add(1, std::memory_order_relaxed);
  if (!reported_error_.exchange(true)) {
    logger_->Log(LogLevel::kWarning,
                 "event log " + path_ + ": " + st.ToString() + " (further errors not reported)");
  }
}

}  // namespace spillway
