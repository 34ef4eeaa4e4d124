// Section 1's engine side: a chain of a host tier and a file tier filled
// until it spills, then read back by kReaders threads and by one (SpillObjects,
// declared in common.h), with the disk's activity timed through a FileIo
// wrapper; and two diagnostics of the file tier's write path alone.
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

#include "bench/harness/common.h"
#include "bench/harness/spill_parts.h"
#include "codecs/codec.h"
#include "engine/stats_export.h"
#include "spillway/engine.h"
#include "spillway/file_io.h"
#include "tiers/file_tier.h"

namespace spillway::bench {

std::string SpillKey(uint64_t i) {
  char k[32];
  std::snprintf(k, sizeof(k), "spill/%010llu", static_cast<unsigned long long>(i));
  return k;
}

namespace {

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
// WritePipeline::WriteSlab does) and submit it, so that while one slab is being
// encoded the others are on the disk and up to 32 1 MiB requests stay in
// flight (never more: 4 per writer); space is preallocated in 64 MiB steps
// as the tier does. A diagnostic of the tier's write path, not a spillway
// figure.
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

}  // namespace spillway::bench
