// The wall-time bound of `spillway stress --seconds S`. S bounds the run from the command's start: open, clearing an
// earlier run's keys, the workload, the final flush and the final
// verification. The workload stops early enough to leave room for the rest,
// estimated from what the run measured (the slowest Flush; the mean Get
// times the objects stored; for the close, the mean Erase of a file-tier
// object times the objects stored, plus the open); the verification stops at
// the bound and reports the keys it did not reach as "unverified" (never as
// lost).
//
// Outside the bound, and printed on their own: the engine's close, which
// frees every object (a hole punched per file-tier record: on a busy disk it
// can take longer than the estimate reserves, and it cannot be cut short),
// with --reopen the reopen and its verification, and process start-up and exit.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace spillway::cli {

class StressBudget {
 public:
  using Clock = std::chrono::steady_clock;

  // seconds <= 0: no bound (an --ops run); the phases are still timed.
  explicit StressBudget(double seconds)
      : seconds_(seconds), start_(Clock::now()), last_mark_(start_),
        end_(start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}

  bool bounded() const { return seconds_ > 0; }
  double limit_seconds() const { return seconds_; }
  Clock::time_point start() const { return start_; }

  // Before each workload operation: true once the time left is what the
  // final phases are expected to need.
  bool WorkloadOver() const { return bounded() && Clock::now() + Reserve() >= end_; }
  // True once the verification must stop: the bound less a margin for the
  // Get in flight on each thread (3% of the bound, at least 50 ms). A single operation slower than that
  // is the most the run can overshoot by.
  bool Expired() const {
    const auto margin = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(std::max(0.05, 0.03 * seconds_)));
    return bounded() && Clock::now() + margin >= end_;
  }

  // What the estimate of the final phases learns from the workload.
  void RecordGet(uint64_t ns) {
    get_ns_.fetch_add(ns, std::memory_order_relaxed);
    gets_.fetch_add(1, std::memory_order_relaxed);
  }
  void RecordErase(uint64_t ns) {
    erase_ns_.fetch_add(ns, std::memory_order_relaxed);
    erases_.fetch_add(1, std::memory_order_relaxed);
  }
  // Objects stored now (a Put of an absent key: +1, an Erase: -1).
  void AddStored(int64_t n) { stored_.fetch_add(n, std::memory_order_relaxed); }
  void RecordFlush(uint64_t ns) {
    uint64_t m = max_flush_ns_.load(std::memory_order_relaxed);
    while (ns > m && !max_flush_ns_.compare_exchange_weak(m, ns, std::memory_order_relaxed)) {
    }
  }
  // Whether the final pass reads every stored object, and with how many threads.
  void SetVerification(bool verify, int threads) {
    verify_ = verify;
    verify_threads_ = std::max(1, threads);
  }

  // Ends the current phase under `name` (phases are consecutive from
  // start()); `inside`: the phase counts against the bound.
  void Mark(std::string name, bool inside = true) {
    const Clock::time_point now = Clock::now();
    const double s = std::chrono::duration<double>(now - last_mark_).count();
    phases_.emplace_back(std::move(name), s);
    (inside ? bounded_s_ : outside_s_) += s;
    if (!inside) outside_names_.push_back(phases_.back().first);
    last_mark_ = now;
  }
  // Seconds spent in the phases inside the bound / after it.
  double bounded_seconds() const { return bounded_s_; }
  double outside_seconds() const { return outside_s_; }
  const std::vector<std::pair<std::string, double>>& phases() const { return phases_; }
  double PhaseSeconds(const std::string& name) const {
    for (const auto& [n, s] : phases_) {
      if (n == name) return s;
    }
    return 0;
  }
  double Elapsed() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  // "open 0.12 s, workload 17.80 s, ... = 19.90 s (--seconds 20.00); then
  // close 1.20 s" for the text report.
  std::string Describe() const {
    std::string in, after;
    char buf[96];
    for (const auto& [n, s] : phases_) {
      const bool outside = std::find(outside_names_.begin(), outside_names_.end(), n) != outside_names_.end();
      std::string& out = outside ? after : in;
      std::snprintf(buf, sizeof buf, "%s%s %.2f s", out.empty() ? "" : ", ", n.c_str(), s);
      out += buf;
    }
    std::snprintf(buf, sizeof buf, " = %.2f s", bounded_s_);
    in += buf;
    if (bounded()) {
      std::snprintf(buf, sizeof buf, " (--seconds %.2f)", seconds_);
      in += buf;
    }
    if (!after.empty()) in += (bounded() ? "; after the bound: " : "; then ") + after;
    return in;
  }

 private:
  // 1.5 x (two Flushes: one a worker may have started, plus the final one;
  // the verification: a mean Get per stored object, spread over the
  // threads; the close: a mean Erase per stored object, plus as long as the
  // open took), at most 90% of the bound so that some workload always runs.
  Clock::duration Reserve() const {
    auto mean = [](const std::atomic<uint64_t>& ns, const std::atomic<uint64_t>& n) {
      const uint64_t k = n.load(std::memory_order_relaxed);
      return k ? static_cast<double>(ns.load(std::memory_order_relaxed)) / static_cast<double>(k) : 0.0;
    };
    const double stored = static_cast<double>(std::max<int64_t>(0, stored_.load(std::memory_order_relaxed)));
    const double open_ns = phases_.empty() ? 0 : phases_.front().second * 1e9;
    const double verify_ns = verify_ ? mean(get_ns_, gets_) * stored / verify_threads_ : 0;
    const double close_ns = mean(erase_ns_, erases_) * stored + open_ns;
    const double ns =
        1.5 * (2.0 * static_cast<double>(max_flush_ns_.load(std::memory_order_relaxed)) + verify_ns + close_ns);
    const double cap = seconds_ * 0.9e9;
    return std::chrono::nanoseconds(static_cast<int64_t>(std::min(ns, cap)));
  }

  const double seconds_;
  const Clock::time_point start_;
  Clock::time_point last_mark_;
  const Clock::time_point end_;
  std::vector<std::pair<std::string, double>> phases_;  // written by the main thread before/after the workers
  std::vector<std::string> outside_names_;
  double bounded_s_ = 0, outside_s_ = 0;
  std::atomic<uint64_t> get_ns_{0}, gets_{0}, erase_ns_{0}, erases_{0}, max_flush_ns_{0};
  std::atomic<int64_t> stored_{0};
  bool verify_ = true;
  int verify_threads_ = 1;
};

}  // namespace spillway::cli
