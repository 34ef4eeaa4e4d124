// `spillway bench` section 1 (host -> file spilling and reading back, against
// fio on the same directory) and section 5 (the same objects spilled by the
// Dask-style peer, bench/zict_peer.py). The two are interleaved: each
// repetition runs, for every object size, fio's references and spillway's
// spill and read-back (fio first in even repetitions, the engine first in
// odd ones), then the peer, so every ratio compares figures taken minutes
// apart at most on a noisy machine.
//
// Spill throughput = raw bytes the engine demoted host -> file (the boundary
// counter in Stats) / wall time from the first Put to the return of Flush
// (which waits for the mover and fdatasyncs the segments). Read-back
// throughput = raw bytes of the objects served from the file tier / wall time
// of 4 reader threads Getting them (promote_on_read off), every object
// compared byte for byte with its source.
//
// This file runs the measurements (SpillSection::Measure and its steps);
// spill_report.cc turns them into rows.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/harness/spill_section.h"
#include "codecs/codec.h"
#include "spillway/file_io.h"
#include "tiers/file_tier.h"
#include "tiers/record.h"

namespace spillway::bench {

// The read window a file tier reads for one spilled object of each size
// (objects read in one request: up to 1 MiB here), for a record starting
// mid-block: its length and the alignment of its offsets. The file tier's
// rule (ReadWindowBounds) on this filesystem's direct-read alignment: a
// 4 KiB object reads 4.5 KiB at 512-byte offsets on a disk of 512-byte
// logical blocks, a 64 KiB object 68 KiB at 4 KiB offsets.
void SpillSection::ProbeReadWindows() {
  uint32_t fine_align = kIoAlign;
  {
    std::unique_ptr<FileIo> io = MakeFileIo(IoEngine::kAuto);
    OpenOptions oo;
    oo.create = true;
    oo.write = true;
    const std::string probe = o.dir + "/align.probe";
    if (auto f = io->Open(probe, oo); f.ok()) {
      fine_align = f->read_align;
      (void)io->Close(*f);
    }
    std::error_code ec;
    std::filesystem::remove(probe, ec);
  }
  const auto codec = MakeCodec(CodecConfig{});
  for (size_t s = 0; s < ns; ++s) {
    const uint64_t len = MaxRecordSize(SpillKey(0).size(), 1, sizes[s], *codec, CodecConfig{});
    const uint64_t offset = 64 * kIoAlign + kIoAlign / 2;
    uint64_t start = 0, end = 0;
    ReadWindowBounds(offset, len, fine_align, &start, &end);
    windows[s] = {end - start, start % kIoAlign != 0 ? uint64_t{fine_align} : kIoAlign};
  }
}

void SpillSection::Measure() {
  std::filesystem::create_directories(o.dir);
  ProbeReadWindows();
  ctx_.progress.Begin("1 host->file", 0.3, reps * (1 + 3 + static_cast<int>(ns) * (peer ? 4 : 3)));
  for (int r = 0; r < reps; ++r) {
    MeasureFioPsync(r);
    MeasureDiagnostics(r);
    for (size_t s = 0; s < ns; ++s) {
      // Each size's references are measured right before or right after its
      // engine run (the disk drifts by tens of percent within minutes), and
      // the order alternates between repetitions: on a virtual disk a write
      // ran slower right after the other kind of writer than after its own
      // kind, so a fixed order would put every spill in the slow position.
      // `order` in the JSON says which ran first.
      const bool engine_first = r % 2 == 1;
      const char* const order = engine_first ? "engine first" : "fio first";
      if (engine_first) {
        MeasureEngine(s, r, order);
        MeasureReferences(s, r, order);
      } else {
        MeasureReferences(s, r, order);
        MeasureEngine(s, r, order);
      }
      if (peer) MeasurePeer(s, r);
    }
  }
  std::filesystem::remove_all(tier_dir);
  std::filesystem::remove_all(peer_dir);
  rep.details["spill"] = runs;
}

void SpillSection::MeasureFioPsync(int r) {
  if (have_fio) {
    ctx_.progress.Step("fio psync write (rep " + std::to_string(r + 1) + ")");
    FioResult ps = RunFio(fio_file, "write", "psync", kMiB, 1, total);
    cmd_ps = ps.command;
    std::filesystem::remove(fio_file);
    fio_ps[r] = ps.bytes_per_s;
    if (!ps.error.empty() && fio_error.empty()) fio_error = ps.error;
    runs.push_back({{"rep", r}, {"fio_psync_write_Bps", ps.bytes_per_s}});
  } else {
    ctx_.progress.Step("fio missing");
  }
}

// Diagnostics: the file tier's write path alone, and a pipelined writer made
// of the same parts, on the same objects.
void SpillSection::MeasureDiagnostics(int r) {
  for (size_t d = 0; d < diag_sizes.size(); ++d) {
    const uint64_t size = diag_sizes[d];
    ctx_.progress.Step("diagnostics, " + SizeName(size) + " objects");
    std::string e;
    diag_store[d][r] = FileTierStoreAlone(tier_dir, ctx_.pool, size, diag_total / size, 64 * kMiB, &e);
    if (!e.empty() && diag_error.empty()) diag_error = e;
    diag_pipe[d][r] = PipelinedWriterAlone(tier_dir, ctx_.pool, size, diag_total / size, &e);
    if (!e.empty() && diag_error.empty()) diag_error = e;
    runs.push_back({{"rep", r}, {"diag_object_bytes", size}, {"diag_store_alone_Bps", diag_store[d][r]},
                    {"diag_pipelined_writer_Bps", diag_pipe[d][r]}});
  }
}

void SpillSection::MeasureReferences(size_t s, int r, const char* order) {
  const uint64_t size = sizes[s];
  const size_t b = bs_index(size);
  {
    ctx_.progress.Step("FileIo write from 2 MiB pages, " + SizeName(size) + " objects");
    std::string e;
    huge_ws[s][r] = DiskWriteFromHugePages(o.dir + "/huge-write.dat", total, 32, &e);
    huge16_ws[s][r] = DiskWriteFromHugePages(o.dir + "/huge-write.dat", total, 16, &e);
    slab_ws[s][r] = DiskWriteSlabPattern(o.dir + "/huge-write.dat", total, &e);
    if (!e.empty() && huge_error.empty()) huge_error = e;
    runs.push_back({{"rep", r}, {"before_object_bytes", size}, {"fileio_write_huge_pages_Bps", huge_ws[s][r]},
                    {"fileio_write_huge_pages_qd16_Bps", huge16_ws[s][r]},
                    {"fileio_write_slab_pattern_Bps", slab_ws[s][r]}});
  }
  if (have_fio) {
    ctx_.progress.Step("fio references for " + SizeName(size) + " objects");
    FioResult w = RunFio(fio_file, "write", "io_uring", kMiB, 32, total);
    std::filesystem::remove(fio_file);
    FioResult w64 = RunFio(fio_file, "write", "io_uring", kMiB, 64, total);
    std::filesystem::remove(fio_file);
    // The same write made durable at its end, as the engine's figure is
    // (its time runs to the return of Flush, after fdatasync).
    FioResult wf = RunFio(fio_file, "write", "io_uring", kMiB, 32, total, 0, "--end_fsync=1");
    FioResult q = RunFio(fio_file, "randread", "io_uring", read_bs[b], kReaders, total, read_bytes_for(size));
    FioResult one = RunFio(fio_file, "randread", "psync", read_bs[b], 1, total, single_bytes_for(size));
    // The readers' own pattern (a diagnostic): kReaders threads, each
    // waiting on one read at a time, where the target's reference is one
    // thread keeping kReaders in flight.
    FioResult jobs =
        RunFio(fio_file, "randread", "psync", read_bs[b], 1, total, read_bytes_for(size), "", kReaders);
    // The single reader's reads as the file tier issues them (a
    // diagnostic): the object's read window, at its alignment.
    FioResult win;
    if (size <= kMiB) {
      const Window& w = windows[s];
      win = RunFio(fio_file, "randread", "psync", w.bytes, 1, total, single_bytes_for(size),
                   "--blockalign=" + std::to_string(w.align));
      cmd_r1w[s] = win.command;
      fio_r1w[s][r] = win.bytes_per_s;
    }
    std::filesystem::remove(fio_file);
    cmd_w = w.command, cmd_w64 = w64.command, cmd_wf = wf.command, cmd_rr[b] = q.command, cmd_r1[b] = one.command;
    cmd_rj[b] = jobs.command;
    fio_ws[s][r] = w.bytes_per_s, fio_w64s[s][r] = w64.bytes_per_s, fio_wfs[s][r] = wf.bytes_per_s;
    fio_rrs[s][r] = q.bytes_per_s, fio_r1s[s][r] = one.bytes_per_s, fio_rjs[s][r] = jobs.bytes_per_s;
    for (auto* f : {&w, &w64, &wf, &q, &one, &jobs, &win}) {
      if (!f->error.empty() && fio_error.empty()) fio_error = f->error;
    }
    runs.push_back({{"rep", r}, {"before_object_bytes", size}, {"order", order},
                    {"fio_uring_write_Bps", w.bytes_per_s},
                    {"fio_uring_write_qd64_Bps", w64.bytes_per_s}, {"fio_uring_write_end_fsync_Bps", wf.bytes_per_s},
                    {"fio_randread_" + std::to_string(read_bs[b]) + "_qd" + std::to_string(kReaders) + "_Bps",
                     q.bytes_per_s},
                    {"fio_psync_randread_" + std::to_string(read_bs[b]) + "_qd1_Bps", one.bytes_per_s},
                    {"fio_psync_randread_" + std::to_string(read_bs[b]) + "_" + std::to_string(kReaders) +
                         "jobs_Bps",
                     jobs.bytes_per_s},
                    {"fio_psync_randread_window_Bps", win.bytes_per_s}});
  } else {
    ctx_.progress.Step("");
  }
}

void SpillSection::MeasureEngine(size_t s, int r, const char* order) {
  const uint64_t size = sizes[s];
  const uint64_t count = std::max<uint64_t>(1, total / size);
  // A 64 MiB object cannot share a 64 MiB host tier with anything.
  const uint64_t host = std::max<uint64_t>(64 * kMiB, 2 * size);
  ctx_.progress.Step("spillway " + SizeName(size) + " x " + std::to_string(count));
  SpillRun sr = SpillObjects(tier_dir, ctx_.pool, size, count, host, read_bytes_for(size), single_bytes_for(size));
  if (sr.error.empty()) {
    wr[s][r] = sr.write_bps;
    rd[s][r] = sr.read_bps;
    rd1[s][r] = sr.single_read_bps;
    rd1raw[s][r] = sr.single_raw_bps;
    rdb[s][r] = sr.batch_read_bps;
  } else if (size_errors[s].empty()) {
    size_errors[s] = sr.error;
  }
  erase_us[s][r] = sr.erase_p50_us;
  disk_busy[s][r] = 100 * sr.disk.busy_fraction;
  disk_inflight[s][r] = sr.disk.inflight_mean_bytes / kMiB;
  if (sr.wall_s > 0) {
    put_wait[s][r] = 100 * sr.put_wait_s / sr.wall_s;
    put_cpu[s][r] = 100 * sr.put_cpu_s / sr.wall_s;
    batch_idle[s][r] = 100 * sr.batch_idle_s / sr.wall_s;
  }
  if (sr.read_s > 0 && sr.error.empty()) {
    read_cores[s][r] = (sr.read_user_s + sr.read_sys_s) / sr.read_s;
    read_sys_share[s][r] = 100 * sr.read_sys_s / (sr.read_user_s + sr.read_sys_s);
  }
  if (sr.single_read_objects > 0 && sr.error.empty()) {
    get1_us[s][r] = sr.single_read_s / sr.single_read_objects * 1e6;
    get1_io_us[s][r] = sr.single_read_io_s / sr.single_read_objects * 1e6;
    get1_wait_us[s][r] = (sr.single_read_io_s - sr.single_read_verify_in_io_s) / sr.single_read_objects * 1e6;
    touch1_us[s][r] = sr.single_touch_s / sr.single_read_objects * 1e6;
  }
  put_alone[s][r] = PutAlone(ctx_.pool, size, std::max<uint64_t>(1, std::min(count, diag_total / size)));
  runs.push_back({{"rep", r}, {"object_bytes", size}, {"order", order},
                  {"objects", count}, {"host_tier_bytes", host},
                  {"spill_Bps", sr.write_bps}, {"read_Bps", sr.read_bps}, {"single_read_Bps", sr.single_read_bps},
                  {"single_read_objects", sr.single_read_objects}, {"single_read_s", sr.single_read_s},
                  {"single_read_io_s", sr.single_read_io_s},
                  {"single_read_verify_in_io_s", sr.single_read_verify_in_io_s},
                  {"single_raw_Bps", sr.single_raw_bps}, {"single_raw_s", sr.single_raw_s},
                  {"single_touch_s", sr.single_touch_s},
                  {"batch_read_Bps", sr.batch_read_bps}, {"batch_read_objects", sr.batch_read_objects},
                  {"put_s", sr.put_s},
                  {"flush_s", sr.flush_s}, {"wall_s", sr.wall_s}, {"read_s", sr.read_s},
                  {"close_s", sr.close_s}, {"file_bytes", sr.file_bytes}, {"file_objects", sr.file_objects},
                  {"demoted_bytes", sr.demoted_bytes}, {"demoted_objects", sr.demoted_objects},
                  {"sync_demotions", sr.sync_demotions}, {"put_wait_s", sr.put_wait_s},
                  {"put_cpu_s", sr.put_cpu_s}, {"batch_idle_s", sr.batch_idle_s}, {"read_objects", sr.read_objects},
                  {"read_user_s", sr.read_user_s}, {"read_sys_s", sr.read_sys_s},
                  {"read_minor_faults", sr.read_minor_faults},
                  {"io_engine", sr.io_engine}, {"io_write_s", sr.io_write_s},
                  {"io_write_batches", sr.io_write_batches}, {"io_written_bytes", sr.io_written_bytes},
                  {"io_allocate_s", sr.io_allocate_s}, {"io_sync_s", sr.io_sync_s}, {"io_read_s", sr.io_read_s},
                  {"disk_busy_fraction", sr.disk.busy_fraction}, {"disk_idle_s", sr.disk.idle_s},
                  {"disk_idle_gaps", sr.disk.idle_gaps}, {"disk_inflight_mean_bytes", sr.disk.inflight_mean_bytes},
                  {"put_alone_Bps", put_alone[s][r]},
                  {"erase_p50_us", sr.erase_p50_us}, {"erase_punches", sr.erase_punches},
                  {"erase_punch_s", sr.erase_punch_s}, {"error", sr.error}});
}

void SpillSection::MeasurePeer(size_t s, int r) {
  const uint64_t size = sizes[s];
  ctx_.progress.Step("zict.File peer " + SizeName(size));
  if (have_peer) {
    const uint64_t pc = std::clamp<uint64_t>(std::min(peer_bytes, total) / size, 1, peer_files);
    PeerRun p = RunPeer(o, script, peer_dir, size, pc);
    if (p.error.empty()) {
      pw[s][r] = p.write_bps;
      pr[s][r] = p.read_bps;
      peer_impl = p.impl;
    } else if (peer_errors[s].empty()) {
      peer_errors[s] = p.error;
    }
    runs.push_back({{"rep", r}, {"peer_object_bytes", size}, {"peer_objects", pc},
                    {"peer_write_Bps", p.write_bps}, {"peer_read_Bps", p.read_bps}, {"error", p.error}});
  }
}

void RunSpillSection(Context& ctx) {
  SpillSection section(ctx);
  section.Measure();
  section.Report();
}

}  // namespace spillway::bench
