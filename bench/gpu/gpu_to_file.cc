// gpu_bench's gpu -> file section: a GpuTier streaming its objects through
// pinned host memory into a FileTier, against PCIe and the disk alone.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/gpu/engine_bench.h"
#include "bench/gpu/gpu_bench_util.h"
#include "spillway/file_io.h"
#include "tiers/file_tier.h"
#include "tiers/host_tier.h"
#include "tiers/pinned_pool.h"

namespace spillway::gpubench {

// gpu -> file through the host: GpuTier::LoadToHostStreaming hands 8 MiB
// objects over as they land; a writer thread stores them in a FileTier in
// 64 MiB batches. Compared with the slower of PCIe (same run) and the disk
// alone (O_DIRECT 1 MiB writes at queue depth 32, same run).
Status GpuToFile(Report& r, const Args& args, GpuTier& tier, PinnedHostAllocator& pool,
                 std::vector<Location>& locs8, uint64_t total, double pcie_d2h) {
  std::error_code ec;
  std::filesystem::create_directories(args.dir, ec);
  auto io = MakeFileIo(IoEngine::kAuto);
  const uint64_t file_bytes = total;
  const int reps = std::min(args.reps, 3);
  Status err;

  Sample disk{};
  {
    const std::string path = args.dir + "/ref.bin";
    auto fh = io->Open(path, OpenOptions{true, false, true, true});
    if (!fh.ok()) return fh.status().WithContext("opening " + path);
    auto* buf = static_cast<std::byte*>(std::aligned_alloc(kIoAlign, file_bytes));  // O_DIRECT alignment
    if (!buf) return Status::NoSpace("out of memory for the disk reference");
    std::memset(buf, 7, file_bytes);
    disk = Measure(file_bytes, reps, [&] {
      std::vector<IoRequest> reqs = SequentialWrites(*fh, buf, file_bytes, kMiB);
      auto t = Clock::now();
      Status st = io->SubmitAndWait(reqs, 32);
      if (!st.ok()) err = st;
      return Since(t);
    });
    std::free(buf);
    (void)io->Close(*fh);
    std::filesystem::remove(path, ec);
    if (!err.ok()) return err.WithContext("disk reference");
    r.Line("- disk: " + std::string(io->name()) + (fh->direct ? ", O_DIRECT" : ", buffered (O_DIRECT refused)") +
           " at " + args.dir);
  }

  TierConfig fc;
  fc.name = "disk";
  fc.kind = TierKind::kFile;
  fc.capacity_bytes = 64 * kGiB;
  fc.paths = {args.dir + "/tier"};
  fc.io.direct = true;
  fc.io.queue_depth = 32;
  FileTier ft(fc, 1, io.get(), &pool);
  SPILLWAY_RETURN_IF_ERROR(ft.Open());

  // Blobs flow from a producer through a queue to `writers` threads, each
  // storing `batch` objects per FileTier::Store call.
  struct Sink {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<BlobPtr> q;
    bool done = false;
    Status err;
    std::vector<Location> written;
    Status Push(BlobPtr b) {
      {
        std::lock_guard<std::mutex> l(mu);
        if (!err.ok()) return err;
        q.push_back(std::move(b));
      }
      cv.notify_one();
      return Status::OK();
    }
  };
  auto write_all = [&](int writers, size_t batch, const std::function<Status(Sink&)>& produce) {
    Sink sink;
    auto t = Clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
      threads.emplace_back([&] {
        for (;;) {
          std::vector<BlobPtr> take;
          {
            std::unique_lock<std::mutex> l(sink.mu);
            sink.cv.wait(l, [&] { return sink.done || sink.q.size() >= batch || !sink.err.ok(); });
            if (!sink.err.ok()) return;
            while (!sink.q.empty() && take.size() < batch) {
              take.push_back(std::move(sink.q.front()));
              sink.q.pop_front();
            }
            if (take.empty()) return;  // done and drained
          }
          std::vector<std::string> keys(take.size());
          std::vector<std::span<const std::byte>> sp(take.size());
          std::vector<ObjectView> views(take.size());
          for (size_t i = 0; i < take.size(); ++i) {
            keys[i] = "f" + std::to_string(i);
            sp[i] = {take[i]->data(), static_cast<size_t>(take[i]->size())};
            views[i] = ObjectView{keys[i], std::span(&sp[i], 1)};
            ft.ForceReserve(ft.ReserveEstimate(views[i]));
          }
          auto l = ft.Store(views);
          std::lock_guard<std::mutex> g(sink.mu);
          if (!l.ok()) {
            sink.err = l.status();
            sink.q.clear();
            sink.cv.notify_all();
            return;
          }
          for (auto& x : *l) sink.written.push_back(std::move(x));
        }
      });
    }
    Status st = produce(sink);
    {
      std::lock_guard<std::mutex> l(sink.mu);
      sink.done = true;
    }
    sink.cv.notify_all();
    for (auto& th : threads) th.join();
    const double secs = Since(t);
    if (!st.ok() && err.ok()) err = st;
    if (!sink.err.ok()) err = sink.err;
    FreeAll(ft, sink.written);
    return secs;
  };

  auto host_blobs = tier.LoadToHost(locs8);
  if (!host_blobs.ok()) return host_blobs.status();
  struct Shape {
    int writers;
    size_t batch;  // 8 MiB objects per Store call
  };
  const Shape shapes[] = {{1, 8}, {4, 2}};
  const double slower = std::min(pcie_d2h, disk.median);
  r.Line("");
  r.Line("## gpu → file through the host");
  r.Line("");
  r.Line("| path | GB/s | reference | ratio | target |");
  r.Line("| --- | --- | --- | --- | --- |");
  r.Line("| disk alone, 1 MiB writes, QD 32 | " + F(disk.median) + " (" + F(disk.best) + ") | | | |");
  for (const Shape& sh : shapes) {
    const std::string shape = std::to_string(sh.writers) + " writer" + (sh.writers > 1 ? "s" : "") + ", " +
                              std::to_string(sh.batch * 8) + " MiB per Store";
    const Sample h2f = Measure(file_bytes, reps, [&] {
      return write_all(sh.writers, sh.batch, [&](Sink& k) {
        for (auto& b : *host_blobs) SPILLWAY_RETURN_IF_ERROR(k.Push(b));
        return Status::OK();
      });
    });
    const Sample g2f = Measure(file_bytes, reps, [&] {
      return write_all(sh.writers, sh.batch, [&](Sink& k) {
        return tier.LoadToHostStreaming(locs8, [&](size_t, BlobPtr b) { return k.Push(std::move(b)); });
      });
    });
    if (!err.ok()) break;
    r.Line("| host → file alone (FileTier::Store of host blobs), " + shape + " | " + F(h2f.median) + " (" +
           F(h2f.best) + ") | disk alone " + F(disk.median) + " | " + F(h2f.median / disk.median) + "× | |");
    const double ratio = slower > 0 ? g2f.median / slower : 0;
    // A diagnostic of the file tier alone (one Store call at a time, no
    // pipeline): the 0.85x target is the engine's path (engine_bench.cc).
    r.Line("| (diagnostic) gpu → file, 8 MiB objects streamed from GpuTier, " + shape + " | " + F(g2f.median) +
           " (" + F(g2f.best) + ") | min(PCIe D2H, disk) " + F(slower) + " | " + F(ratio) +
           "× | (the target is the engine's path, below) |");
    r.Line("| gpu → file vs host → file, same writers | | host → file " + F(h2f.median) + " | " +
           F(g2f.median / h2f.median) + "× | |");
  }
  host_blobs->clear();
  std::filesystem::remove_all(args.dir, ec);
  if (!err.ok()) return err.WithContext("gpu -> file");
  return Status::OK();
}

}  // namespace spillway::gpubench
