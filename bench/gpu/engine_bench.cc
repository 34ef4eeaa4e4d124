// Engine-level GPU benchmark (see engine_bench.h). Every figure is wall-clock
// time of engine calls on this thread, the references measured in the same
// run:
//  - spill: Put (PutDeviceAllocation, no copy) of a working set 4x the gpu
//    tier, then Flush: bytes the engine moved gpu -> host (its boundary
//    counter) over the time from the first Put to the end of Flush. The
//    adoption itself is free, so this is the mover's demotion rate under
//    backpressure.
//  - unspill: with the device-resident objects erased, Acquire(kDevice) of
//    host-resident objects totalling 70% of the gpu tier (below its high
//    watermark, so nothing is demoted meanwhile).
//  - gpu -> file: the same Puts into gpu (1/4) -> pinned host (1/8) -> file;
//    bytes that reached the file tier over first Put to end of Flush, each
//    round against a disk reference written just before it.
//  - file -> gpu: Acquire(kDevice) of file-resident objects, 70% of the tier.
#include "bench/gpu/engine_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda_runtime.h"
#include "spillway/engine.h"
#include "spillway/file_io.h"

namespace spillway {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
double Gbps(uint64_t bytes, double s) { return s > 0 ? bytes / 1e9 / s : 0; }
std::string F(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", v);
  return b;
}
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
std::string Verdict(double ratio, double target) {
  return ratio >= target ? "met" : "MISSED by " + std::to_string(int((target - ratio) / target * 100 + 0.5)) + "%";
}

// Pinned cudaMemcpyAsync in `chunks[i]` pieces over `bytes`, one stream: D2H and H2D GB/s (median of reps).
Status PinnedReference(uint64_t bytes, std::span<const uint64_t> chunks, int reps, std::vector<double>* d2h,
                       std::vector<double>* h2d) {
  auto dev = cuda::Malloc(0, bytes);
  if (!dev.ok()) return dev.status();
  auto host = cuda::MallocHost(bytes);
  if (!host.ok()) {
    cuda::Free(*dev);
    return host.status();
  }
  auto stream = cuda::Stream::Create(0);
  Status st = stream.status();
  for (uint64_t chunk : chunks) {
  std::vector<double> down, up;
  for (int r = 0; st.ok() && r < reps + 1; ++r) {
    for (int dir = 0; dir < 2 && st.ok(); ++dir) {
      auto t = Clock::now();
      for (uint64_t off = 0; off < bytes && st.ok(); off += chunk) {
        auto* d = static_cast<std::byte*>(*dev) + off;
        auto* h = static_cast<std::byte*>(*host) + off;
        st = dir == 0 ? cuda::MemcpyAsync(h, d, std::min(chunk, bytes - off), *stream)
                      : cuda::MemcpyAsync(d, h, std::min(chunk, bytes - off), *stream);
      }
      if (st.ok()) st = stream->Synchronize();
      if (r > 0) (dir == 0 ? down : up).push_back(Gbps(bytes, Since(t)));  // first round warms up
    }
  }
  d2h->push_back(Median(down));
  h2d->push_back(Median(up));
  }
  cuda::FreeHost(*host);
  cuda::Free(*dev);
  return st;
}

// The disk's limit through the project's FileIo at the file tier's request
// size: O_DIRECT 1 MiB writes at queue depth 32 and at 64 (a large object is
// written in pieces with up to 64 requests in flight, file_tier.cc), each
// rep into a fresh file preallocated before the clock starts (as fio lays
// out its file, and as the file tier preallocates its segments: fresh
// blocks, whose unwritten extents the filesystem converts as they are
// written); the reference is the faster depth's median. The engine always
// writes fresh segment space; rewriting blocks already written is faster on
// ext4 (no extent conversion), so
// that figure (at depth 32) is printed beside it, not used for the ratio.
// `overwrite` false: the depth-32 rewrite pass is left out (*overwrite_gbps
// is then 0), for the reference paired with each engine round.
Status DiskReference(const std::string& dir, uint64_t bytes, int reps, double* gbps, double* overwrite_gbps,
                     std::string* what, bool overwrite = true) {
  auto io = MakeFileIo(IoEngine::kAuto);
  auto* buf = static_cast<std::byte*>(std::aligned_alloc(kIoAlign, bytes));
  if (!buf) return Status::NoSpace("disk reference buffer");
  std::memset(buf, 7, bytes);
  std::vector<double> fresh32, fresh64, over;
  Status st;
  bool direct = true;
  for (int r = 0; r < reps && st.ok(); ++r) {
    for (uint32_t depth : {32u, 64u}) {
      const std::string path = dir + "/disk-ref-" + std::to_string(r) + "-" + std::to_string(depth) + ".bin";
      auto fh = io->Open(path, OpenOptions{true, false, true, true});
      if (!fh.ok()) {
        st = fh.status().WithContext("opening " + path);
        break;
      }
      direct = direct && fh->direct;
      st = io->Allocate(*fh, 0, bytes);
      if (st.code() == StatusCode::kNotSupported) st = Status::OK();  // extending writes then
      const int passes = depth == 32 && overwrite ? 2 : 1;  // 0: fresh blocks, 1: the same blocks again
      for (int pass = 0; pass < passes && st.ok(); ++pass) {
        std::vector<IoRequest> reqs = SequentialWrites(*fh, buf, bytes, kMiB);
        auto t = Clock::now();
        st = io->SubmitAndWait(reqs, depth);
        (pass == 1 ? over : depth == 32 ? fresh32 : fresh64).push_back(Gbps(bytes, Since(t)));
      }
      (void)io->Close(*fh);
      std::error_code ec;
      std::filesystem::remove(path, ec);
      if (!st.ok()) break;
    }
  }
  std::free(buf);
  const double q32 = Median(fresh32), q64 = Median(fresh64);
  *what = std::string(io->name()) + (direct ? ", O_DIRECT" : ", buffered (O_DIRECT refused)") +
          ", 1 MiB writes into a fresh preallocated file, queue depth 32: " + F(q32) + " GB/s, 64: " + F(q64) +
          " GB/s; the faster";
  *gbps = std::max(q32, q64);
  *overwrite_gbps = Median(over);
  return st;
}

Config Chain(const std::string& dir, uint64_t gpu, uint64_t host, uint64_t file) {
  Config c;
  c.source = "<engine bench>";
  c.policy.promote_on_read = false;  // reads of host objects (the probe) leave them where they are
  TierConfig g;
  g.name = "gpu0";
  g.kind = TierKind::kGpu;
  g.capacity_bytes = gpu;
  g.capacity_text = std::to_string(gpu);
  c.tiers.push_back(g);
  TierConfig h;
  h.name = "host";
  h.kind = TierKind::kHost;
  h.capacity_bytes = host;
  h.capacity_text = std::to_string(host);
  h.pinned = true;
  c.tiers.push_back(h);
  if (file > 0) {
    TierConfig f;
    f.name = "disk";
    f.kind = TierKind::kFile;
    f.capacity_bytes = file;
    f.capacity_text = std::to_string(file);
    f.paths = {dir + "/tier"};
    f.io.direct = true;
    f.io.queue_depth = 32;
    c.tiers.push_back(f);
  }
  return c;
}

// The engine pins its host tier's memory in the background (about 0.5 s per
// GiB on the H200 machine); the engine has no call to wait for it, so the
// benchmark sleeps 0.7 s per GiB before its warm-up round.
void WaitForPinning(uint64_t host_bytes) {
  std::this_thread::sleep_for(std::chrono::milliseconds(static_cast<int64_t>(host_bytes * 0.7e3 / kGiB) + 100));
}

uint64_t BoundaryBytes(const EngineStats& s, const std::string& from, const std::string& to) {
  uint64_t n = 0;
  for (const auto& b : s.boundaries) n += (b.from == from && b.to == to) ? b.bytes : 0;
  return n;
}

struct Round {
  std::string diag;       // the engine's own view of the round (boundary rates, pinned pool)
  double put_s = 0;       // first Put to end of Flush
  uint64_t spilled = 0;   // gpu -> host bytes (or bytes reaching the file tier)
  double up_s = 0;        // Acquire(kDevice) of the batch
  uint64_t up_bytes = 0;
};

// One round: adopt `n` objects of `obj` bytes, Flush, erase what is on the
// device, Acquire a batch from `from_tier` (objects there), erase everything.
Status OneRound(Engine& e, uint64_t obj, uint64_t n, uint64_t gpu_cap, bool to_file, Round* out) {
  std::vector<std::shared_ptr<void>> mems;
  auto stream = cuda::Stream::Create(0);
  if (!stream.ok()) return stream.status();
  for (uint64_t i = 0; i < n; ++i) {
    auto m = e.AllocateDevice(obj);
    if (!m.ok()) return m.status().WithContext("AllocateDevice");
    SPILLWAY_RETURN_IF_ERROR(cuda::MemsetAsync(m->get(), static_cast<int>(i % 251), obj, *stream));
    mems.push_back(std::move(*m));
  }
  SPILLWAY_RETURN_IF_ERROR(stream->Synchronize());
  const EngineStats before = e.Stats();
  auto t = Clock::now();
  for (uint64_t i = 0; i < n; ++i) {
    void* p = mems[i].get();
    auto keep = std::make_shared<std::shared_ptr<void>>(std::move(mems[i]));
    SPILLWAY_RETURN_IF_ERROR(e.PutDeviceAllocation("e" + std::to_string(i), p, {obj}, [keep](void*) { keep->reset(); }));
  }
  SPILLWAY_RETURN_IF_ERROR(e.Flush());
  out->put_s = Since(t);
  const EngineStats after = e.Stats();
  out->spilled = to_file ? BoundaryBytes(after, "host", "disk") - BoundaryBytes(before, "host", "disk")
                         : BoundaryBytes(after, "gpu0", "host") - BoundaryBytes(before, "gpu0", "host");
  // Diagnostics: each boundary's bytes over the time its batches spent
  // moving (summed over batches in flight together, so below wall-clock
  // rate when they overlap), and host memory that missed the pinned pool.
  for (const auto& b : after.boundaries) {
    uint64_t bytes0 = 0, ns0 = 0;
    for (const auto& p : before.boundaries) {
      if (p.from == b.from && p.to == b.to) bytes0 = p.bytes, ns0 = p.nanos;
    }
    if (b.bytes == bytes0) continue;
    out->diag += b.from + "→" + b.to + " " + std::to_string((b.bytes - bytes0) / kMiB) + " MiB in " +
                 F((b.nanos - ns0) / 1e9) + " s of batch time; ";
  }
  out->diag += "sync demotions " + std::to_string(after.sync_demotions - before.sync_demotions) +
               "; pinned pool " + std::to_string(after.pinned_pool_bytes / kMiB) + " MiB, fallback to plain memory " +
               std::to_string((after.pinned_fallback_bytes - before.pinned_fallback_bytes) / kMiB) + " MiB";
  // Free the device: the newest objects are the ones still there (LRU demotes
  // the oldest first); erase them, newest first, until one is not on the device
  // (Get(kAny) of a host object does not move it: promote_on_read is off).
  for (uint64_t i = n; i-- > 0;) {
    const std::string k = "e" + std::to_string(i);
    auto h = e.Get(k, Where::kAny);
    if (!h.ok()) return h.status().WithContext("probe " + k);
    const bool dev = h->where() == Where::kDevice;
    h->Release();
    if (!dev) break;
    SPILLWAY_RETURN_IF_ERROR(e.Erase(k));
  }
  // The batch: the oldest objects, which sit lowest in the chain.
  std::vector<std::string> batch;
  uint64_t batch_bytes = 0;
  const uint64_t want = gpu_cap * 7 / 10;
  for (uint64_t i = 0; i < n && batch_bytes + obj <= want; ++i) {
    batch.push_back("e" + std::to_string(i));
    batch_bytes += obj;
  }
  auto t2 = Clock::now();
  auto hs = e.Acquire(batch, Where::kDevice);
  out->up_s = Since(t2);
  if (!hs.ok()) return hs.status().WithContext("Acquire");
  out->up_bytes = batch_bytes;
  // Spot check: first byte of each acquired object, copied back.
  for (size_t j = 0; j < hs->size(); ++j) {
    unsigned char b = 0;
    SPILLWAY_RETURN_IF_ERROR(cuda::Memcpy(&b, (*hs)[j].buffer(0).data(), 1));
    if (b != static_cast<unsigned char>(j % 251)) return Status::Corruption("object e" + std::to_string(j) + " wrong");
  }
  hs->clear();
  for (uint64_t i = 0; i < n; ++i) (void)e.Erase("e" + std::to_string(i));
  return e.Flush();
}

}  // namespace

std::vector<IoRequest> SequentialWrites(const FileHandle& file, std::byte* buf, uint64_t bytes, uint64_t block) {
  std::vector<IoRequest> reqs;
  for (uint64_t off = 0; off < bytes; off += block) {
    IoRequest q;
    q.op = IoRequest::Op::kWrite;
    q.file = &file;
    q.offset = off;
    q.buf = buf + off;
    q.len = static_cast<size_t>(std::min(block, bytes - off));
    reqs.push_back(q);
  }
  return reqs;
}

Status RunEngineBench(const EngineBenchArgs& a, const std::function<void(const std::string&)>& line) {
  const uint64_t ws = a.gib * kGiB;
  std::error_code ec;
  std::filesystem::create_directories(a.dir, ec);
  const uint64_t sizes[] = {8 * kMiB, 64 * kMiB};
  double disk = 0, disk_overwrite = 0;
  std::string disk_what;
  SPILLWAY_RETURN_IF_ERROR(
      DiskReference(a.dir, std::min<uint64_t>(ws, 2 * kGiB), a.reps, &disk, &disk_overwrite, &disk_what));
  line("");
  line("## Engine level: device objects through Engine (gpu tier = 1/4 of the working set)");
  line("");
  line("Working set " + std::to_string(a.gib) + " GiB per object size, adopted with PutDeviceAllocation (no copy); "
       "median of " + std::to_string(a.reps) + " rounds after one warm-up round (and a sleep of 0.7 s per GiB of "
       "host tier after Open, for the engine's background pinning). References measured in this run: "
       "pinned cudaMemcpyAsync in the same object-size chunks; disk: the project's FileIo (" + disk_what +
       "), " + F(disk) + " GB/s (the same blocks written again at depth 32: " + F(disk_overwrite) +
       " GB/s, not the reference: the engine writes fresh segment space). The gpu → file ratios use the same "
       "reference written again just before each round, one ratio per round, their median in the table.");
  line("");
  std::vector<std::string> diags;
  line("| path | object | GB/s | reference | ratio | target |");
  line("| --- | --- | --- | --- | --- | --- |");
  std::vector<double> d2hs, h2ds;
  SPILLWAY_RETURN_IF_ERROR(PinnedReference(std::min<uint64_t>(ws, 2 * kGiB), sizes, a.reps, &d2hs, &h2ds));
  for (size_t si = 0; si < 2; ++si) {
    const uint64_t obj = sizes[si];
    const double d2h = d2hs[si], h2d = h2ds[si];
    const uint64_t n = ws / obj;
    const std::string os = std::to_string(obj / kMiB) + " MiB";
    // gpu <-> pinned host
    {
      auto e = Engine::Open(Chain(a.dir, ws / 4, ws + ws / 4, 0));
      if (!e.ok()) return e.status().WithContext("engine gpu+host");
      WaitForPinning(ws + ws / 4);
      std::vector<double> spill, up;
      for (int r = 0; r < a.reps + 1; ++r) {
        Round rd;
        SPILLWAY_RETURN_IF_ERROR(OneRound(**e, obj, n, ws / 4, false, &rd).WithContext("gpu+host round"));
        if (r == 0) continue;
        spill.push_back(Gbps(rd.spilled, rd.put_s));
        up.push_back(Gbps(rd.up_bytes, rd.up_s));
      }
      const double s = Median(spill), u = Median(up);
      line("| spill gpu → pinned host (Put + Flush) | " + os + " | " + F(s) + " | pinned D2H " + F(d2h) + " | " +
           F(s / d2h) + "× | ≥ 0.9× " + Verdict(s / d2h, 0.9) + " |");
      line("| unspill pinned host → gpu (Acquire kDevice) | " + os + " | " + F(u) + " | pinned H2D " + F(h2d) + " | " +
           F(u / h2d) + "× | ≥ 0.9× " + Verdict(u / h2d, 0.9) + " |");
    }
    // gpu -> pinned host -> file
    {
      auto e = Engine::Open(Chain(a.dir, ws / 4, ws / 8, 4 * ws));
      if (!e.ok()) return e.status().WithContext("engine gpu+host+file");
      WaitForPinning(ws / 8);
      // The disk drifts by 20% and more within minutes on this machine, so
      // each counted round is paired with a disk reference taken just
      // before it (fresh preallocated file, depths 32 and 64, the faster),
      // and the ratio is the median of the rounds' own ratios.
      std::vector<double> down, up, refs, ratios;
      std::string diag;
      for (int r = 0; r < a.reps + 1; ++r) {
        double round_disk = 0, unused = 0;
        std::string unused_what;
        if (r > 0) {
          SPILLWAY_RETURN_IF_ERROR(DiskReference(a.dir, std::min<uint64_t>(ws, 2 * kGiB), 1, &round_disk, &unused,
                                                 &unused_what, /*overwrite=*/false));
        }
        Round rd;
        SPILLWAY_RETURN_IF_ERROR(OneRound(**e, obj, n, ws / 4, true, &rd).WithContext("gpu+host+file round"));
        if (r == 0) continue;
        diag = rd.diag;
        down.push_back(Gbps(rd.spilled, rd.put_s));
        up.push_back(Gbps(rd.up_bytes, rd.up_s));
        refs.push_back(std::min(d2h, round_disk));
        ratios.push_back(down.back() / refs.back());
      }
      const double ref = Median(refs), ratio = Median(ratios);
      const double g = Median(down), u = Median(up);
      std::string per_round;
      for (size_t r = 0; r < down.size(); ++r) {
        per_round += (r ? ", " : "") + F(down[r]) + " / " + F(refs[r]);
      }
      line("| gpu → file through pinned host (Put + Flush; bytes reaching the file tier) | " + os + " | " + F(g) +
           " | min(pinned D2H, disk just before each round) " + F(ref) + " | " + F(ratio) + "× | ≥ 0.85× " +
           Verdict(ratio, 0.85) + " |");
      diags.push_back("gpu → file, " + os + ", each round's engine / disk reference GB/s: " + per_round);
      line("| file → gpu (Acquire kDevice of the oldest objects) | " + os + " | " + F(u) + " | | | |");
      diags.push_back("gpu → file, " + os + ", last round: " + diag);
    }
  }
  line("");
  for (const std::string& d : diags) line("- " + d);
  std::filesystem::remove_all(a.dir, ec);
  return Status::OK();
}

}  // namespace spillway
