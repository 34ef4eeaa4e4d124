// The benchmark harness behind `spillway bench` (tools/cmd_bench.cc parses the
// options and calls the sections): the options, the
// report every section appends to, and small utilities (timing, medians,
// running a reference tool, RSS, the progress bar, the test data pool).
//
// Every figure is a Row: a measured value, optionally a reference measured in
// the same run and the ratio of the two, and optionally a target that the
// ratio (or, without a reference, the value) must meet. A row whose figure
// could not be measured keeps a NaN value and says why in `note`; the report
// shows it as missing rather than leaving it out.
#pragma once

#include <chrono>
#include <cmath>
#include <ctime>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "spillway/config.h"

namespace spillway::bench {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr uint64_t kKiB = 1ull << 10;
inline constexpr uint64_t kMiB = 1ull << 20;
inline constexpr uint64_t kGiB = 1ull << 30;

struct Options {
  bool quick = false;
  bool json = false;
  std::string out = ".";
  std::string dir = "/var/tmp/spillway-bench";
  std::string machine;      // file name prefix; default: the host name
  std::string sections = "1,2,3,4,5,6";
  int reps = 0;             // 0: 3 (full) or 1 (quick)
  std::string python = "/usr/bin/python3";
  bool plots = true;
  // Hidden: run the memory probe in this (child) process and print JSON.
  std::string memory_probe;

  int Reps() const { return reps > 0 ? reps : (quick ? 1 : 3); }
  bool Runs(int section) const;
};

enum class Better : unsigned char { kHigher, kLower };

struct Row {
  std::string id;         // stable key, e.g. "spill.write.1MiB"
  int section = 0;
  std::string figure;     // "host -> file, 1 MiB objects"
  double value = kNaN;    // median over repetitions
  std::string unit;       // "GB/s", "ops/s", "us", "B/object", "%", "x"
  std::string reference;  // what the ratio compares with ("" when none)
  double ref_value = kNaN;
  double ratio = kNaN;    // median of per-repetition ratios value/reference
  double target = kNaN;   // compared with ratio, or with value when there is no reference
  Better better = Better::kHigher;
  std::string target_text;  // ">= 0.90x fio io_uring"
  std::string note;
  std::vector<double> samples;  // per repetition (value)
  std::string reference_command = std::string();  // the exact command that measured the reference (fio ...)
  bool skipped = false;         // not run on this machine (note says why)

  // "MET", "MISSED" or "" (no target); "NOT MEASURED" when the figure is NaN;
  // "SKIPPED" when the section cannot run here.
  std::string Verdict() const;
  double Compared() const { return reference.empty() ? value : ratio; }
};

// One line of one plot: (x, y) points.
struct Series {
  std::string plot;  // which panel
  std::string name;  // legend
  std::vector<std::pair<double, double>> points;
};

struct Report {
  std::string machine, date, command, started_at;
  bool quick = false;
  std::vector<Row> rows;
  std::vector<Series> series;
  std::vector<std::string> notes;  // shown under the table
  nlohmann::json details = nlohmann::json::object();  // raw per-repetition data

  Row& Add(Row r);
  Series& Line(const std::string& plot, const std::string& name);
  void Note(const std::string& text) { notes.push_back(text); }
};

// Wall-clock seconds since an arbitrary origin (steady clock).
inline double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// CPU seconds the calling thread has run (user and system).
inline double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

double Median(std::vector<double> v);  // NaN for empty; ignores NaN entries
double Max(const std::vector<double>& v);
// Least-squares slope of log(y) against log(x): the growth exponent.
double LogLogSlope(const std::vector<std::pair<double, double>>& xy);
// Quantile q (0..1) of `v` (sorted in place).
double Quantile(std::vector<double>& v, double q);

// Runs `command` through /bin/sh, returning its stdout and stderr together.
// `*exit_code` is the exit status (127: not found, -1: could not start).
std::string RunCapture(const std::string& command, int* exit_code);
// Single-quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s);
// True when `program` is on PATH (or is an executable path).
bool HaveProgram(const std::string& program);

// /proc/loadavg's first three fields ("12.41 12.05 11.87"): how busy the
// machine was, which the report states next to every absolute figure.
std::string LoadAverage();
// User + system CPU seconds this process and its waited-for children used.
double ProcessCpuSeconds();
// Host name, sanitized for a file name.
std::string MachineName();
// A line describing the CPU, memory and kernel for the report.
std::string MachineDescription();

// "4 KiB", "64 MiB": power-of-two sizes as the report names them.
std::string SizeName(uint64_t bytes);

// A terminal progress bar on stderr; silent when stderr is not a terminal.
class Progress {
 public:
  explicit Progress(double total_weight);
  ~Progress();
  // Starts a section worth `weight` of the total, made of `steps` steps.
  void Begin(const std::string& section, double weight, int steps);
  void Step(const std::string& what);
  void Finish();

 private:
  void Draw();
  bool tty_;
  double total_, done_ = 0, section_weight_ = 0;
  int steps_ = 1, step_ = 0;
  std::string section_, what_;
  double started_;
};

// Incompressible test data shared by the sections: `bytes` of SplitMix64
// output. Object i of size n is Slice(i, n): a 64-byte aligned window at an
// offset that differs per i, so every object's bytes are distinct and a
// misplaced object is caught by comparing with its source.
class DataPool {
 public:
  explicit DataPool(uint64_t bytes);
  std::span<const std::byte> Slice(uint64_t i, uint64_t n) const;
  uint64_t size() const { return data_.size(); }

 private:
  std::vector<std::byte> data_;
};

// A host tier named "host" of `capacity` bytes, plain malloc (not pinned).
TierConfig BenchHostTier(uint64_t capacity);

// A host -> file chain for the spill sections: host tier of `host_bytes`
// (not pinned), file tier in `dir` of `file_bytes` with `codec`, O_DIRECT,
// queue depth 32, io_uring (POSIX fallback logged by the engine).
Config SpillChain(const std::string& dir, uint64_t host_bytes, uint64_t file_bytes,
                  CodecKind codec = CodecKind::kNone);

// What the disk did during a spill (spill.cc's timing FileIo).
struct DiskTimeline {
  double busy_fraction = kNaN;        // of the wall time, some write in flight
  double idle_s = 0;                  // the rest
  uint64_t idle_gaps = 0;             // idle stretches between writes
  double inflight_mean_bytes = kNaN;  // while busy
};

// One spill run: Put `count` objects of `size` bytes (DataPool slices) into a
// fresh SpillChain(dir, host_bytes, ...), Flush, then (read_bytes > 0) read
// the oldest read_bytes of objects back from the file tier with 4 threads,
// comparing each with its source, and erase a sample of 64.
struct SpillRun {
  // raw bytes that reached the file tier (demoted, or placed there by a Put
  // that found the host tier full) / wall_s
  double write_bps = kNaN;
  double read_bps = kNaN;  // raw bytes served by the file tier / read_s
  double put_s = 0, flush_s = 0, wall_s = 0, read_s = 0, close_s = 0;
  uint64_t file_bytes = 0, file_objects = 0;          // file tier: raw bytes written, objects held
  uint64_t demoted_bytes = 0, demoted_objects = 0;    // the host -> file boundary's counters
  uint64_t sync_demotions = 0;
  // The Put thread from the first Put to the return of Flush: seconds its
  // Puts waited for the mover to make room (EngineStats::backpressure_wait_ns)
  // and seconds it ran on a CPU (ThreadCpuSeconds: CLOCK_THREAD_CPUTIME_ID).
  double put_wait_s = kNaN, put_cpu_s = kNaN;
  // The spill's time with no host -> file demotion batch queued or running.
  double batch_idle_s = kNaN;
  uint64_t read_objects = 0, file_hits = 0, bad = 0;
  // The process's CPU time during the 4 readers' read_s (getrusage: every
  // thread, the engine's and the readers' comparisons with their sources
  // alike), user and kernel, and its minor page faults.
  double read_user_s = kNaN, read_sys_s = kNaN;
  uint64_t read_minor_faults = 0;
  // The same read-back by one thread, over other spilled objects.
  double single_read_bps = kNaN, single_read_s = 0;
  uint64_t single_read_objects = 0;
  // Of single_read_s, the seconds inside the file tier's I/O calls (the rest
  // is the engine's own work: index, checksum, copy into the object's memory),
  // and of those the seconds the tier spent on requests that had arrived
  // (a streamed read checks and copies each piece inside the call).
  double single_read_io_s = 0, single_read_verify_in_io_s = 0;
  // Between the single reader's Gets (not timed as theirs), `pread` of the
  // same number of bytes from the file tier's own segment files, at random
  // offsets aligned to the read size (the object's size, 1 MiB for larger
  // objects: fio psync's pattern): a reference read in the same seconds as
  // the Gets, which a disk that drifts between runs cannot skew.
  // bytes / single_raw_s; NaN when the segment files could not be read.
  double single_raw_bps = kNaN, single_raw_s = 0;
  // After each of those reads (not in single_raw_s): reading one byte of
  // every 64-byte line of the block just read, the least any consumer of
  // the bytes pays (a Get's checksum is the first to read them). Seconds.
  double single_touch_s = kNaN;
  // One thread, kReaders keys per Acquire (one submission of their records):
  // bytes served / time inside Acquire. NaN where too few objects were left.
  double batch_read_bps = kNaN;
  uint64_t batch_read_objects = 0;
  // Where the time went, from a timing FileIo wrapper.
  std::string io_engine;
  double io_write_s = 0, io_read_s = 0, io_allocate_s = 0, io_sync_s = 0;  // summed over threads
  uint64_t io_write_batches = 0, io_written_bytes = 0;
  DiskTimeline disk;  // first Put to the return of Flush
  double erase_p50_us = kNaN, erase_punch_s = 0;  // Erase of spilled objects (a sample of 64)
  uint64_t erase_punches = 0;
  std::string error;  // empty when every step worked and every byte matched
};
// Spills `count` objects of `size`, then `readers` threads read back up to
// `read_bytes` of the oldest objects and one thread up to `single_read_bytes`
// of the next ones (0: skip).
SpillRun SpillObjects(const std::string& dir, const DataPool& pool, uint64_t size, uint64_t count,
                      uint64_t host_bytes, uint64_t read_bytes, uint64_t single_read_bytes = 0);

// Sections. Each appends rows, series and notes to `report`.
struct Context {
  const Options& options;
  Report& report;
  Progress& progress;
  const DataPool& pool;
  std::string source_dir;  // where bench/zict_peer.py was found ("" when not)
};
void RunSpillSection(Context& ctx);     // 1 (and the peer of 5, interleaved)
void RunCodecSection(Context& ctx);     // 2
void RunSmallSection(Context& ctx);     // 3
void RunScalingSection(Context& ctx);   // 4
void RunGpuSection(Context& ctx);       // 6
// The memory probe (section 3's bytes per object) in a child process.
int RunMemoryProbe(const std::string& spec);

// Output: the table on stdout, <machine>-<date>.{md,json,png} in options.out.
std::string FormatTable(const Report& report);
std::string FormatMarkdown(const Report& report);
nlohmann::json ToJson(const Report& report);
// Draws the PNG with gnuplot; returns "" or why no plot was drawn.
std::string DrawPlots(const Report& report, const std::string& png_path);

}  // namespace spillway::bench
