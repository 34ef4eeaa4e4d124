// Section 1's references: fio, the project's FileIo writing alone, Puts
// into a host tier with room, and the Dask-style peer (spill_parts.h).
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

FioResult RunFio(const std::string& file, const std::string& rw, const std::string& engine, uint64_t bs,
                 int iodepth, uint64_t size, uint64_t io_size, const std::string& extra, int numjobs) {
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

// The disk's write ceiling for buffers in 2 MiB pages, as the file tier's
// are (io_buffer_cache.h): the project's FileIo (io_uring where available)
// writing `total` bytes sequentially in 1 MiB O_DIRECT requests, 32 in
// flight, into a preallocated file (fio's reference lays its file out
// first too). fio's own buffers are 4 KiB pages, which on some virtual disks
// write slower than 2 MiB pages: a second, stricter ceiling beside fio's. `depth` 1 MiB
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
// 1 MiB requests, two slabs at once (WritePipeline::kSlabWritesOnDisk), each
// slab one SubmitAndWait whose requests are all done before its writer
// takes the next: as WritePipeline::WriteSlab does, where fio and the QD16
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

}  // namespace spillway::bench
