// The rows and notes of section 1 of `spillway bench` and of section 5's
// peer, from what SpillSection::Measure (spill.cc) filled in.
#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/spill_section.h"

namespace spillway::bench {

void SpillSection::Report() {
  ReportReferences();
  ReportDiagnostics();
  for (size_t s = 0; s < ns; ++s) {
    ReportWrites(s);
    ReportReads(s);
    ReportPlotsAndPeer(s);
  }
  ReportNotes();
}

void SpillSection::ReportReferences() {
  const std::string fio_missing = have_fio ? fio_error : "fio is not installed";
  rep.Add(WithCommand(Row{"spill.fio.uring_write", 1, "fio io_uring O_DIRECT write, 1 MiB, QD32",
                           Median(GBs(AllOf(fio_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing,
                           GBs(AllOf(fio_ws))}, cmd_w));
  rep.Add(WithCommand(Row{"spill.fio.uring_write64", 1, "fio io_uring O_DIRECT write, 1 MiB, QD64",
                           Median(GBs(AllOf(fio_w64s))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "",
                           fio_missing, GBs(AllOf(fio_w64s))}, cmd_w64));
  rep.Add(WithCommand(Row{"spill.fio.uring_write_fsync", 1, "fio io_uring O_DIRECT write, 1 MiB, QD32, fsync at the end",
                           Median(GBs(AllOf(fio_wfs))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "",
                           fio_missing, GBs(AllOf(fio_wfs))}, cmd_wf));
  rep.Add(WithCommand(Row{"spill.fio.psync_write", 1, "fio psync O_DIRECT write, 1 MiB", Median(GBs(fio_ps)), "GB/s",
                           "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, GBs(fio_ps)}, cmd_ps));
  rep.Add(Row{"spill.fileio.write_huge", 1,
              "FileIo io_uring O_DIRECT write, 1 MiB, QD32, from 2 MiB pages (the file tier's buffers)",
              Median(GBs(AllOf(huge_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", huge_error,
              GBs(AllOf(huge_ws))});
  rep.Add(Row{"spill.fileio.write_huge_qd16", 1,
              "FileIo io_uring O_DIRECT write, 1 MiB, QD16, from 2 MiB pages (a spill's most in flight: two 8 MiB slabs)",
              Median(GBs(AllOf(huge16_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", huge_error,
              GBs(AllOf(huge16_ws))});
  rep.Add(Row{"spill.fileio.write_slabs", 1,
              "FileIo io_uring O_DIRECT write in 8 MiB slabs of 1 MiB requests, two at once, each refilled when all "
              "its requests are done (the spill's own pattern)",
              Median(GBs(AllOf(slab_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", huge_error,
              GBs(AllOf(slab_ws))});
  for (size_t b = 0; b < read_bs.size(); ++b) {
    const std::string name = SizeName(read_bs[b]);
    const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
    // The 1 MiB QD4 row keeps the id the quick test knows.
    const std::string id = read_bs[b] == kMiB ? "spill.fio.uring_read" : "spill.fio.randread." + tag;
    const std::vector<double> rr = AllOf(fio_rrs, static_cast<int>(b)), r1 = AllOf(fio_r1s, static_cast<int>(b));
    rep.Add(WithCommand(Row{id, 1, "fio io_uring O_DIRECT randread, " + name + ", QD" + std::to_string(kReaders),
                             Median(GBs(rr)), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, GBs(rr)},
                         cmd_rr[b]));
    rep.Add(WithCommand(Row{"spill.fio.psync_read." + tag, 1, "fio psync O_DIRECT randread, " + name + ", QD1",
                             Median(GBs(r1)), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, GBs(r1)},
                         cmd_r1[b]));
    const std::vector<double> rj = AllOf(fio_rjs, static_cast<int>(b));
    rep.Add(WithCommand(Row{"spill.fio.psync_read_jobs." + tag, 1,
                             "fio psync O_DIRECT randread, " + name + ", " + std::to_string(kReaders) + " jobs at QD1",
                             Median(GBs(rj)), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, GBs(rj)},
                         cmd_rj[b]));
  }
}

// fio_w: the write reference nearest in time to each repetition's
// diagnostics (they run right before the first size).
void SpillSection::ReportDiagnostics() {
  const std::vector<double> fio_w = fio_ws[0];
  for (size_t d = 0; d < diag_sizes.size(); ++d) {
    std::vector<double> rs(reps), rp(reps);
    for (int r = 0; r < reps; ++r) {
      rp[r] = Ratio(diag_pipe[d][r], fio_w[r]);
      rs[r] = Ratio(diag_store[d][r], fio_w[r]);
    }
    const std::string name = SizeName(diag_sizes[d]);
    const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
    rep.Add(Row{"spill.diag.store_alone." + tag, 1,
                "(diagnostic) FileTier::Store alone, " + name + " objects, 64 MiB batches",
                Median(GBs(diag_store[d])), "GB/s", "fio io_uring write", Median(GBs(fio_w)), Median(rs), kNaN,
                Better::kHigher, "", diag_error, GBs(diag_store[d])});
    rep.Add(Row{"spill.diag.pipelined." + tag, 1,
                "(diagnostic) pipelined slab writer (EncodeRecord + FileIo), " + name + " objects",
                Median(GBs(diag_pipe[d])), "GB/s", "fio io_uring write", Median(GBs(fio_w)), Median(rp), kNaN,
                Better::kHigher, "", diag_error, GBs(diag_pipe[d])});
  }
}

void SpillSection::ReportWrites(size_t s) {
  const std::string name = SizeName(sizes[s]);
  const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
  const size_t b = bs_index(sizes[s]);
  const std::string bs_name = SizeName(read_bs[b]);
  const std::vector<double> ratio_w = Ratios(wr, s, fio_ws), ratio_w64 = Ratios(wr, s, fio_w64s),
                            ratio_wf = Ratios(wr, s, fio_wfs);
  std::vector<double> ratio_ps(reps);
  for (int r = 0; r < reps; ++r) ratio_ps[r] = Ratio(wr[s][r], fio_ps[r]);
  const double target = sizes[s] >= 64 * kKiB ? 0.9 : 0.5;
  char tt[64] = "";
  std::snprintf(tt, sizeof(tt), ">= %.2fx fio io_uring", target);
  rep.Add(WithCommand(Row{"spill.write." + tag, 1, "host -> file spill, " + name + " objects", Median(GBs(wr[s])),
                           "GB/s", "fio io_uring write 1 MiB QD32", Median(GBs(fio_ws[s])), Median(ratio_w), target,
                           Better::kHigher, tt, size_errors[s], GBs(wr[s])}, cmd_w));
  rep.Add(WithCommand(Row{"spill.write_qd64." + tag, 1, "host -> file spill, " + name + " objects",
                           Median(GBs(wr[s])), "GB/s", "fio io_uring write 1 MiB QD64", Median(GBs(fio_w64s[s])),
                           Median(ratio_w64), kNaN, Better::kHigher, "", size_errors[s], GBs(wr[s])}, cmd_w64));
  rep.Add(WithCommand(Row{"spill.write_fsync." + tag, 1, "host -> file spill, " + name + " objects",
                           Median(GBs(wr[s])), "GB/s", "fio io_uring write 1 MiB QD32, end_fsync",
                           Median(GBs(fio_wfs[s])), Median(ratio_wf), kNaN, Better::kHigher, "", size_errors[s],
                           GBs(wr[s])}, cmd_wf));
  rep.Add(WithCommand(Row{"spill.write_psync." + tag, 1, "host -> file spill, " + name + " objects",
                           Median(GBs(wr[s])), "GB/s", "fio psync write", Median(GBs(fio_ps)), Median(ratio_ps), kNaN,
                           Better::kHigher, "", size_errors[s], GBs(wr[s])}, cmd_ps));
  std::vector<double> ratio_huge(reps);
  for (int r = 0; r < reps; ++r) ratio_huge[r] = Ratio(wr[s][r], huge_ws[s][r]);
  rep.Add(Row{"spill.diag.write_huge." + tag, 1, "(diagnostic) host -> file spill, " + name + " objects",
              Median(GBs(wr[s])), "GB/s", "FileIo io_uring write 1 MiB QD32 from 2 MiB pages",
              Median(GBs(huge_ws[s])), Median(ratio_huge), kNaN, Better::kHigher, "",
              size_errors[s].empty() ? huge_error : size_errors[s], GBs(wr[s])});
  std::vector<double> ratio_huge16(reps);
  for (int r = 0; r < reps; ++r) ratio_huge16[r] = Ratio(wr[s][r], huge16_ws[s][r]);
  rep.Add(Row{"spill.diag.write_huge_qd16." + tag, 1, "(diagnostic) host -> file spill, " + name + " objects",
              Median(GBs(wr[s])), "GB/s", "FileIo io_uring write 1 MiB QD16 from 2 MiB pages",
              Median(GBs(huge16_ws[s])), Median(ratio_huge16), kNaN, Better::kHigher, "",
              size_errors[s].empty() ? huge_error : size_errors[s], GBs(wr[s])});
  std::vector<double> ratio_slab(reps);
  for (int r = 0; r < reps; ++r) ratio_slab[r] = Ratio(wr[s][r], slab_ws[s][r]);
  rep.Add(Row{"spill.diag.write_slabs." + tag, 1, "(diagnostic) host -> file spill, " + name + " objects",
              Median(GBs(wr[s])), "GB/s", "FileIo write in the spill's slab pattern (2 x 8 MiB, refilled per slab)",
              Median(GBs(slab_ws[s])), Median(ratio_slab), kNaN, Better::kHigher, "",
              size_errors[s].empty() ? huge_error : size_errors[s], GBs(wr[s])});
  std::vector<double> ratio_pa(reps);
  for (int r = 0; r < reps; ++r) ratio_pa[r] = Ratio(put_alone[s][r], fio_ws[s][r]);
  rep.Add(Row{"spill.diag.put_alone." + tag, 1, "(diagnostic) Put alone into a host tier with room, " + name + " objects",
              Median(GBs(put_alone[s])), "GB/s", "fio io_uring write 1 MiB QD32", Median(GBs(fio_ws[s])),
              Median(ratio_pa), kNaN, Better::kHigher, "", size_errors[s], GBs(put_alone[s])});
  rep.Add(Row{"spill.diag.disk_busy." + tag, 1, "(diagnostic) disk busy writing during the spill, " + name + " objects",
              Median(disk_busy[s]), "%", "", kNaN, kNaN, kNaN, Better::kHigher, "", size_errors[s], disk_busy[s]});
  rep.Add(Row{"spill.diag.disk_inflight." + tag, 1,
              "(diagnostic) bytes in flight while the disk was busy, " + name + " objects", Median(disk_inflight[s]),
              "MiB", "", kNaN, kNaN, kNaN, Better::kHigher, "", size_errors[s], disk_inflight[s]});
  rep.Add(Row{"spill.diag.put_wait." + tag, 1,
              "(diagnostic) the Put thread waiting for room, of the spill's time, " + name + " objects",
              Median(put_wait[s]), "%", "", kNaN, kNaN, kNaN, Better::kLower, "", size_errors[s], put_wait[s]});
  rep.Add(Row{"spill.diag.put_cpu." + tag, 1,
              "(diagnostic) the Put thread on a CPU, of the spill's time, " + name + " objects", Median(put_cpu[s]),
              "%", "", kNaN, kNaN, kNaN, Better::kHigher, "", size_errors[s], put_cpu[s]});
  rep.Add(Row{"spill.diag.batch_idle." + tag, 1,
              "(diagnostic) no demotion batch queued or running, of the spill's time, " + name + " objects",
              Median(batch_idle[s]), "%", "", kNaN, kNaN, kNaN, Better::kLower, "", size_errors[s], batch_idle[s]});
}

void SpillSection::ReportReads(size_t s) {
  const std::string name = SizeName(sizes[s]);
  const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
  const size_t b = bs_index(sizes[s]);
  const std::string bs_name = SizeName(read_bs[b]);
  const std::vector<double> ratio_r = Ratios(rd, s, fio_rrs), ratio_r1 = Ratios(rd1, s, fio_r1s);
  rep.Add(WithCommand(Row{"spill.read." + tag, 1,
                           "file -> host read-back, " + name + " objects (" + std::to_string(kReaders) + " readers)",
                           Median(GBs(rd[s])), "GB/s", "fio randread " + bs_name + " QD" + std::to_string(kReaders),
                           Median(GBs(fio_rrs[s])), Median(ratio_r), 0.9, Better::kHigher, ">= 0.90x fio randread",
                           size_errors[s], GBs(rd[s])}, cmd_rr[b]));
  // The readers against fio in their own pattern, kReaders threads each
  // waiting on one read: what the target's reference (one thread keeping
  // kReaders in flight) gains by its pattern alone shows as this ratio
  // above the target's.
  std::vector<double> ratio_rj(reps);
  for (int r = 0; r < reps; ++r) ratio_rj[r] = Ratio(rd[s][r], fio_rjs[s][r]);
  rep.Add(WithCommand(Row{"spill.diag.read_jobs." + tag, 1,
                           "(diagnostic) file -> host read-back, " + name + " objects (" + std::to_string(kReaders) +
                               " readers)",
                           Median(GBs(rd[s])), "GB/s",
                           "fio psync randread " + bs_name + ", " + std::to_string(kReaders) + " jobs at QD1",
                           Median(GBs(fio_rjs[s])), Median(ratio_rj), kNaN, Better::kHigher, "", size_errors[s],
                           GBs(rd[s])}, cmd_rj[b]));
  // Whether the readers ran out of CPU: the process's CPU seconds per
  // second of the read-back (fio's reference spends next to none: no
  // checksum, no copy, no fresh memory to fault in, no comparison).
  rep.Add(Row{"spill.diag.read_cores." + tag, 1,
              "(diagnostic) cores busy during the read-back, " + name + " objects (" + std::to_string(kReaders) +
                  " readers, " + std::to_string(std::thread::hardware_concurrency()) + " cores here)",
              Median(read_cores[s]), "cores", "", kNaN, kNaN, kNaN, Better::kLower, "", size_errors[s],
              read_cores[s]});
  rep.Add(Row{"spill.diag.read_sys." + tag, 1,
              "(diagnostic) of that CPU time, in the kernel, " + name + " objects (" + std::to_string(kReaders) +
                  " readers)",
              Median(read_sys_share[s]), "%", "", kNaN, kNaN, kNaN, Better::kLower, "", size_errors[s],
              read_sys_share[s]});
  // The same reads in fio's pattern: one thread, kReaders keys per
  // Acquire, their records in one submission at depth kReaders.
  // Not run where too few objects were left (64 MiB objects): no row.
  std::vector<double> ratio_rb(reps);
  bool batch_ran = false;
  for (int r = 0; r < reps; ++r) {
    ratio_rb[r] = Ratio(rdb[s][r], fio_rrs[s][r]);
    batch_ran = batch_ran || rdb[s][r] > 0;
  }
  if (batch_ran) rep.Add(WithCommand(Row{"spill.diag.read_batch." + tag, 1,
                           "(diagnostic) file -> host read-back, " + name + " objects (1 thread, Acquire of " +
                               std::to_string(kReaders) + " keys)",
                           Median(GBs(rdb[s])), "GB/s", "fio randread " + bs_name + " QD" + std::to_string(kReaders),
                           Median(GBs(fio_rrs[s])), Median(ratio_rb), kNaN, Better::kHigher, "", size_errors[s],
                           GBs(rdb[s])}, cmd_rr[b]));
  rep.Add(WithCommand(Row{"spill.read1." + tag, 1, "file -> host read-back, " + name + " objects (1 reader)",
                           Median(GBs(rd1[s])), "GB/s", "fio psync randread " + bs_name + " QD1",
                           Median(GBs(fio_r1s[s])), Median(ratio_r1), 0.9, Better::kHigher, ">= 0.90x fio psync QD1",
                           size_errors[s], GBs(rd1[s])}, cmd_r1[b]));
  // The single reader against reads of the same bytes taken between its
  // Gets (pread of the object's size, 1 MiB for larger objects, at aligned
  // random offsets of the tier's own segment files): both in the same
  // seconds, so the disk's drift between the engine's run and fio's cannot
  // move this ratio.
  std::vector<double> ratio_raw(reps);
  for (int r = 0; r < reps; ++r) ratio_raw[r] = Ratio(rd1[s][r], rd1raw[s][r]);
  rep.Add(Row{"spill.diag.read1_raw." + tag, 1, "(diagnostic) file -> host read-back, " + name + " objects (1 reader)",
              Median(GBs(rd1[s])), "GB/s",
              "pread of " + SizeName(std::min<uint64_t>(sizes[s], kMiB)) +
                  " blocks from its own segment files into a 2 MiB page, between its Gets",
              Median(GBs(rd1raw[s])), Median(ratio_raw), kNaN, Better::kHigher, "", size_errors[s], GBs(rd1[s])});
  // Where a single reader's Get spends its time: the file I/O calls
  // against everything else (index, checksum, the copy into the
  // object's memory). A Get slower than fio's read with most of its time
  // outside the I/O is the engine's work; with most inside, the disk's.
  std::vector<double> io_share(reps);
  for (int r = 0; r < reps; ++r) io_share[r] = Ratio(get1_io_us[s][r], get1_us[s][r]);
  rep.Add(Row{"spill.diag.get1_io." + tag, 1, "(diagnostic) 1 reader: time per Get, " + name + " objects",
              Median(get1_us[s]), "us", "inside the file I/O", Median(get1_io_us[s]), Median(io_share), kNaN,
              Better::kHigher, "", size_errors[s], get1_us[s]});
  // Of that time, the part waiting on the disk (the I/O calls less the
  // checks and copies done inside them), against the time fio psync took
  // to read the same bytes at depth one: where the two match, the rest of
  // the Get (its checksum, copies, index) is what separates the engine
  // from fio.
  std::vector<double> fio1_us(reps, kNaN), wait_vs_fio(reps);
  for (int r = 0; r < reps; ++r) {
    if (fio_r1s[s][r] > 0) fio1_us[r] = static_cast<double>(sizes[s]) / fio_r1s[s][r] * 1e6;
    wait_vs_fio[r] = Ratio(get1_wait_us[s][r], fio1_us[r]);
  }
  rep.Add(Row{"spill.diag.get1_wait." + tag, 1, "(diagnostic) 1 reader: of each Get, waiting on the disk, " + name +
                  " objects",
              Median(get1_wait_us[s]), "us", "fio psync QD1, same bytes", Median(fio1_us), Median(wait_vs_fio), kNaN,
              Better::kLower, "", size_errors[s], get1_wait_us[s]});
  // The same wait against fio reading what the file tier reads: the
  // object's read window at its alignment. Where this ratio is near 1 and
  // the one above is not, the window (bytes beyond the object's, offsets
  // that are not the block size's multiples) makes the difference.
  if (sizes[s] <= kMiB) {
    const Window& w = windows[s];
    std::vector<double> fiow_us(reps, kNaN), wait_vs_w(reps);
    for (int r = 0; r < reps; ++r) {
      if (fio_r1w[s][r] > 0) fiow_us[r] = static_cast<double>(w.bytes) / fio_r1w[s][r] * 1e6;
      wait_vs_w[r] = Ratio(get1_wait_us[s][r], fiow_us[r]);
    }
    rep.Add(WithCommand(Row{"spill.diag.get1_wait_window." + tag, 1,
                             "(diagnostic) 1 reader: of each Get, waiting on the disk, " + name + " objects",
                             Median(get1_wait_us[s]), "us",
                             "fio psync QD1 of the read window (" + SizeName(w.bytes) + " at " +
                                 SizeName(w.align) + " offsets)",
                             Median(fiow_us), Median(wait_vs_w), kNaN, Better::kLower, "", size_errors[s],
                             get1_wait_us[s]}, cmd_r1w[s]));
  }
  // The first read of the bytes a read has just brought in (one byte of
  // every 64-byte line of the reference's blocks, the same bytes per
  // object), against the Get's time outside its wait on the disk: the
  // share of the engine's own time that any reader of those bytes would
  // pay, the checksum being the first to read them.
  std::vector<double> outside_us(reps, kNaN), touch_share(reps);
  for (int r = 0; r < reps; ++r) {
    outside_us[r] = get1_us[s][r] - get1_wait_us[s][r];
    touch_share[r] = Ratio(touch1_us[s][r], outside_us[r]);
  }
  rep.Add(Row{"spill.diag.touch1." + tag, 1,
              "(diagnostic) 1 reader: reading the bytes just read once (a byte per 64-byte line), " + name +
                  " objects",
              Median(touch1_us[s]), "us", "the Get's time outside its wait on the disk", Median(outside_us),
              Median(touch_share), kNaN, Better::kLower, "", size_errors[s], touch1_us[s]});
  rep.Add(Row{"spill.erase." + tag, 1, "Erase of a spilled " + name + " object, p50 latency", Median(erase_us[s]),
              "us", "", kNaN, kNaN, kNaN, Better::kLower, "", size_errors[s], erase_us[s]});
}

void SpillSection::ReportPlotsAndPeer(size_t s) {
  const std::string name = SizeName(sizes[s]);
  const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
  const std::vector<double> ratio_peer = Ratios(wr, s, pw);
  const double x = static_cast<double>(sizes[s]);
  rep.Line("spill", "spillway host -> file").points.push_back({x, Median(GBs(wr[s]))});
  rep.Line("spill", "spillway file -> host").points.push_back({x, Median(GBs(rd[s]))});
  rep.Line("spill", "spillway file -> host, 1 reader").points.push_back({x, Median(GBs(rd1[s]))});
  rep.Line("spill", "fio io_uring write").points.push_back({x, Median(GBs(fio_ws[s]))});
  rep.Line("spill", "fio psync write").points.push_back({x, Median(GBs(fio_ps))});
  rep.Line("spill", "fio randread QD" + std::to_string(kReaders)).points.push_back({x, Median(GBs(fio_rrs[s]))});
  if (peer) {
    std::string why = have_peer ? peer_errors[s]
                                : (script.empty() ? "bench/zict_peer.py not found (run from the source tree)"
                                                  : o.python + " not found");
    rep.Add(Row{"peer.write." + tag, 5, "host -> file spill, " + name + " objects", Median(GBs(wr[s])), "GB/s",
                "zict.File peer (Python)", Median(GBs(pw[s])), Median(ratio_peer), 3.0, Better::kHigher,
                ">= 3.00x the Dask-style spiller", why, GBs(wr[s])});
    rep.Line("peer", "spillway host -> file").points.push_back({x, Median(GBs(wr[s]))});
    rep.Line("peer", "zict.File peer write").points.push_back({x, Median(GBs(pw[s]))});
    rep.Line("peer", "zict.File peer read").points.push_back({x, Median(GBs(pr[s]))});
  }
}

void SpillSection::ReportNotes() {
  rep.Note("Section 1: spill throughput = raw bytes written to the file tier (its Stats raw_bytes_written: "
           "objects demoted across the host -> file boundary plus objects a Put placed there directly because the "
           "host tier was full; the JSON has the split) / wall time from the first Put to the return of Flush "
           "(mover drained, segments fdatasync'd); " +
           SizeName(total) + " per object size, host tier 64 MiB (128 MiB for 64 MiB objects), file tier codec "
           "none, O_DIRECT, queue depth 32. fio writes and reads " + SizeName(total) + " in " + o.dir +
           ". Read-back: 4 threads Get the oldest " + SizeName(read_cap) + " of objects, at least " +
           std::to_string(kMinReadObjects) + " objects each and at most " + SizeName(total / 2) +
           " (all in the file tier; no "
           "promotion), each compared with its source; bytes served by the file tier / wall time of the read; then one "
           "thread Gets the next " + SizeName(single_cap) + " (at least " + std::to_string(2 * kMinReadObjects) +
           " objects, at most " + SizeName(total / 4) + "; fio reads as many bytes as the engine in each) (its figure: bytes / time inside Get, the comparison "
           "with the source between Gets left out). References, measured right before each object size's engine run "
           "in even repetitions and right after it in odd ones (the disk drifts by tens of percent within minutes, "
           "and on a virtual disk a writer ran slower right after the other kind of writer; the JSON's `order` says "
           "which ran first), each ratio taken per repetition: fio io_uring "
           "write at depth 32 (the target's) and 64 on a fresh " + SizeName(total) + " file, the depth-32 write "
           "again with --end_fsync=1 (durable at its end, as the engine's figure is after Flush's fdatasync; "
           "a diagnostic, not the target's reference), then fio randread on "
           "it (larger than the engine's memory tiers) at the object's size as block size (1 MiB for larger "
           "objects), io_uring at queue depth 4 (the readers) and psync at depth 1 (the single reader), and as a "
           "diagnostic psync in 4 jobs at depth 1 each (the readers' own pattern: four threads each waiting on one "
           "read) and psync at depth 1 reading the single reader's read windows (objects up to 1 MiB: the record's "
           "aligned bytes, at the file tier's offset alignment); and, between the single reader's Gets, pread of the "
           "same bytes from the file tier's own segment files (blocks of the object's size, 1 MiB for larger "
           "objects, at aligned random offsets within the files' written ranges), a reference in the same seconds "
           "as the Gets; the exact "
           "fio command of each reference is printed under its row. Erase: 64 spilled objects erased "
           "one by one after the read-back. Diagnostics per size: Put alone = the same Puts (at most " +
           SizeName(diag_total) + ") into a host-only engine with room for all of them, the caller's ceiling; cores "
           "busy during the read-back = the process's CPU seconds (getrusage, user and kernel, every thread: the "
           "engine's and the readers' comparisons alike) per second of the 4 readers' read, and the kernel's share of "
           "them (the JSON has the minor page faults); disk "
           "busy = the share of the spill's wall time in which at least one write submission of the file tier was "
           "in flight (the JSON has the idle gaps), and the bytes in flight on average while one was (each "
           "submission counted over its whole wait); fio keeps 32 MiB in flight. FileIo write from 2 MiB pages: the "
           "project's FileIo writing the same bytes in 1 MiB O_DIRECT requests into a preallocated file (as the "
           "file tier's segments are), 32 in flight (fio's depth) and 16 (two 8 MiB slabs, the most a spill keeps "
           "in flight), and in the spill's own pattern (8 MiB slabs of 1 MiB requests, two at once, each slab "
           "refilled only when all its requests are done), measured with each size's fio references. 1 reader's time per Get: the single "
           "reader's time inside Get per object, and the part of it inside the file tier's I/O calls (the ratio is "
           "that share; the rest is the engine's own work: index, checksum, the copy into the object's memory). Waiting "
           "on the disk: the time inside the I/O calls less what the file tier did there with requests that had "
           "arrived (a streamed read checks and copies each piece as it lands), beside the time fio psync took per "
           "object's bytes at depth one in the same repetition (a lower bound of the disk's time where a read's "
           "pieces land one by one and their checks overlap the later ones: 64 MiB objects). 1 thread, Acquire of " + std::to_string(kReaders) +
           " keys: after the single reader, one thread Acquires the next objects " + std::to_string(kReaders) +
           " at a time (nothing promoted), so the file tier reads their records in one submission at depth " +
           std::to_string(kReaders) + ", fio's own pattern for the readers' reference; bytes / time inside "
           "Acquire, each call's objects compared with their sources after it (not run where too few objects "
           "were left: 64 MiB objects, which have no such row).");
  if (peer) {
    rep.Note("Section 5: the peer (" + (peer_impl.empty() ? std::string("bench/zict_peer.py") : peer_impl) +
             " under " + o.python + ") pickles each numpy object (protocol 5, buffers out of band) and writes one "
             "file per key with no fsync, as a Dask worker does; it writes at most " + SizeName(peer_bytes) +
             " and " + std::to_string(peer_files) + " files per size. Its files stay in the page cache: it never "
             "waits for the disk, spillway's figure includes the O_DIRECT writes and the final fdatasync.");
  }
}


}  // namespace spillway::bench
