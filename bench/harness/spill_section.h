// SpillSection: section 1 of `spillway bench` and the peer of section 5, as
// one object: what a run measures (every figure per object size and
// repetition, filled by spill.cc) and the rows and notes it reports
// (spill_report.cc). Internal to the harness.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/harness/common.h"
#include "bench/harness/spill_parts.h"

namespace spillway::bench {

using Grid = std::vector<std::vector<double>>;  // [object size][repetition]

inline std::vector<double> GBs(std::vector<double> v) {
  for (double& x : v) x /= 1e9;
  return v;
}

inline Row WithCommand(Row row, const std::string& cmd) {
  row.reference_command = cmd;
  return row;
}

// Section 1 and the peer of section 5: what one run measures (every figure
// per object size and repetition), how it measures it, and the rows it adds.
class SpillSection {
 public:
  explicit SpillSection(Context& ctx) : ctx_(ctx), o(ctx.options), rep(ctx.report) {}

  void Measure();
  void Report();

 private:
  // What each object size's reads are compared with: fio at the object's
  // size as block size, 1 MiB for larger objects.
  size_t bs_index(uint64_t size) const {
    for (size_t i = 0; i < read_bs.size(); ++i) {
      if (size <= read_bs[i]) return i;
    }
    return read_bs.size() - 1;
  }
  // Bytes read back per object size (fio's references read as much): at
  // least kMinReadObjects objects per reader, at most half (the single
  // reader a quarter) of what was written; fewer objects measured mostly the
  // readers' first touches of their buffers.
  uint64_t read_bytes_for(uint64_t size) const {
    return std::min(std::max(read_cap, kReaders * kMinReadObjects * size), total / 2);
  }
  uint64_t single_bytes_for(uint64_t size) const {
    return std::min(std::max(single_cap, 2 * kMinReadObjects * size), total / 4);
  }
  Grid NewGrid() const { return Grid(ns, std::vector<double>(reps, kNaN)); }
  // a[s][r] / b[s][r] per repetition.
  std::vector<double> Ratios(const Grid& a, size_t s, const Grid& b) const {
    std::vector<double> v(reps);
    for (int r = 0; r < reps; ++r) v[r] = Ratio(a[s][r], b[s][r]);
    return v;
  }
  // Every value of one kind of reference across sizes and repetitions (a
  // reference row's median), or only the sizes read at block size `block`.
  std::vector<double> AllOf(const Grid& m, int block = -1) const {
    std::vector<double> v;
    for (size_t s = 0; s < ns; ++s) {
      if (block >= 0 && bs_index(sizes[s]) != static_cast<size_t>(block)) continue;
      v.insert(v.end(), m[s].begin(), m[s].end());
    }
    return v;
  }

  void ProbeReadWindows();
  void MeasureFioPsync(int r);
  void MeasureDiagnostics(int r);
  void MeasureReferences(size_t s, int r, const char* order);
  void MeasureEngine(size_t s, int r, const char* order);
  void MeasurePeer(size_t s, int r);
  void ReportReferences();
  void ReportDiagnostics();
  void ReportWrites(size_t s);
  void ReportReads(size_t s);
  void ReportPlotsAndPeer(size_t s);
  void ReportNotes();

  Context& ctx_;
  const Options& o;
  bench::Report& rep;
  const std::vector<uint64_t> sizes = {4 * kKiB, 64 * kKiB, kMiB, 64 * kMiB};
  const size_t ns = sizes.size();
  const uint64_t total = o.quick ? 512 * kMiB : 2 * kGiB;
  const int reps = o.Reps();
  const bool peer = o.Runs(5);
  const bool have_fio = HaveProgram("fio");
  const std::string script = ctx_.source_dir.empty() ? "" : ctx_.source_dir + "/bench/zict_peer.py";
  const bool have_peer = peer && !script.empty() && HaveProgram(o.python);
  // The peer writes one file per object at Python speed: cap its share.
  const uint64_t peer_bytes = o.quick ? 128 * kMiB : 512 * kMiB;
  const uint64_t peer_files = o.quick ? 1024 : 4096;
  const std::string fio_file = o.dir + "/fio.dat";
  const std::string tier_dir = o.dir + "/tier";
  const std::string peer_dir = o.dir + "/peer";
  // Read references, one per block size an object is read in (the object's
  // size, 1 MiB for larger ones): fio randread at queue depth kReaders
  // (io_uring) and at depth one (psync), on a file of `total` bytes, larger
  // than the engine's memory tiers.
  const std::vector<uint64_t> read_bs = {4 * kKiB, 64 * kKiB, kMiB};
  const std::vector<uint64_t> diag_sizes = {4 * kKiB, kMiB, 64 * kMiB};
  const uint64_t diag_total = std::min<uint64_t>(total, 512 * kMiB);
  const uint64_t read_cap = o.quick ? 128 * kMiB : 512 * kMiB;
  const uint64_t single_cap = read_cap / 4;

  // The engine's figures.
  Grid wr = NewGrid(), rd = NewGrid(), rd1 = NewGrid(), get1_us = NewGrid(), touch1_us = NewGrid(),
       get1_io_us = NewGrid(), get1_wait_us = NewGrid(), rdb = NewGrid(), rd1raw = NewGrid(), pw = NewGrid(),
       pr = NewGrid(), erase_us = NewGrid(), put_alone = NewGrid(), disk_busy = NewGrid(), disk_inflight = NewGrid(),
       put_wait = NewGrid(), put_cpu = NewGrid(), batch_idle = NewGrid(), read_cores = NewGrid(),
       read_sys_share = NewGrid();
  // References per object size and repetition, each measured right before
  // or right after that size's engine run: fio io_uring write at depth 32 (the
  // target's ceiling) and 64, the depth-32 write with --end_fsync=1, fio
  // randread at the size's block size; and the FileIo writes from 2 MiB pages.
  Grid fio_ws = NewGrid(), fio_w64s = NewGrid(), fio_wfs = NewGrid(), fio_rrs = NewGrid(), fio_r1s = NewGrid(),
       fio_rjs = NewGrid(), fio_r1w = NewGrid(), huge_ws = NewGrid(), huge16_ws = NewGrid(), slab_ws = NewGrid();
  std::vector<double> fio_ps = std::vector<double>(reps, kNaN);
  Grid diag_store = Grid(diag_sizes.size(), std::vector<double>(reps, kNaN)), diag_pipe = diag_store;
  std::string cmd_w, cmd_w64, cmd_wf, cmd_ps;
  std::vector<std::string> cmd_rr = std::vector<std::string>(read_bs.size()), cmd_r1 = cmd_rr, cmd_rj = cmd_rr,
                           cmd_r1w = std::vector<std::string>(ns);
  std::string huge_error, fio_error, peer_impl, diag_error;
  std::vector<std::string> size_errors = std::vector<std::string>(ns), peer_errors = size_errors;
  // The read window a file tier reads for one spilled object (ProbeReadWindows).
  struct Window {
    uint64_t bytes = 0, align = 0;
  };
  std::vector<Window> windows = std::vector<Window>(ns);
  nlohmann::json runs = nlohmann::json::array();
};

}  // namespace spillway::bench
