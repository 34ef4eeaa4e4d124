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
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "spillway/engine.h"
#include "codecs/codec.h"
#include "engine/stats_export.h"
#include "tiers/file_tier.h"
#include "spillway/file_io.h"
#include "tools/bench_common.h"

namespace spillway::cli::bench {
namespace {

constexpr int kReaders = 4;
// Objects each reader reads back at least (RunSpillSection says why).
constexpr uint64_t kMinReadObjects = 4;

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
                 int iodepth, uint64_t size, uint64_t io_size = 0, const std::string& extra = "", int numjobs = 1) {
  FioResult r;
  std::string cmd = "fio --name=ref --filename=" + ShellQuote(file) + " --rw=" + rw +
                    " --bs=" + std::to_string(bs) + " --iodepth=" + std::to_string(iodepth) +
                    " --ioengine=" + engine + " --direct=1 --numjobs=" + std::to_string(numjobs) +
                    " --size=" + std::to_string(size);
  if (numjobs > 1) cmd += " --group_reporting";
  if (io_size) cmd += " --io_size=" + std::to_string(io_size / numjobs) + " --runtime=10";
  if (!extra.empty()) cmd += " " + extra;
  r.command = cmd;
  cmd += " --output-format=json";
  int rc = 0;
  const std::string out = RunCapture(cmd, &rc);
  const size_t brace = out.find("\n{") != std::string::npos ? out.find("\n{") + 1 : out.find('{');
  if (rc != 0 || brace == std::string::npos) {
    r.error = "fio " + engine + " " + rw + " failed (exit " + std::to_string(rc) + "): " +
              out.substr(0, 200);
    return r;
  }
  try {
    auto j = nlohmann::json::parse(out.substr(brace));
    const auto& job = j.at("jobs").at(0);
    const auto& side = job.at(rw.find("read") != std::string::npos ? "read" : "write");
    r.bytes_per_s = side.at("bw_bytes").get<double>();
    if (job.value("error", 0) != 0) r.error = "fio reported error " + std::to_string(job.value("error", 0));
  } catch (const std::exception& e) {
    r.error = std::string("cannot parse fio output: ") + e.what();
  }
  return r;
}

std::string SpillKey(uint64_t i) {
  char k[32];
  std::snprintf(k, sizeof(k), "spill/%010llu", static_cast<unsigned long long>(i));
  return k;
}

const BoundaryStats* Down(const EngineStats& s, const std::string& from, const std::string& to) {
  for (const BoundaryStats& b : s.boundaries) {
    if (b.down && b.from == from && b.to == to) return &b;
  }
  return nullptr;
}

const TierStats* TierNamed(const EngineStats& s, const std::string& name) {
  for (const TierStats& t : s.tiers) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Forwards to the real FileIo, timing what the file tier asks of the OS, so
// the report can say where a spill's time went. With skip_punch set, hole
// punching is not forwarded: closing an engine frees every record, and the
// segment files are deleted right after anyway (see the report's notes on
// PunchHole for why that matters).
class TimedFileIo : public FileIoWrapper {
 public:
  explicit TimedFileIo(FileIo* target) : FileIoWrapper(target) {}
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    const double t = Now();
    Status st = target()->SubmitAndWait(r, qd);
    Count(r, t);
    return st;
  }
  // Forwarded (FileIoWrapper does not), so the file tier's streamed reads
  // overlap their checksum with the I/O here as they do without the wrapper.
  Status SubmitAndWaitEach(std::span<IoRequest> r, uint32_t qd, size_t max_ahead,
                           const std::function<void(size_t)>& done) override {
    const double t = Now();
    const bool read = !r.empty() && r[0].op == IoRequest::Op::kRead;
    // The caller's work on each request as it arrives (a streamed read's
    // checksum and copy) runs inside this call: timed apart, so the report
    // can tell the disk's time from the engine's.
    Status st = target()->SubmitAndWaitEach(r, qd, max_ahead, [&](size_t i) {
      const double tc = Now();
      done(i);
      if (read) read_callback_ns.fetch_add(static_cast<uint64_t>((Now() - tc) * 1e9), std::memory_order_relaxed);
    });
    Count(r, t);
    return st;
  }
  Status PunchHole(const FileHandle& f, uint64_t o, uint64_t l) override {
    if (skip_punch.load(std::memory_order_relaxed)) return Status::OK();
    const double t = Now();
    Status st = target()->PunchHole(f, o, l);
    punch_ns.fetch_add(static_cast<uint64_t>((Now() - t) * 1e9), std::memory_order_relaxed);
    punches.fetch_add(1, std::memory_order_relaxed);
    return st;
  }
  Status Allocate(const FileHandle& f, uint64_t o, uint64_t l) override {
    const double t = Now();
    Status st = target()->Allocate(f, o, l);
    allocate_ns.fetch_add(static_cast<uint64_t>((Now() - t) * 1e9), std::memory_order_relaxed);
    return st;
  }
  Status Sync(const FileHandle& f) override {
    const double t = Now();
    Status st = target()->Sync(f);
    sync_ns.fetch_add(static_cast<uint64_t>((Now() - t) * 1e9), std::memory_order_relaxed);
    return st;
  }

  void Count(std::span<const IoRequest> r, double since) {
    const uint64_t ns = static_cast<uint64_t>((Now() - since) * 1e9);
    const bool write = !r.empty() && r[0].op == IoRequest::Op::kWrite;
    (write ? write_ns : read_ns).fetch_add(ns, std::memory_order_relaxed);
    (write ? write_batches : read_batches).fetch_add(1, std::memory_order_relaxed);
    uint64_t bytes = 0;
    for (const IoRequest& q : r) bytes += q.len;
    (write ? write_bytes : read_bytes).fetch_add(bytes, std::memory_order_relaxed);
    if (write && record_writes.load(std::memory_order_relaxed)) {
      std::lock_guard<std::mutex> l(writes_mu);
      writes.push_back({since, Now(), static_cast<double>(bytes)});
    }
  }

  // The disk's write activity over [from, to], from the recorded
  // submissions: the share of the time at least one write was in flight,
  // the idle stretches between them, and the bytes in flight on average
  // while any was (each submission's bytes over its whole wait: an upper
  // bound while its requests complete one by one).
  DiskTimeline Timeline(double from, double to) {
    std::vector<std::array<double, 3>> w;
    {
      std::lock_guard<std::mutex> l(writes_mu);
      w = writes;
    }
    DiskTimeline d;
    if (w.empty() || to <= from) return d;
    std::sort(w.begin(), w.end());
    double busy = 0, byte_time = 0, start = w[0][0], end = w[0][1];
    for (const auto& x : w) {
      byte_time += x[2] * (x[1] - x[0]);
      if (x[0] > end) {
        busy += end - start;
        d.idle_gaps++;
        start = x[0];
      }
      end = std::max(end, x[1]);
    }
    busy += end - start;
    d.busy_fraction = busy / (to - from);
    d.idle_s = (to - from) - busy;
    d.inflight_mean_bytes = busy > 0 ? byte_time / busy : kNaN;
    return d;
  }

  std::atomic<bool> record_writes{false};
  std::mutex writes_mu;
  std::vector<std::array<double, 3>> writes;  // start, end (Now()), bytes of each write submission
  std::atomic<bool> skip_punch{false};
  std::atomic<uint64_t> write_ns{0}, read_ns{0}, write_batches{0}, read_batches{0}, write_bytes{0}, read_bytes{0};
  std::atomic<uint64_t> punch_ns{0}, punches{0}, allocate_ns{0}, sync_ns{0};
  std::atomic<uint64_t> read_callback_ns{0};  // within read_ns: the caller's work on arrived requests
};

}  // namespace

// Reads `bytes` at a time as fio psync does: one request of `unit` bytes
// after another, each at a random offset aligned to `unit`, from what the
// segment files of a file tier's directory hold (O_DIRECT, the POSIX
// FileIo). Segments are preallocated whole, and reading space never written
// costs no disk I/O, so only the files' data ranges are read
// (FileIo::NextData / NextHole: lseek's SEEK_DATA / SEEK_HOLE, which report
// unwritten extents as holes on ext4 and XFS; elsewhere the whole file
// counts as data). It reads into a 2 MiB page, as the file tier does
// (io_buffer_cache.h), where fio reads into 4 KiB pages.
class RawReader {
 public:
  RawReader(const std::string& dir, uint64_t unit) : io_(MakeFileIo(IoEngine::kPosix)), unit_(unit) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      if (e.path().extension() != ".spw") continue;
      OpenOptions oo;
      auto f = io_->Open(e.path().string(), oo);
      if (!f.ok()) continue;
      handles_.push_back(*f);
      auto end = io_->FileSize(*f);
      if (!f->direct || !end.ok()) continue;
      for (uint64_t at = 0; at < *end;) {
        auto data = io_->NextData(*f, at);
        if (!data.ok() || *data >= *end) break;
        auto hole = io_->NextHole(*f, *data);
        const uint64_t stop = hole.ok() ? *hole : *end;
        if (stop <= *data) break;
        // Whole units inside [data, stop).
        const uint64_t first = (*data + unit_ - 1) / unit_, last = stop / unit_;
        if (last > first) {
          ranges_.push_back({handles_.size() - 1, first, last - first});
          units_ += last - first;
        }
        at = stop;
      }
    }
    // In a 2 MiB page, as the file tier reads, touched here: the first touch
    // of fresh memory is not the disk's time (on the development VM a fresh
    // 2 MiB buffer's first touch took 0.4 ms in one process and 55 ms in the
    // next; a 128-read reference of 1 MiB blocks takes 60-110 ms).
    const uint64_t buf_bytes = std::max(unit_, kHugeIoBytes);
    buf_ = IoBuffer(buf_bytes);
    if (buf_) std::memset(buf_.get(), 0, buf_bytes);
  }
  ~RawReader() {
    for (auto& h : handles_) (void)io_->Close(h);
  }
  bool ok() const { return units_ >= 2 && buf_; }
  // False on a failed read. `touch_s` (non-null): after each block arrives,
  // one byte of each of its 64-byte lines is read, and the seconds that
  // takes are added there (they are in this call's time too).
  bool Read(uint64_t bytes, double* touch_s = nullptr) {
    for (uint64_t done = 0; done < bytes; done += unit_) {
      uint64_t pick = rng_() % units_;
      const Range* r = ranges_.data();
      while (pick >= r->units) pick -= (r++)->units;
      if (!io_->Read(handles_[r->file], (r->first + pick) * unit_, buf_.get(), unit_).ok()) return false;
      if (touch_s != nullptr) {
        const double t0 = Now();
        unsigned char x = 0;
        const auto* p = reinterpret_cast<const volatile unsigned char*>(buf_.get());
        for (uint64_t i = 0; i < unit_; i += 64) x ^= p[i];
        sink_ ^= x;
        *touch_s += Now() - t0;
      }
    }
    return true;
  }

 private:
  struct Range {
    size_t file;                  // index into handles_
    uint64_t first = 0, units = 0;  // in `unit`s from the file's start
  };
  std::unique_ptr<FileIo> io_;
  uint64_t unit_;
  std::vector<FileHandle> handles_;
  std::vector<Range> ranges_;
  uint64_t units_ = 0;
  IoBuffer buf_;
  std::mt19937_64 rng_{12345};
  unsigned char sink_ = 0;  // keeps the touches
};

SpillRun SpillObjects(const std::string& dir, const DataPool& pool, uint64_t size, uint64_t count,
                      uint64_t host_bytes, uint64_t read_bytes, uint64_t single_read_bytes) {
  SpillRun r;
  const uint64_t file_bytes = count * (size + 8 * kKiB) + kGiB;
  const Config config = SpillChain(dir, host_bytes, file_bytes);
  std::unique_ptr<FileIo> base = MakeFileIo(config.tiers[1].io.engine);
  TimedFileIo io(base.get());
  r.io_engine = base->name();
  EngineOptions eo;
  eo.file_io = &io;
  auto opened = Engine::Open(config, eo);
  if (!opened.ok()) {
    r.error = opened.status().ToString();
    return r;
  }
  std::unique_ptr<Engine> engine = std::move(*opened);
  auto close = [&] {
    io.skip_punch = true;
    const double tc = Now();
    engine.reset();
    r.close_s = Now() - tc;
  };
  io.record_writes = true;
  const EngineStats stats_before = engine->Stats();
  const TierStats* host_before = TierNamed(stats_before, "host");
  const uint64_t idle_before = host_before ? host_before->demotion_idle_ns : 0;
  const double cpu0 = ThreadCpuSeconds();
  const double t0 = Now();
  for (uint64_t i = 0; i < count; ++i) {
    Status st = engine->Put(SpillKey(i), pool.Slice(i, size));
    if (!st.ok()) {
      r.error = "put " + SpillKey(i) + ": " + st.ToString();
      close();
      return r;
    }
  }
  const double t1 = Now();
  Status st = engine->Flush();
  const double t2 = Now();
  r.put_cpu_s = ThreadCpuSeconds() - cpu0;
  if (!st.ok()) {
    r.error = "flush: " + st.ToString();
    close();
    return r;
  }
  io.record_writes = false;
  r.disk = io.Timeline(t0, t2);
  r.put_s = t1 - t0;
  r.flush_s = t2 - t1;
  r.wall_s = t2 - t0;
  r.io_write_s = io.write_ns.load() / 1e9;
  r.io_write_batches = io.write_batches.load();
  r.io_written_bytes = io.write_bytes.load();
  r.io_allocate_s = io.allocate_ns.load() / 1e9;
  r.io_sync_s = io.sync_ns.load() / 1e9;
  EngineStats stats = engine->Stats();
  if (const BoundaryStats* b = Down(stats, "host", "file")) {
    r.demoted_bytes = b->bytes;
    r.demoted_objects = b->objects;
  }
  const TierStats* ft = TierNamed(stats, "file");
  r.file_bytes = ft ? ft->raw_bytes_written : 0;
  r.file_objects = ft ? ft->objects : 0;
  r.sync_demotions = stats.sync_demotions;
  r.put_wait_s = stats.backpressure_wait_ns / 1e9;
  if (const TierStats* ht = TierNamed(stats, "host")) r.batch_idle_s = (ht->demotion_idle_ns - idle_before) / 1e9;
  r.write_bps = r.wall_s > 0 ? r.file_bytes / r.wall_s : kNaN;
  const uint64_t hits_before = ft ? ft->hits : 0;
  if (read_bytes == 0) {
    close();
    return r;
  }

  // The oldest objects are read back, up to `read_bytes`: the LRU demoted
  // them first, so all of them are in the file tier (checked below).
  const uint64_t n = std::min<uint64_t>(r.file_objects, std::max<uint64_t>(1, read_bytes / size));
  std::atomic<uint64_t> bad{0};
  std::atomic<bool> failed{false};
  std::string first_error;
  std::mutex mu;
  // Counts object `i` as bad unless `h` holds exactly its source's bytes.
  auto check = [&](const Handle& h, uint64_t i) {
    const auto want = pool.Slice(i, size);
    if (h.size() != size || h.num_buffers() != 1 || std::memcmp(h.buffer(0).data(), want.data(), size) != 0) {
      bad.fetch_add(1, std::memory_order_relaxed);
    }
  };
  // Objects [begin, end) read by `threads` threads, each compared with its source.
  // `get_s` (non-null): the seconds spent inside Get, summed (the single
  // reader's figure: its comparison with its source runs between Gets and is
  // not the engine's time, where with four readers the others' reads overlap it).
  // `between` (single-threaded use only): called after each Get and its
  // comparison, outside the Get's time.
  auto read_range = [&](uint64_t begin_all, uint64_t end_all, int threads, double* get_s = nullptr,
                        const std::function<void()>& between = nullptr) {
    std::vector<std::thread> readers;
    for (int t = 0; t < threads; ++t) {
      readers.emplace_back([&, t] {
        const uint64_t span = end_all - begin_all;
        const uint64_t begin = begin_all + span * t / threads, end = begin_all + span * (t + 1) / threads;
        for (uint64_t i = begin; i < end && !failed.load(std::memory_order_relaxed); ++i) {
          const double tg = get_s ? Now() : 0;
          auto h = engine->Get(SpillKey(i));
          if (get_s) *get_s += Now() - tg;
          if (!h.ok()) {
            failed = true;
            std::lock_guard<std::mutex> l(mu);
            if (first_error.empty()) first_error = "get " + SpillKey(i) + ": " + h.status().ToString();
            return;
          }
          check(*h, i);
          if (between) between();
        }
      });
    }
    for (auto& th : readers) th.join();
  };
  const double t3 = Now();
  struct rusage ru0 {}, ru1 {};
  ::getrusage(RUSAGE_SELF, &ru0);
  read_range(0, n, kReaders);
  r.read_s = Now() - t3;
  ::getrusage(RUSAGE_SELF, &ru1);
  auto secs = [](const timeval& a, const timeval& b) { return (b.tv_sec - a.tv_sec) + (b.tv_usec - a.tv_usec) / 1e6; };
  r.read_user_s = secs(ru0.ru_utime, ru1.ru_utime);
  r.read_sys_s = secs(ru0.ru_stime, ru1.ru_stime);
  r.read_minor_faults = static_cast<uint64_t>(ru1.ru_minflt - ru0.ru_minflt);
  if (failed) {
    r.error = first_error;
    close();
    return r;
  }
  stats = engine->Stats();
  ft = TierNamed(stats, "file");
  r.file_hits = (ft ? ft->hits : 0) - hits_before;
  r.read_objects = n;
  r.read_bps = r.read_s > 0 ? static_cast<double>(r.file_hits) * size / r.read_s : kNaN;
  // One reader over the next spilled objects: latency at depth one.
  const uint64_t n1 = single_read_bytes == 0 || r.file_objects <= n
                          ? 0 : std::min<uint64_t>(r.file_objects - n, std::max<uint64_t>(1, single_read_bytes / size));
  if (n1 > 0) {
    const uint64_t hits1 = ft ? ft->hits : 0;
    double get_s = 0;
    const uint64_t io_ns0 = io.read_ns.load(), cb_ns0 = io.read_callback_ns.load();
    // The same-seconds reference: after each Get, the same bytes read with
    // pread (POSIX FileIo, O_DIRECT) from the tier's segment files.
    RawReader raw(dir, std::min<uint64_t>(size, kMiB));
    double raw_s = 0, touch_s = 0;
    bool raw_ok = raw.ok();
    read_range(n, n + n1, 1, &get_s, [&] {
      if (!raw_ok) return;
      const double tr = Now(), touched = touch_s;
      raw_ok = raw.Read(size, &touch_s);
      raw_s += Now() - tr - (touch_s - touched);
    });
    if (raw_ok && raw_s > 0) {
      r.single_raw_s = raw_s;
      r.single_raw_bps = static_cast<double>(n1) * size / raw_s;
      r.single_touch_s = touch_s;
    }
    r.single_read_s = get_s;
    r.single_read_io_s = (io.read_ns.load() - io_ns0) / 1e9;
    r.single_read_verify_in_io_s = (io.read_callback_ns.load() - cb_ns0) / 1e9;
    if (failed) {
      r.error = first_error;
      close();
      return r;
    }
    stats = engine->Stats();
    ft = TierNamed(stats, "file");
    const uint64_t served = (ft ? ft->hits : 0) - hits1;
    r.single_read_objects = n1;
    r.single_read_bps = r.single_read_s > 0 ? static_cast<double>(served) * size / r.single_read_s : kNaN;
    if (served != n1) {
      r.error += (r.error.empty() ? "" : "; ") + std::to_string(served) + " of " + std::to_string(n1) +
                 " single-reader reads came from the file tier";
    }
  }
  // One thread reading kReaders keys per Acquire, over the next spilled
  // objects: the file tier reads their records in one submission, so the
  // disk sees fio's own pattern for the readers' reference (one job at depth
  // kReaders) where the four readers above are four threads at depth one.
  // Nothing is promoted (policy.promote_on_read is off); each call's bytes
  // are compared with their sources after the timed call, and its handles
  // released before the next. Needs kMinReadObjects calls' worth of objects
  // left (not the case for 64 MiB objects).
  const uint64_t used_objects = n + r.single_read_objects;
  const uint64_t left = r.file_objects > used_objects ? r.file_objects - used_objects : 0;
  const uint64_t nb = std::min<uint64_t>(left, std::max<uint64_t>(1, read_bytes / size)) / kReaders * kReaders;
  if (!failed && nb >= kReaders * kMinReadObjects) {
    stats = engine->Stats();
    ft = TierNamed(stats, "file");
    const uint64_t hitsb = ft ? ft->hits : 0;
    double acquire_s = 0;
    std::vector<std::string> keys(kReaders);
    for (uint64_t i = used_objects; i < used_objects + nb && r.error.empty(); i += kReaders) {
      for (int k = 0; k < kReaders; ++k) keys[k] = SpillKey(i + k);
      const double ta = Now();
      auto hs = engine->Acquire(keys, Where::kHost);
      acquire_s += Now() - ta;
      if (!hs.ok()) {
        r.error = "acquire " + keys[0] + "...: " + hs.status().ToString();
        break;
      }
      for (int k = 0; k < kReaders; ++k) check((*hs)[k], i + k);
    }
    stats = engine->Stats();
    ft = TierNamed(stats, "file");
    const uint64_t served = (ft ? ft->hits : 0) - hitsb;
    r.batch_read_objects = nb;
    r.batch_read_bps = acquire_s > 0 ? static_cast<double>(served) * size / acquire_s : kNaN;
    if (served != nb && r.error.empty()) {
      r.error = std::to_string(served) + " of " + std::to_string(nb) + " batched reads came from the file tier";
    }
  }
  r.bad = bad.load();
  r.io_read_s = io.read_ns.load() / 1e9;
  if (r.bad) r.error = std::to_string(r.bad) + " objects read back wrong";
  if (r.file_hits != n) {
    r.error += (r.error.empty() ? "" : "; ") + std::to_string(r.file_hits) + " of " + std::to_string(n) +
               " reads came from the file tier";
  }

  // Erase a sample of spilled objects: the cost of freeing a record.
  const uint64_t erase_n = std::min<uint64_t>(r.file_objects, 64);
  std::vector<double> lat;
  const uint64_t punches0 = io.punches.load(), punch_ns0 = io.punch_ns.load();
  for (uint64_t i = 0; i < erase_n; ++i) {
    const double te = Now();
    Status es = engine->Erase(SpillKey(i));
    lat.push_back((Now() - te) * 1e6);
    if (!es.ok() && r.error.empty()) r.error = "erase " + SpillKey(i) + ": " + es.ToString();
  }
  r.erase_p50_us = Median(lat);
  r.erase_punches = io.punches.load() - punches0;
  r.erase_punch_s = (io.punch_ns.load() - punch_ns0) / 1e9;
  close();
  return r;
}

namespace {

// The caller's side alone: `count` Puts of `size` into a host-only engine
// with room for all of them (nothing demotes), raw bytes / time. The most
// a single caller's Puts can move, whatever the disk does.
double PutAlone(const DataPool& pool, uint64_t size, uint64_t count) {
  Config c;
  c.source = "<spillway bench: Put alone>";
  c.tiers.push_back(BenchHostTier(count * (size + kKiB) + 64 * kMiB));
  auto opened = Engine::Open(c, EngineOptions{});
  if (!opened.ok()) return kNaN;
  std::unique_ptr<Engine> engine = std::move(*opened);
  auto put_all = [&] {
    for (uint64_t i = 0; i < count; ++i) {
      if (!engine->Put(SpillKey(i), pool.Slice(i, size)).ok()) return false;
    }
    return true;
  };
  // An untimed pass first, then erased: the timed Puts get memory the
  // process has touched before, as a spill's Puts do once its first objects
  // have been demoted (in a VM a page's first touch can cost more than its copy).
  if (!put_all()) return kNaN;
  for (uint64_t i = 0; i < count; ++i) (void)engine->Erase(SpillKey(i));
  const double t0 = Now();
  if (!put_all()) return kNaN;
  const double s = Now() - t0;
  return s > 0 ? static_cast<double>(count) * size / s : kNaN;
}

// The file tier alone: FileTier::Store of `count` host objects of `size`
// bytes in batches of `batch_bytes` (the mover's pass is at most 64 MiB), no
// engine, no mover. Separates what the tier's write path reaches from what
// the engine's demotion pipeline around it costs. Returns bytes/s.
double FileTierStoreAlone(const std::string& dir, const DataPool& pool, uint64_t size, uint64_t count,
                          uint64_t batch_bytes, std::string* error) {
  Config c = SpillChain(dir, 64 * kMiB, count * (size + 8 * kKiB) + kGiB);
  std::unique_ptr<FileIo> base = MakeFileIo(c.tiers[1].io.engine);
  TimedFileIo io(base.get());
  FileTier tier(c.tiers[1], 1, &io, nullptr);
  Status st = tier.Open();
  if (!st.ok()) {
    *error = st.ToString();
    return kNaN;
  }
  std::vector<std::string> keys(count);
  std::vector<std::span<const std::byte>> bufs(count);
  std::vector<ObjectView> views(count);
  for (uint64_t i = 0; i < count; ++i) {
    keys[i] = SpillKey(i);
    bufs[i] = pool.Slice(i, size);
    views[i] = ObjectView{keys[i], std::span<const std::span<const std::byte>>(&bufs[i], 1)};
  }
  std::vector<Location> locs;
  const uint64_t per_batch = std::max<uint64_t>(1, batch_bytes / size);
  const double t0 = Now();
  for (uint64_t i = 0; i < count && error->empty(); i += per_batch) {
    auto batch = std::span<const ObjectView>(views).subspan(i, std::min(per_batch, count - i));
    for (const ObjectView& v : batch) tier.ForceReserve(tier.ReserveEstimate(v));
    auto l = tier.Store(batch);
    if (!l.ok()) *error = l.status().ToString();
    else locs.insert(locs.end(), l->begin(), l->end());
  }
  st = tier.Sync();
  const double secs = Now() - t0;
  if (!st.ok() && error->empty()) *error = st.ToString();
  io.skip_punch = true;
  for (Location& l : locs) tier.Free(l);
  return error->empty() && secs > 0 ? count * size / secs : kNaN;
}

// What the same building blocks reach when slabs are pipelined: writer
// threads each encode a 4 MiB slab of records (EncodeRecord, codec none, as
// FileTier::WriteSlab does) and submit it, so that while one slab is being
// encoded the others are on the disk and up to 32 1 MiB requests stay in
// flight (never more: 4 per writer); space is preallocated in 64 MiB steps
// as the tier does. Evidence
// for the proposed fix of the tier's write path; not a spillway figure.
double PipelinedWriterAlone(const std::string& dir, const DataPool& pool, uint64_t size, uint64_t count,
                            std::string* error) {
  constexpr int kWriters = 8;
  constexpr uint64_t kSlab = 4 * kMiB, kPrealloc = 64 * kMiB;
  std::filesystem::create_directories(dir);
  std::unique_ptr<FileIo> io = MakeFileIo(IoEngine::kAuto);
  OpenOptions oo;
  oo.create = true;
  oo.write = true;
  auto f = io->Open(dir + "/pipelined.dat", oo);
  if (!f.ok()) {
    *error = f.status().ToString();
    return kNaN;
  }
  auto codec = MakeCodec(CodecConfig{});
  const CodecConfig cc;
  const uint64_t rec_max = MaxRecordSize(16, 1, size, *codec, cc);
  const uint64_t per_slab = std::max<uint64_t>(1, kSlab / rec_max);
  std::atomic<uint64_t> next{0}, seq{1};
  std::mutex mu;  // guards end and allocated
  uint64_t end = 0, allocated = 0;
  std::string first_error;
  const double t0 = Now();
  std::vector<std::thread> ts;
  for (int w = 0; w < kWriters; ++w) {
    ts.emplace_back([&] {
      const uint64_t cap = (per_slab * rec_max + kIoAlign - 1) / kIoAlign * kIoAlign;
      IoBuffer slab(cap);  // as the tier's slab buffers: in 2 MiB pages
      std::byte* const buf = slab.get();
      if (buf == nullptr) {
        std::lock_guard<std::mutex> l(mu);
        if (first_error.empty()) first_error = "out of memory for a slab buffer";
        return;
      }
      std::vector<IoRequest> reqs;
      for (;;) {
        const uint64_t first = next.fetch_add(per_slab);
        if (first >= count) break;
        const uint64_t n = std::min(per_slab, count - first);
        uint64_t off = 0;
        for (uint64_t i = first; i < first + n; ++i) {
          const std::string key = SpillKey(i);
          std::span<const std::byte> b[1] = {pool.Slice(i, size)};
          auto len = EncodeRecord(ObjectView{key, b}, seq.fetch_add(1), *codec, cc,
                                  std::span<std::byte>(buf + off, cap - off));
          if (!len.ok()) {
            std::lock_guard<std::mutex> l(mu);
            if (first_error.empty()) first_error = len.status().ToString();
            break;
          }
          off += *len;
        }
        const uint64_t len = (off + kIoAlign - 1) / kIoAlign * kIoAlign;
        std::memset(buf + off, 0, len - off);
        uint64_t base;
        {
          std::lock_guard<std::mutex> l(mu);
          base = end;
          end += len;
          if (end > allocated) {
            const uint64_t want = std::max(end - allocated, kPrealloc);
            if (io->Allocate(*f, allocated, want).ok()) allocated += want;
          }
        }
        reqs.clear();
        for (uint64_t d = 0; d < len; d += kMiB) {
          IoRequest r;
          r.op = IoRequest::Op::kWrite;
          r.file = &*f;
          r.offset = base + d;
          r.buf = buf + d;
          r.len = std::min<uint64_t>(kMiB, len - d);
          reqs.push_back(r);
        }
        // 8 writers x 4 requests: at most 32 in flight, fio's queue depth.
        Status st = io->SubmitAndWait(reqs, 4);
        if (!st.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (first_error.empty()) first_error = st.ToString();
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  Status st = io->Sync(*f);
  const double secs = Now() - t0;
  (void)io->Close(*f);
  std::filesystem::remove(dir + "/pipelined.dat");
  if (!st.ok() && first_error.empty()) first_error = st.ToString();
  *error = first_error;
  return first_error.empty() && secs > 0 ? count * size / secs : kNaN;
}

// The disk's write ceiling for buffers in 2 MiB pages, as the file tier's
// are (io_buffer_cache.h): the project's FileIo (io_uring where available)
// writing `total` bytes sequentially in 1 MiB O_DIRECT requests, 32 in
// flight, into a preallocated file (fio's reference lays its file out
// first too). fio's own buffers are 4 KiB pages, and on the development VM
// its reference writes 1.9-2.6 GB/s where this one writes 3.5 GB/s
// (2026-12-05): a second, stricter ceiling beside fio's. `depth` 1 MiB
// requests in flight: 32 (fio's) and 16, the most a spill keeps in flight
// (DemotionPolicy: two 8 MiB slabs), which tells the disk's answer to that
// depth apart from the engine's own gaps.
double DiskWriteFromHugePages(const std::string& file, uint64_t total, uint32_t depth, std::string* error) {
  std::unique_ptr<FileIo> io = MakeFileIo(IoEngine::kAuto);
  OpenOptions oo;
  oo.create = true;
  oo.write = true;
  auto f = io->Open(file, oo);
  if (!f.ok()) {
    *error = f.status().ToString();
    return kNaN;
  }
  const uint32_t kDepth = depth;
  IoBuffer ring(kDepth * kMiB);
  Status st = ring ? io->Allocate(*f, 0, total) : Status::NoSpace("out of memory for the write ring");
  double secs = 0;
  if (st.ok()) {
    std::memset(ring.get(), 0x5a, kDepth * kMiB);
    std::vector<IoRequest> reqs(total / kMiB);
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].op = IoRequest::Op::kWrite;
      reqs[i].file = &*f;
      reqs[i].offset = i * kMiB;
      reqs[i].buf = ring.get() + (i % kDepth) * kMiB;
      reqs[i].len = kMiB;
    }
    const double t0 = Now();
    st = io->SubmitAndWaitEach(reqs, kDepth, kDepth, [](size_t) {});
    secs = Now() - t0;
    for (const IoRequest& r : reqs) {
      if (st.ok() && r.result != static_cast<ssize_t>(kMiB)) st = Status::IOError("short write");
    }
  }
  (void)io->Close(*f);
  std::error_code ec;
  std::filesystem::remove(file, ec);
  if (!st.ok()) {
    *error = "FileIo write from 2 MiB pages: " + st.ToString();
    return kNaN;
  }
  return secs > 0 ? (total / kMiB) * kMiB / secs : kNaN;
}

// The disk's answer to the spill's own write pattern: the same FileIo and
// preallocated file as DiskWriteFromHugePages, written in 8 MiB slabs of
// 1 MiB requests, two slabs at once (FileTier::kSlabWritesOnDisk), each
// slab one SubmitAndWait whose requests are all done before its writer
// takes the next: as FileTier::WriteSlab does, where fio and the QD16
// reference refill each request as it completes.
double DiskWriteSlabPattern(const std::string& file, uint64_t total, std::string* error) {
  constexpr uint64_t kSlab = 8 * kMiB;
  constexpr int kSlabsAtOnce = 2;
  std::unique_ptr<FileIo> io = MakeFileIo(IoEngine::kAuto);
  OpenOptions oo;
  oo.create = true;
  oo.write = true;
  auto f = io->Open(file, oo);
  if (!f.ok()) {
    *error = f.status().ToString();
    return kNaN;
  }
  IoBuffer ring(kSlabsAtOnce * kSlab);
  Status st = ring ? io->Allocate(*f, 0, total) : Status::NoSpace("out of memory for the slabs");
  const uint64_t slabs = total / kSlab;
  double secs = 0;
  if (st.ok()) {
    std::memset(ring.get(), 0x5a, kSlabsAtOnce * kSlab);
    std::atomic<uint64_t> next{0};
    std::mutex mu;
    auto writer = [&](int w) {
      for (uint64_t k; (k = next.fetch_add(1)) < slabs;) {
        std::vector<IoRequest> reqs(kSlab / kMiB);
        for (size_t i = 0; i < reqs.size(); ++i) {
          reqs[i].op = IoRequest::Op::kWrite;
          reqs[i].file = &*f;
          reqs[i].offset = k * kSlab + i * kMiB;
          reqs[i].buf = ring.get() + w * kSlab + i * kMiB;
          reqs[i].len = kMiB;
        }
        Status s = io->SubmitAndWait(reqs, 32);
        for (const IoRequest& r : reqs) {
          if (s.ok() && r.result != static_cast<ssize_t>(kMiB)) s = Status::IOError("short write");
        }
        if (!s.ok()) {
          std::lock_guard<std::mutex> l(mu);
          if (st.ok()) st = s;
          next.store(slabs);
          return;
        }
      }
    };
    const double t0 = Now();
    std::vector<std::thread> writers;
    for (int w = 1; w < kSlabsAtOnce; ++w) writers.emplace_back(writer, w);
    writer(0);
    for (std::thread& t : writers) t.join();
    secs = Now() - t0;
  }
  (void)io->Close(*f);
  std::error_code ec;
  std::filesystem::remove(file, ec);
  if (!st.ok()) {
    *error = "FileIo write in slabs: " + st.ToString();
    return kNaN;
  }
  return secs > 0 ? slabs * kSlab / secs : kNaN;
}

struct PeerRun {
  double write_bps = kNaN, read_bps = kNaN;
  uint64_t count = 0;
  std::string impl, error;
};

PeerRun RunPeer(const Options& o, const std::string& script, const std::string& dir, uint64_t size,
                uint64_t count) {
  PeerRun p;
  p.count = count;
  int rc = 0;
  const std::string out = RunCapture(ShellQuote(o.python) + " " + ShellQuote(script) + " --dir " +
                                         ShellQuote(dir) + " --size " + std::to_string(size) +
                                         " --count " + std::to_string(count),
                                     &rc);
  const size_t brace = out.rfind("\n{") != std::string::npos ? out.rfind("\n{") + 1 : out.find('{');
  if (rc != 0 || brace == std::string::npos) {
    p.error = "peer failed (exit " + std::to_string(rc) + "): " + out.substr(0, 300);
    return p;
  }
  try {
    auto j = nlohmann::json::parse(out.substr(brace));
    p.write_bps = j.at("write_bytes_per_s").get<double>();
    p.read_bps = j.at("read_bytes_per_s").get<double>();
    p.impl = j.value("impl", "");
    if (j.value("bad", 0) != 0) p.error = "peer read back wrong bytes";
  } catch (const std::exception& e) {
    p.error = std::string("cannot parse peer output: ") + e.what();
  }
  return p;
}

double Ratio(double a, double b) { return (a > 0 && b > 0) ? a / b : kNaN; }

}  // namespace

void RunSpillSection(Context& ctx) {
  const Options& o = ctx.options;
  Report& rep = ctx.report;
  const std::vector<uint64_t> sizes = {4 * kKiB, 64 * kKiB, kMiB, 64 * kMiB};
  const uint64_t total = o.quick ? 512 * kMiB : 2 * kGiB;
  const int reps = o.Reps();
  const bool peer = o.Runs(5);
  const bool have_fio = HaveProgram("fio");
  const std::string script = ctx.source_dir.empty() ? "" : ctx.source_dir + "/bench/zict_peer.py";
  const bool have_peer = peer && !script.empty() && HaveProgram(o.python);
  // The peer writes one file per object at Python speed: cap its share.
  const uint64_t peer_bytes = o.quick ? 128 * kMiB : 512 * kMiB;
  const uint64_t peer_files = o.quick ? 1024 : 4096;

  std::filesystem::create_directories(o.dir);
  const std::string fio_file = o.dir + "/fio.dat";
  const std::string tier_dir = o.dir + "/tier";
  const std::string peer_dir = o.dir + "/peer";
  ctx.progress.Begin("1 host->file", o.quick ? 0.3 : 0.3, reps * (1 + 3 + static_cast<int>(sizes.size()) * (peer ? 4 : 3)));

  std::vector<double> fio_ps(reps, kNaN);
  // Read references, one per block size an object is read in (the object's
  // size, 1 MiB for larger ones): fio randread at queue depth kReaders
  // (io_uring) and at depth one (psync), on a file of `total` bytes, larger
  // than the engine's memory tiers.
  const std::vector<uint64_t> read_bs = {4 * kKiB, 64 * kKiB, kMiB};
  auto bs_index = [&](uint64_t size) {
    for (size_t i = 0; i < read_bs.size(); ++i) {
      if (size <= read_bs[i]) return i;
    }
    return read_bs.size() - 1;
  };
  std::string cmd_w, cmd_w64, cmd_wf, cmd_ps;
  std::vector<std::string> cmd_rr(read_bs.size()), cmd_r1(read_bs.size()), cmd_rj(read_bs.size());
  const size_t ns = sizes.size();
  std::vector<std::vector<double>> wr(ns, std::vector<double>(reps, kNaN)), rd = wr, rd1 = wr, get1_us = wr, touch1_us = wr,
                                   get1_io_us = wr, get1_wait_us = wr, rdb = wr, rd1raw = wr, pw = wr, pr = wr,
                                   erase_us = wr, put_alone = wr, disk_busy = wr, disk_inflight = wr,
                                   put_wait = wr, put_cpu = wr, batch_idle = wr, read_cores = wr,
                                   read_sys_share = wr;
  // References per object size and repetition, each measured right before
  // or right after that size's engine run: fio io_uring write at depth 32 (the target's
  // ceiling) and 64, the depth-32 write with --end_fsync=1, fio randread at
  // the size's block size.
  std::vector<std::vector<double>> fio_ws = wr, fio_w64s = wr, fio_wfs = wr, fio_rrs = wr, fio_r1s = wr, fio_rjs = wr;
  // The FileIo write from 2 MiB pages (DiskWriteFromHugePages), beside fio's.
  std::vector<std::vector<double>> huge_ws = wr, huge16_ws = wr, slab_ws = wr;
  std::string huge_error;
  std::vector<std::string> size_errors(ns), peer_errors(ns);
  std::string fio_error, peer_impl, diag_error;
  const std::vector<uint64_t> diag_sizes = {4 * kKiB, kMiB, 64 * kMiB};
  std::vector<std::vector<double>> diag_store(diag_sizes.size(), std::vector<double>(reps, kNaN)), diag_pipe = diag_store;
  const uint64_t diag_total = std::min<uint64_t>(total, 512 * kMiB);
  const uint64_t read_cap = o.quick ? 128 * kMiB : 512 * kMiB;
  const uint64_t single_cap = read_cap / 4;
  // Bytes read back per object size (fio's references read as much): at
  // least kMinReadObjects objects per reader, at most half (the single
  // reader a quarter) of what was written. A read-back of two 64 MiB objects
  // per reader measured mostly the process's first touches of its buffers
  // and the disk's moment: on the development machine (2026-12-04, idle) four
  // readers of 4 x 64 MiB each ran at 1.27-1.71 GB/s against fio's 1.29-1.69
  // in the same minute, where the bench's 2 x 64 MiB had shown 0.69x.
  auto read_bytes_for = [&](uint64_t size) {
    return std::min(std::max(read_cap, kReaders * kMinReadObjects * size), total / 2);
  };
  auto single_bytes_for = [&](uint64_t size) {
    return std::min(std::max(single_cap, 2 * kMinReadObjects * size), total / 4);
  };
  // The read window a file tier reads for one spilled object of `size` bytes
  // (objects read in one request: up to 1 MiB here), for a record starting
  // mid-block: its length and the alignment of its offsets. The file tier's
  // rule (ReadWindowBounds) on this filesystem's direct-read alignment: a
  // 4 KiB object reads 4.5 KiB at 512-byte offsets on a disk of 512-byte
  // logical blocks, a 64 KiB object 68 KiB at 4 KiB offsets.
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
  struct Window {
    uint64_t bytes = 0, align = 0;
  };
  std::vector<Window> windows(ns);
  {
    const auto codec = MakeCodec(CodecConfig{});
    for (size_t s = 0; s < ns; ++s) {
      const uint64_t len = MaxRecordSize(SpillKey(0).size(), 1, sizes[s], *codec, CodecConfig{});
      const uint64_t offset = 64 * kIoAlign + kIoAlign / 2;
      uint64_t start = 0, end = 0;
      ReadWindowBounds(offset, len, fine_align, &start, &end);
      windows[s] = {end - start, start % kIoAlign != 0 ? uint64_t{fine_align} : kIoAlign};
    }
  }
  std::vector<std::vector<double>> fio_r1w = wr;  // fio psync QD1 at the window, bytes/s of window bytes
  std::vector<std::string> cmd_r1w(ns);
  nlohmann::json runs = nlohmann::json::array();

  for (int r = 0; r < reps; ++r) {
    if (have_fio) {
      ctx.progress.Step("fio psync write (rep " + std::to_string(r + 1) + ")");
      FioResult ps = RunFio(fio_file, "write", "psync", kMiB, 1, total);
      cmd_ps = ps.command;
      std::filesystem::remove(fio_file);
      fio_ps[r] = ps.bytes_per_s;
      if (!ps.error.empty() && fio_error.empty()) fio_error = ps.error;
      runs.push_back({{"rep", r}, {"fio_psync_write_Bps", ps.bytes_per_s}});
    } else {
      ctx.progress.Step("fio missing");
    }
    // Diagnostics: the file tier's write path alone, and a pipelined writer
    // made of the same parts, on the same objects.
    for (size_t d = 0; d < diag_sizes.size(); ++d) {
      const uint64_t size = diag_sizes[d];
      ctx.progress.Step("diagnostics, " + SizeName(size) + " objects");
      std::string e;
      diag_store[d][r] = FileTierStoreAlone(tier_dir, ctx.pool, size, diag_total / size, 64 * kMiB, &e);
      if (!e.empty() && diag_error.empty()) diag_error = e;
      diag_pipe[d][r] = PipelinedWriterAlone(tier_dir, ctx.pool, size, diag_total / size, &e);
      if (!e.empty() && diag_error.empty()) diag_error = e;
      runs.push_back({{"rep", r}, {"diag_object_bytes", size}, {"diag_store_alone_Bps", diag_store[d][r]},
                      {"diag_pipelined_writer_Bps", diag_pipe[d][r]}});
    }
    for (size_t s = 0; s < ns; ++s) {
      const uint64_t size = sizes[s];
      const uint64_t count = std::max<uint64_t>(1, total / size);
      // A 64 MiB object cannot share a 64 MiB host tier with anything.
      const uint64_t host = std::max<uint64_t>(64 * kMiB, 2 * size);
      // This size's references, measured right before or right after its
      // engine run: the disk drifts by tens of percent within minutes, so a
      // reference taken once per repetition would compare figures minutes
      // apart.
      const size_t b = bs_index(size);
      // The order alternates between repetitions: fio first, then the
      // engine; the next repetition the engine first. On the development
      // machine's virtual disk a write ran slower right after the other kind
      // of writer than right after its own kind (a spill after fio at
      // 0.75-1.08 GB/s, after another spill at 1.18-1.69 GB/s;
      // bench/results/dev-2026-12-04-order.md), so a fixed order put every
      // spill in the slow position. `order` in the JSON says which ran first.
      const bool engine_first = r % 2 == 1;
      const char* const order = engine_first ? "engine first" : "fio first";
      auto references = [&] {
        {
          ctx.progress.Step("FileIo write from 2 MiB pages, " + SizeName(size) + " objects");
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
          ctx.progress.Step("fio references for " + SizeName(size) + " objects");
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
          ctx.progress.Step("");
        }
      };
      auto engine = [&] {
        ctx.progress.Step("spillway " + SizeName(size) + " x " + std::to_string(count));
        SpillRun sr = SpillObjects(tier_dir, ctx.pool, size, count, host, read_bytes_for(size), single_bytes_for(size));
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
        put_alone[s][r] = PutAlone(ctx.pool, size, std::max<uint64_t>(1, std::min(count, diag_total / size)));
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
      };
      if (engine_first) {
        engine();
        references();
      } else {
        references();
        engine();
      }
      if (peer) {
        ctx.progress.Step("zict.File peer " + SizeName(size));
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
    }
  }
  std::filesystem::remove_all(tier_dir);
  std::filesystem::remove_all(peer_dir);
  rep.details["spill"] = runs;

  auto gbs = [](std::vector<double> v) {
    for (double& x : v) x /= 1e9;
    return v;
  };
  const std::string fio_missing = have_fio ? fio_error : "fio is not installed";
  auto with_command = [](Row row, const std::string& cmd) {
    row.reference_command = cmd;
    return row;
  };
  // Every reference value of one kind, across sizes and repetitions (a
  // reference row's median); fio_w is the write reference nearest in time
  // to each repetition's diagnostics (they run right before the first size).
  auto all_of = [&](const std::vector<std::vector<double>>& m, int block = -1) {
    std::vector<double> v;
    for (size_t s = 0; s < ns; ++s) {
      if (block >= 0 && bs_index(sizes[s]) != static_cast<size_t>(block)) continue;
      v.insert(v.end(), m[s].begin(), m[s].end());
    }
    return v;
  };
  const std::vector<double> fio_w = fio_ws[0];
  rep.Add(with_command(Row{"spill.fio.uring_write", 1, "fio io_uring O_DIRECT write, 1 MiB, QD32",
                           Median(gbs(all_of(fio_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing,
                           gbs(all_of(fio_ws))}, cmd_w));
  rep.Add(with_command(Row{"spill.fio.uring_write64", 1, "fio io_uring O_DIRECT write, 1 MiB, QD64",
                           Median(gbs(all_of(fio_w64s))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "",
                           fio_missing, gbs(all_of(fio_w64s))}, cmd_w64));
  rep.Add(with_command(Row{"spill.fio.uring_write_fsync", 1, "fio io_uring O_DIRECT write, 1 MiB, QD32, fsync at the end",
                           Median(gbs(all_of(fio_wfs))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "",
                           fio_missing, gbs(all_of(fio_wfs))}, cmd_wf));
  rep.Add(with_command(Row{"spill.fio.psync_write", 1, "fio psync O_DIRECT write, 1 MiB", Median(gbs(fio_ps)), "GB/s",
                           "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, gbs(fio_ps)}, cmd_ps));
  rep.Add(Row{"spill.fileio.write_huge", 1,
              "FileIo io_uring O_DIRECT write, 1 MiB, QD32, from 2 MiB pages (the file tier's buffers)",
              Median(gbs(all_of(huge_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", huge_error,
              gbs(all_of(huge_ws))});
  rep.Add(Row{"spill.fileio.write_huge_qd16", 1,
              "FileIo io_uring O_DIRECT write, 1 MiB, QD16, from 2 MiB pages (a spill's most in flight: two 8 MiB slabs)",
              Median(gbs(all_of(huge16_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", huge_error,
              gbs(all_of(huge16_ws))});
  rep.Add(Row{"spill.fileio.write_slabs", 1,
              "FileIo io_uring O_DIRECT write in 8 MiB slabs of 1 MiB requests, two at once, each refilled when all "
              "its requests are done (the spill's own pattern)",
              Median(gbs(all_of(slab_ws))), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", huge_error,
              gbs(all_of(slab_ws))});
  for (size_t b = 0; b < read_bs.size(); ++b) {
    const std::string name = SizeName(read_bs[b]);
    const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
    // The 1 MiB QD4 row keeps the id the quick test knows.
    const std::string id = read_bs[b] == kMiB ? "spill.fio.uring_read" : "spill.fio.randread." + tag;
    const std::vector<double> rr = all_of(fio_rrs, static_cast<int>(b)), r1 = all_of(fio_r1s, static_cast<int>(b));
    rep.Add(with_command(Row{id, 1, "fio io_uring O_DIRECT randread, " + name + ", QD" + std::to_string(kReaders),
                             Median(gbs(rr)), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, gbs(rr)},
                         cmd_rr[b]));
    rep.Add(with_command(Row{"spill.fio.psync_read." + tag, 1, "fio psync O_DIRECT randread, " + name + ", QD1",
                             Median(gbs(r1)), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, gbs(r1)},
                         cmd_r1[b]));
    const std::vector<double> rj = all_of(fio_rjs, static_cast<int>(b));
    rep.Add(with_command(Row{"spill.fio.psync_read_jobs." + tag, 1,
                             "fio psync O_DIRECT randread, " + name + ", " + std::to_string(kReaders) + " jobs at QD1",
                             Median(gbs(rj)), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", fio_missing, gbs(rj)},
                         cmd_rj[b]));
  }
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
                Median(gbs(diag_store[d])), "GB/s", "fio io_uring write", Median(gbs(fio_w)), Median(rs), kNaN,
                Better::kHigher, "", diag_error, gbs(diag_store[d])});
    rep.Add(Row{"spill.diag.pipelined." + tag, 1,
                "(diagnostic) pipelined slab writer (EncodeRecord + FileIo), " + name + " objects",
                Median(gbs(diag_pipe[d])), "GB/s", "fio io_uring write", Median(gbs(fio_w)), Median(rp), kNaN,
                Better::kHigher, "", diag_error, gbs(diag_pipe[d])});
  }
  for (size_t s = 0; s < ns; ++s) {
    const std::string name = SizeName(sizes[s]);
    const std::string tag = name.substr(0, name.find(' ')) + name.substr(name.find(' ') + 1);
    const size_t b = bs_index(sizes[s]);
    const std::string bs_name = SizeName(read_bs[b]);
    std::vector<double> ratio_w(reps), ratio_w64(reps), ratio_wf(reps), ratio_ps(reps), ratio_r(reps), ratio_r1(reps),
        ratio_peer(reps);
    for (int r = 0; r < reps; ++r) {
      ratio_w[r] = Ratio(wr[s][r], fio_ws[s][r]);
      ratio_w64[r] = Ratio(wr[s][r], fio_w64s[s][r]);
      ratio_wf[r] = Ratio(wr[s][r], fio_wfs[s][r]);
      ratio_ps[r] = Ratio(wr[s][r], fio_ps[r]);
      ratio_r[r] = Ratio(rd[s][r], fio_rrs[s][r]);
      ratio_r1[r] = Ratio(rd1[s][r], fio_r1s[s][r]);
      ratio_peer[r] = Ratio(wr[s][r], pw[s][r]);
    }
    const double target = sizes[s] >= 64 * kKiB ? 0.9 : 0.5;
    char tt[64] = "";
    std::snprintf(tt, sizeof(tt), ">= %.2fx fio io_uring", target);
    rep.Add(with_command(Row{"spill.write." + tag, 1, "host -> file spill, " + name + " objects", Median(gbs(wr[s])),
                             "GB/s", "fio io_uring write 1 MiB QD32", Median(gbs(fio_ws[s])), Median(ratio_w), target,
                             Better::kHigher, tt, size_errors[s], gbs(wr[s])}, cmd_w));
    rep.Add(with_command(Row{"spill.write_qd64." + tag, 1, "host -> file spill, " + name + " objects",
                             Median(gbs(wr[s])), "GB/s", "fio io_uring write 1 MiB QD64", Median(gbs(fio_w64s[s])),
                             Median(ratio_w64), kNaN, Better::kHigher, "", size_errors[s], gbs(wr[s])}, cmd_w64));
    rep.Add(with_command(Row{"spill.write_fsync." + tag, 1, "host -> file spill, " + name + " objects",
                             Median(gbs(wr[s])), "GB/s", "fio io_uring write 1 MiB QD32, end_fsync",
                             Median(gbs(fio_wfs[s])), Median(ratio_wf), kNaN, Better::kHigher, "", size_errors[s],
                             gbs(wr[s])}, cmd_wf));
    rep.Add(with_command(Row{"spill.write_psync." + tag, 1, "host -> file spill, " + name + " objects",
                             Median(gbs(wr[s])), "GB/s", "fio psync write", Median(gbs(fio_ps)), Median(ratio_ps), kNaN,
                             Better::kHigher, "", size_errors[s], gbs(wr[s])}, cmd_ps));
    std::vector<double> ratio_huge(reps);
    for (int r = 0; r < reps; ++r) ratio_huge[r] = Ratio(wr[s][r], huge_ws[s][r]);
    rep.Add(Row{"spill.diag.write_huge." + tag, 1, "(diagnostic) host -> file spill, " + name + " objects",
                Median(gbs(wr[s])), "GB/s", "FileIo io_uring write 1 MiB QD32 from 2 MiB pages",
                Median(gbs(huge_ws[s])), Median(ratio_huge), kNaN, Better::kHigher, "",
                size_errors[s].empty() ? huge_error : size_errors[s], gbs(wr[s])});
    std::vector<double> ratio_huge16(reps);
    for (int r = 0; r < reps; ++r) ratio_huge16[r] = Ratio(wr[s][r], huge16_ws[s][r]);
    rep.Add(Row{"spill.diag.write_huge_qd16." + tag, 1, "(diagnostic) host -> file spill, " + name + " objects",
                Median(gbs(wr[s])), "GB/s", "FileIo io_uring write 1 MiB QD16 from 2 MiB pages",
                Median(gbs(huge16_ws[s])), Median(ratio_huge16), kNaN, Better::kHigher, "",
                size_errors[s].empty() ? huge_error : size_errors[s], gbs(wr[s])});
    std::vector<double> ratio_slab(reps);
    for (int r = 0; r < reps; ++r) ratio_slab[r] = Ratio(wr[s][r], slab_ws[s][r]);
    rep.Add(Row{"spill.diag.write_slabs." + tag, 1, "(diagnostic) host -> file spill, " + name + " objects",
                Median(gbs(wr[s])), "GB/s", "FileIo write in the spill's slab pattern (2 x 8 MiB, refilled per slab)",
                Median(gbs(slab_ws[s])), Median(ratio_slab), kNaN, Better::kHigher, "",
                size_errors[s].empty() ? huge_error : size_errors[s], gbs(wr[s])});
    std::vector<double> ratio_pa(reps);
    for (int r = 0; r < reps; ++r) ratio_pa[r] = Ratio(put_alone[s][r], fio_ws[s][r]);
    rep.Add(Row{"spill.diag.put_alone." + tag, 1, "(diagnostic) Put alone into a host tier with room, " + name + " objects",
                Median(gbs(put_alone[s])), "GB/s", "fio io_uring write 1 MiB QD32", Median(gbs(fio_ws[s])),
                Median(ratio_pa), kNaN, Better::kHigher, "", size_errors[s], gbs(put_alone[s])});
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
    rep.Add(with_command(Row{"spill.read." + tag, 1,
                             "file -> host read-back, " + name + " objects (" + std::to_string(kReaders) + " readers)",
                             Median(gbs(rd[s])), "GB/s", "fio randread " + bs_name + " QD" + std::to_string(kReaders),
                             Median(gbs(fio_rrs[s])), Median(ratio_r), 0.9, Better::kHigher, ">= 0.90x fio randread",
                             size_errors[s], gbs(rd[s])}, cmd_rr[b]));
    // The readers against fio in their own pattern, kReaders threads each
    // waiting on one read: what the target's reference (one thread keeping
    // kReaders in flight) gains by its pattern alone shows as this ratio
    // above the target's.
    std::vector<double> ratio_rj(reps);
    for (int r = 0; r < reps; ++r) ratio_rj[r] = Ratio(rd[s][r], fio_rjs[s][r]);
    rep.Add(with_command(Row{"spill.diag.read_jobs." + tag, 1,
                             "(diagnostic) file -> host read-back, " + name + " objects (" + std::to_string(kReaders) +
                                 " readers)",
                             Median(gbs(rd[s])), "GB/s",
                             "fio psync randread " + bs_name + ", " + std::to_string(kReaders) + " jobs at QD1",
                             Median(gbs(fio_rjs[s])), Median(ratio_rj), kNaN, Better::kHigher, "", size_errors[s],
                             gbs(rd[s])}, cmd_rj[b]));
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
    if (batch_ran) rep.Add(with_command(Row{"spill.diag.read_batch." + tag, 1,
                             "(diagnostic) file -> host read-back, " + name + " objects (1 thread, Acquire of " +
                                 std::to_string(kReaders) + " keys)",
                             Median(gbs(rdb[s])), "GB/s", "fio randread " + bs_name + " QD" + std::to_string(kReaders),
                             Median(gbs(fio_rrs[s])), Median(ratio_rb), kNaN, Better::kHigher, "", size_errors[s],
                             gbs(rdb[s])}, cmd_rr[b]));
    rep.Add(with_command(Row{"spill.read1." + tag, 1, "file -> host read-back, " + name + " objects (1 reader)",
                             Median(gbs(rd1[s])), "GB/s", "fio psync randread " + bs_name + " QD1",
                             Median(gbs(fio_r1s[s])), Median(ratio_r1), 0.9, Better::kHigher, ">= 0.90x fio psync QD1",
                             size_errors[s], gbs(rd1[s])}, cmd_r1[b]));
    // The single reader against reads of the same bytes taken between its
    // Gets (pread of the object's size, 1 MiB for larger objects, at aligned
    // random offsets of the tier's own segment files): both in the same
    // seconds, so the disk's drift between the engine's run and fio's cannot
    // move this ratio.
    std::vector<double> ratio_raw(reps);
    for (int r = 0; r < reps; ++r) ratio_raw[r] = Ratio(rd1[s][r], rd1raw[s][r]);
    rep.Add(Row{"spill.diag.read1_raw." + tag, 1, "(diagnostic) file -> host read-back, " + name + " objects (1 reader)",
                Median(gbs(rd1[s])), "GB/s",
                "pread of " + SizeName(std::min<uint64_t>(sizes[s], kMiB)) +
                    " blocks from its own segment files into a 2 MiB page, between its Gets",
                Median(gbs(rd1raw[s])), Median(ratio_raw), kNaN, Better::kHigher, "", size_errors[s], gbs(rd1[s])});
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
      rep.Add(with_command(Row{"spill.diag.get1_wait_window." + tag, 1,
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
    const double x = static_cast<double>(sizes[s]);
    rep.Line("spill", "spillway host -> file").points.push_back({x, Median(gbs(wr[s]))});
    rep.Line("spill", "spillway file -> host").points.push_back({x, Median(gbs(rd[s]))});
    rep.Line("spill", "spillway file -> host, 1 reader").points.push_back({x, Median(gbs(rd1[s]))});
    rep.Line("spill", "fio io_uring write").points.push_back({x, Median(gbs(fio_ws[s]))});
    rep.Line("spill", "fio psync write").points.push_back({x, Median(gbs(fio_ps))});
    rep.Line("spill", "fio randread QD" + std::to_string(kReaders)).points.push_back({x, Median(gbs(fio_rrs[s]))});
    if (peer) {
      std::string why = have_peer ? peer_errors[s]
                                  : (script.empty() ? "bench/zict_peer.py not found (run from the source tree)"
                                                    : o.python + " not found");
      rep.Add(Row{"peer.write." + tag, 5, "host -> file spill, " + name + " objects", Median(gbs(wr[s])), "GB/s",
                  "zict.File peer (Python)", Median(gbs(pw[s])), Median(ratio_peer), 3.0, Better::kHigher,
                  ">= 3.00x the Dask-style spiller", why, gbs(wr[s])});
      rep.Line("peer", "spillway host -> file").points.push_back({x, Median(gbs(wr[s]))});
      rep.Line("peer", "zict.File peer write").points.push_back({x, Median(gbs(pw[s]))});
      rep.Line("peer", "zict.File peer read").points.push_back({x, Median(gbs(pr[s]))});
    }
  }
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

}  // namespace spillway::cli::bench
