// The pieces section 1 of `spillway bench` (spill.cc) is made of: the
// engine's spill and read-back (spill_engine.cc), and the references and
// diagnostics it is compared with (fio, the FileIo alone, the file tier alone,
// the Dask-style peer: spill_references.cc). Internal to the harness.
#pragma once

#include <cstdint>
#include <string>

#include "bench/harness/common.h"

namespace spillway::bench {

inline constexpr int kReaders = 4;
// Objects each reader reads back at least: fewer measured mostly the first
// touches of the readers' buffers and the disk's moment, not the read path.
inline constexpr uint64_t kMinReadObjects = 4;

// The engine key of the i-th spilled object.
std::string SpillKey(uint64_t i);

struct FioResult {
  double bytes_per_s = kNaN;
  std::string command;  // exactly what ran, for the report
  std::string error;
};

// One fio job on `file`; `io_size` (0: the whole file) bounds a read job,
// and reads stop after 10 s at most. fio's JSON output:
// jobs[0].{read,write}.bw_bytes.
// With `numjobs` > 1 the jobs report together (--group_reporting: jobs[0] is
// their sum), each reading `io_size` / numjobs.
FioResult RunFio(const std::string& file, const std::string& rw, const std::string& engine, uint64_t bs,
                 int iodepth, uint64_t size, uint64_t io_size = 0, const std::string& extra = "", int numjobs = 1);

// The caller's side alone: `count` Puts of `size` into a host-only engine
// with room for all of them (nothing demotes), raw bytes / time. The most
// a single caller's Puts can move, whatever the disk does.
double PutAlone(const DataPool& pool, uint64_t size, uint64_t count);

// The file tier alone: FileTier::Store of `count` host objects of `size`
// bytes in batches of `batch_bytes` (the mover's pass is at most 64 MiB), no
// engine, no mover. Separates what the tier's write path reaches from what
// the engine's demotion pipeline around it costs. Returns bytes/s.
double FileTierStoreAlone(const std::string& dir, const DataPool& pool, uint64_t size, uint64_t count,
                          uint64_t batch_bytes, std::string* error);

// What the same building blocks reach when slabs are pipelined: writer
// threads each encode a 4 MiB slab of records (EncodeRecord, codec none, as
// WritePipeline::WriteSlab does) and submit it, so that while one slab is being
// encoded the others are on the disk and up to 32 1 MiB requests stay in
// flight (never more: 4 per writer); space is preallocated in 64 MiB steps
// as the tier does. A diagnostic of the tier's write path, not a spillway
// figure.
double PipelinedWriterAlone(const std::string& dir, const DataPool& pool, uint64_t size, uint64_t count,
                            std::string* error);

// The disk's write ceiling for buffers in 2 MiB pages, as the file tier's
// are (io_buffer_cache.h): the project's FileIo (io_uring where available)
// writing `total` bytes sequentially in 1 MiB O_DIRECT requests, 32 in
// flight, into a preallocated file (fio's reference lays its file out
// first too). fio's own buffers are 4 KiB pages, which on some virtual disks
// write slower than 2 MiB pages: a second, stricter ceiling beside fio's. `depth` 1 MiB
// requests in flight: 32 (fio's) and 16, the most a spill keeps in flight
// (DemotionPolicy: two 8 MiB slabs), which tells the disk's answer to that
// depth apart from the engine's own gaps.
double DiskWriteFromHugePages(const std::string& file, uint64_t total, uint32_t depth, std::string* error);

// The disk's answer to the spill's own write pattern: the same FileIo and
// preallocated file as DiskWriteFromHugePages, written in 8 MiB slabs of
// 1 MiB requests, two slabs at once (WritePipeline::kSlabWritesOnDisk), each
// slab one SubmitAndWait whose requests are all done before its writer
// takes the next: as WritePipeline::WriteSlab does, where fio and the QD16
// reference refill each request as it completes.
double DiskWriteSlabPattern(const std::string& file, uint64_t total, std::string* error);

// The Dask-style peer (bench/zict_peer.py under o.python) writing and reading `count` objects.
struct PeerRun {
  double write_bps = kNaN, read_bps = kNaN;
  uint64_t count = 0;
  std::string impl, error;
};

PeerRun RunPeer(const Options& o, const std::string& script, const std::string& dir, uint64_t size,
                uint64_t count);

// a / b, NaN unless both are positive.
inline double Ratio(double a, double b) { return (a > 0 && b > 0) ? a / b : kNaN; }

}  // namespace spillway::bench
