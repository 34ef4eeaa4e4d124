// FaultFileIo: a FileIoWrapper that makes reads, writes and syncs fail the
// way real disks do (EIO, ENOSPC, short and torn writes, latency), so tests
// and `spillway stress --faults SPEC` can check that nothing acknowledged is
// lost and no wrong byte is served. Faults fire by probability (a seeded
// std::mt19937_64: one thread issuing the same calls sees the same faults for
// the same seed) or by schedule (the Nth operation of a kind, or a window of
// them), and stop at once when switched off ("the fault clears").
//
// Thread-safety: every method may be called from any number of threads.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "spillway/file_io.h"

namespace spillway {

enum class FaultKind : unsigned char {
  kEioRead,     // a read request fails with EIO; nothing is read
  kEioWrite,    // a write request fails with EIO; nothing is written
  kEioSync,     // Sync/SyncDir fails with EIO; nothing is synced
  kNoSpace,     // a write request fails with ENOSPC (Status NoSpace); nothing is written
  kShortWrite,  // a prefix is written, result = bytes written, IOError "short write"
  kTornWrite,   // a prefix is written, then EIO (result = -EIO): partial bytes on disk
  kLatency,     // the call is delayed by latency_us (scheduled with 0: 1 ms), then runs normally
};
inline constexpr size_t kFaultKindCount = 7;

// Spec names: "eio_read", "eio_write", "eio_sync", "enospc", "short", "torn", "latency".
const char* FaultKindName(FaultKind kind);

// Fires `kind` on every operation whose index lies in [first, last]. Indices
// count from 0, separately per class: read requests (kEioRead), write requests
// (kEioWrite, kNoSpace, kShortWrite, kTornWrite), syncs (kEioSync) and calls
// of SubmitAndWait/Sync/SyncDir (kLatency). Counting starts when the
// FaultFileIo is made and goes on while faults are off.
struct FaultWindow {
  FaultKind kind = FaultKind::kEioWrite;
  uint64_t first = 0;
  uint64_t last = 0;
};

// What to inject. Probabilities are per operation, 0..1; a write request
// draws enospc, eio_write, torn_write, short_write in that order and takes
// the first that fires. Scheduled windows are checked before probabilities.
struct FaultSpec {
  double eio_read = 0;
  double eio_write = 0;
  double eio_sync = 0;
  double enospc = 0;
  double short_write = 0;
  double torn_write = 0;
  uint32_t latency_us = 0;  // delay per call (SubmitAndWait, Sync, SyncDir)
  double latency = 1.0;     // probability that a call is delayed, when latency_us > 0
  uint64_t seed = 1;
  std::vector<FaultWindow> schedule;

  // Canonical spec text; ParseFaultSpec(ToString()) gives back this spec.
  std::string ToString() const;
};

// Parses comma-separated items:
//   eio=P            eio_read, eio_write and eio_sync at once (the specific keys win)
//   eio_read=P eio_write=P eio_sync=P enospc=P short=P torn=P latency=P
//   latency_us=N     microseconds per delayed call
//   seed=N
//   KIND@N, KIND@A-B schedule: the Nth op (from 0) or ops A..B of KIND's class
//                    (KIND: eio_read eio_write eio_sync enospc short torn latency, or eio)
// e.g. "eio=0.01,enospc=0.001,short=0.01,torn=0.001,latency_us=50,seed=7".
// An empty string means no faults. InvalidArgument names the bad item:
// "unknown fault 'eoi', did you mean 'eio'?", "probability 1.5 ... out of range".
StatusOr<FaultSpec> ParseFaultSpec(std::string_view text);

// Faults injected so far, per kind, and operations seen, per class.
struct FaultCounts {
  std::array<uint64_t, kFaultKindCount> injected{};  // indexed by FaultKind
  uint64_t reads = 0;   // read requests seen
  uint64_t writes = 0;  // write requests seen
  uint64_t syncs = 0;   // Sync and SyncDir calls seen
  uint64_t of(FaultKind k) const { return injected[static_cast<size_t>(k)]; }
  uint64_t total_failures() const;  // every kind but latency
};

class FaultFileIo : public FileIoWrapper {
 public:
  // `target` must outlive this wrapper.
  FaultFileIo(FileIo* target, FaultSpec spec);
  // A wrapper that owns its target (for the stress tool and the engine).
  static std::unique_ptr<FaultFileIo> Wrap(std::unique_ptr<FileIo> target, FaultSpec spec);

  const char* name() const override { return name_.c_str(); }  // "fault(io_uring)"
  Status SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) override;
  Status Sync(const FileHandle& file) override;
  Status SyncDir(const std::string& path) override;

  // false: every call is forwarded untouched until switched on again.
  void SetEnabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // Replaces probabilities and schedule and reseeds; counters are kept.
  void SetSpec(FaultSpec spec);
  FaultSpec spec() const;
  // Schedule shorthands (see FaultWindow for how operations are counted).
  void FailNth(FaultKind kind, uint64_t n) { FailWindow(kind, n, n); }
  void FailWindow(FaultKind kind, uint64_t first, uint64_t last);

  FaultCounts counts() const;

 private:
  enum class OpClass : unsigned char { kRead, kWrite, kSync, kCall };

  // The fault (if any) for the operation with index `index` of `cls`.
  // REQUIRES: mu_ held.
  bool Decide(OpClass cls, uint64_t index, FaultKind* kind);
  bool Draw(double p);  // REQUIRES: mu_ held
  void MaybeDelay();
  Status InjectWrite(IoRequest& r, FaultKind kind, uint64_t prefix_draw);
  Status InjectSync(const std::string& what);
  void Count(FaultKind k) { injected_[static_cast<size_t>(k)].fetch_add(1, std::memory_order_relaxed); }

  std::unique_ptr<FileIo> owned_;  // set by Wrap only
  std::string name_;
  std::atomic<bool> enabled_{true};

  mutable std::mutex mu_;  // guards spec_ and rng_
  FaultSpec spec_;
  std::mt19937_64 rng_;

  std::atomic<uint64_t> reads_{0}, writes_{0}, syncs_{0}, calls_{0};
  std::array<std::atomic<uint64_t>, kFaultKindCount> injected_{};
};

}  // namespace spillway
