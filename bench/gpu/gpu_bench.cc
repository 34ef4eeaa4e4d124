// gpu_bench: spillway's GPU paths against plain CUDA copies measured in the
// same run (docs/performance.md has the targets and the reference figures).
//
//   gpu_bench [--out FILE.md] [--gib N] [--reps N] [--dir DIR] [--skip-file]
//
// References: pinned cudaMemcpyAsync D2H and H2D of one buffer, pageable D2H,
// bidirectional pinned copies, D2H in 64 KiB and 8 MiB copies, and managed
// memory prefetch eviction (first cycle apart from the steady state). Then
// spillway: GpuTier::LoadToHost of 8 MiB / 64 MiB objects and of batched
// 64 KiB objects, GpuTier::Store from pinned host memory (promotion), both at
// once, managed mode, gpu -> file through the host (GpuTier streaming into a
// FileTier), and the time to open a 64 GiB pinned host tier. Prints markdown
// (and writes it to --out). Without a GPU it says so and exits 77.
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

#include "base/cuda_runtime.h"
#include "bench/gpu/engine_bench.h"
#include "bench/gpu/gpu_bench_util.h"
#include "spillway/config_loader.h"
#include "spillway/file_io.h"
#include "tiers/file_tier.h"
#include "tiers/gpu_tier.h"
#include "tiers/host_tier.h"
#include "tiers/pinned_pool.h"

namespace spillway::gpubench {
namespace {

Args Parse(int argc, char** argv) {
  Args a;
  const char* tmp = std::getenv("SPILLWAY_BENCH_DIR");
  a.dir = tmp ? tmp : "/var/tmp/spillway-gpu-bench";
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "gpu_bench: %s needs a value\n", k.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (k == "--out") a.out = next();
    else if (k == "--gib") a.gib = std::stoull(next());
    else if (k == "--reps") a.reps = std::stoi(next());
    else if (k == "--dir") a.dir = next();
    else if (k == "--skip-file") a.skip_file = true;
    else if (k == "--engine-only") a.engine_only = true;
    else if (k == "--skip-engine") a.skip_engine = true;
    else if (k == "--engine-gib") a.engine_gib = std::stoull(next());
    else {
      std::fprintf(stderr, "usage: gpu_bench [--out FILE.md] [--gib N] [--reps N] [--dir DIR] [--skip-file] "
                           "[--engine-only | --skip-engine] [--engine-gib N]\n");
      std::exit(2);
    }
  }
  return a;
}

int Run(const Args& args) {
  Report r;
  const uint64_t total = args.gib * kGiB;
  const int reps = args.reps;

  // ---- cold start: config probe, then opening a 64 GiB pinned host tier ----
  auto t0 = Clock::now();
  GpuProbe probe = DetectGpus();
  const double probe_ms = Since(t0) * 1e3;
  if (probe.device_total_bytes.empty()) {
    std::printf("SKIPPED: no CUDA device: %s\n", cuda::CheckDevice(0).ToString().c_str());
    return 77;
  }
  auto engine_section = [&]() -> int {
    EngineBenchArgs ea{args.dir + "/engine", args.engine_gib, std::min(args.reps, 3)};
    Status st = RunEngineBench(ea, [&](const std::string& l) { r.Line(l); });
    if (!st.ok()) r.Line("engine-level benchmark FAILED: " + st.ToString());
    return st.ok() ? 0 : 1;
  };
  if (args.engine_only) {
    const int rc = engine_section();
    if (!args.out.empty()) {
      std::ofstream f(args.out);
      f << r.md.str();
    }
    return rc;
  }
  double open_ms = 0;
  {
    t0 = Clock::now();
    PinnedPoolOptions po;
    po.capacity_bytes = 64 * kGiB;
    auto pool = std::make_unique<PinnedHostAllocator>(po);
    TierConfig hc;
    hc.name = "host";
    hc.kind = TierKind::kHost;
    hc.capacity_bytes = 64 * kGiB;
    HostTier host(hc, 1, pool.get());
    std::byte* p = pool->Allocate(kMiB);
    open_ms = Since(t0) * 1e3;
    pool->Free(p, kMiB);
  }

  auto mem = Val(cuda::GetMemInfo(0), "GetMemInfo");
  r.Line("## Machine");
  r.Line("");
  r.Line("- device 0: " + F(mem.total_bytes / 1e9, 1) + " GB total, " + F(mem.free_bytes / 1e9, 1) +
         " GB free; " + std::to_string(probe.device_total_bytes.size()) + " device(s)");
  Status ks = cuda::CopyKernelStatus();
  r.Line(std::string("- gather kernel (PTX, JIT): ") + (ks.ok() ? "loaded" : "NOT loaded: " + ks.ToString()));
  r.Line("- buffer size " + std::to_string(args.gib) + " GiB; each figure is the median of " + std::to_string(reps) +
         " runs (best in brackets), GB/s = 1e9 bytes per second");
  r.Line("");

  // ---- references --------------------------------------------------------------
  auto s1 = Val(cuda::Stream::Create(0), "stream");
  auto s2 = Val(cuda::Stream::Create(0), "stream");
  auto* d_a = static_cast<std::byte*>(Val(cuda::Malloc(0, total), "cudaMalloc"));
  auto* d_b = static_cast<std::byte*>(Val(cuda::Malloc(0, total), "cudaMalloc"));
  CK(cuda::MemsetAsync(d_a, 0x5a, total, s1));
  CK(cuda::MemsetAsync(d_b, 0x00, total, s1));
  t0 = Clock::now();
  auto* h_a = static_cast<std::byte*>(Val(cuda::MallocHost(total), "cudaMallocHost"));
  const double malloc_host_s = Since(t0);
  auto* h_b = static_cast<std::byte*>(Val(cuda::MallocHost(total), "cudaMallocHost"));
  std::memset(h_a, 1, total);
  std::memset(h_b, 2, total);
  std::vector<std::byte> pageable(total);
  std::memset(pageable.data(), 3, total);
  CK(s1.Synchronize());

  auto copy_once = [&](void* dst, const void* src, uint64_t n, uint64_t piece) {
    auto t = Clock::now();
    for (uint64_t off = 0; off < n; off += piece) {
      CK(cuda::MemcpyAsync(static_cast<std::byte*>(dst) + off, static_cast<const std::byte*>(src) + off,
                           std::min(piece, n - off), s1));
    }
    CK(s1.Synchronize());
    return Since(t);
  };
  // Warm-up (first-touch costs in the driver).
  copy_once(h_a, d_a, total, total);
  copy_once(d_b, h_b, total, total);

  const Sample ref_d2h = Measure(total, reps, [&] { return copy_once(h_a, d_a, total, total); });
  const Sample ref_h2d = Measure(total, reps, [&] { return copy_once(d_b, h_b, total, total); });
  const Sample ref_d2h_8m = Measure(total, reps, [&] { return copy_once(h_a, d_a, total, 8 * kMiB); });
  const Sample ref_d2h_64k = Measure(total, reps, [&] { return copy_once(h_a, d_a, total, 64 << 10); });
  const Sample ref_pageable = Measure(total, reps, [&] { return copy_once(pageable.data(), d_a, total, total); });
  const Sample ref_bidir = Measure(2 * total, reps, [&] {
    auto t = Clock::now();
    CK(cuda::MemcpyAsync(h_a, d_a, total, s1));
    CK(cuda::MemcpyAsync(d_b, h_b, total, s2));
    CK(s1.Synchronize());
    CK(s2.Synchronize());
    return Since(t);
  });
  // cudaMemcpyBatchAsync of the same 64 KiB pieces (one call): for comparison.
  Sample ref_batch_64k{};
  std::string batch_note;
  {
    const uint64_t n = total / (64 << 10);
    std::vector<void*> dsts(n);
    std::vector<const void*> srcs(n);
    std::vector<size_t> sizes(n, 64 << 10);
    for (uint64_t i = 0; i < n; ++i) {
      dsts[i] = h_a + i * (64 << 10);
      srcs[i] = d_a + i * (64 << 10);
    }
    Status st = cuda::MemcpyBatchAsync(dsts, srcs, sizes, s1);
    if (st.ok()) st = s1.Synchronize();
    if (st.ok()) {
      ref_batch_64k = Measure(total, reps, [&] {
        auto t = Clock::now();
        CK(cuda::MemcpyBatchAsync(dsts, srcs, sizes, s1));
        CK(s1.Synchronize());
        return Since(t);
      });
    } else {
      batch_note = st.ToString();
    }
  }

  // Managed memory: prefetch eviction device -> host, cycles timed apart, at
  // the buffer size and at 4 GiB (LIMITS.md's second run).
  struct Managed {
    uint64_t bytes = 0;
    std::vector<double> cycles;
    double h2d = 0, steady = 0;
  };
  auto managed_run = [&](uint64_t bytes) {
    Managed out;
    out.bytes = bytes;
    auto m = cuda::MallocManaged(0, bytes);  // refuses to over-subscribe
    if (!m.ok()) {
      batch_note += " managed " + std::to_string(bytes >> 30) + " GiB: " + m.status().ToString();
      return out;
    }
    auto* p = static_cast<std::byte*>(*m);
    CK(cuda::PrefetchAsync(p, bytes, 0, s1));
    CK(cuda::MemsetAsync(p, 0x33, bytes, s1));
    CK(s1.Synchronize());
    for (int c = 0; c < 4; ++c) {
      auto t = Clock::now();
      CK(cuda::PrefetchAsync(p, bytes, cuda::kHostLocation, s1));
      CK(s1.Synchronize());
      out.cycles.push_back(Gbps(bytes, Since(t)));
      t = Clock::now();
      CK(cuda::PrefetchAsync(p, bytes, 0, s1));
      CK(s1.Synchronize());
      out.h2d = std::max(out.h2d, Gbps(bytes, Since(t)));
    }
    cuda::Free(p);
    std::vector<double> st(out.cycles.begin() + 1, out.cycles.end());
    std::sort(st.begin(), st.end());
    out.steady = st[st.size() / 2];
    return out;
  };
  std::vector<Managed> managed;
  managed.push_back(managed_run(total));
  if (total != 4 * kGiB) managed.push_back(managed_run(4 * kGiB));

  r.Line("## References (plain CUDA, same run)");
  r.Line("");
  r.Line("| path | GB/s |");
  r.Line("| --- | --- |");
  auto ref_line = [&](const std::string& name, Sample s) {
    r.Line("| " + name + " | " + F(s.median) + " (" + F(s.best) + ") |");
  };
  ref_line("D2H pinned, one " + std::to_string(args.gib) + " GiB cudaMemcpyAsync", ref_d2h);
  ref_line("H2D pinned, one copy", ref_h2d);
  ref_line("D2H pinned in 8 MiB copies", ref_d2h_8m);
  ref_line("D2H pinned in 64 KiB copies", ref_d2h_64k);
  if (ref_batch_64k.median > 0) ref_line("D2H pinned, 64 KiB pieces in one cudaMemcpyBatchAsync", ref_batch_64k);
  ref_line("D2H pageable (malloc'd, pre-touched)", ref_pageable);
  ref_line("D2H + H2D at once, pinned, two streams (total)", ref_bidir);
  for (const Managed& m : managed) {
    if (m.cycles.empty()) continue;
    const std::string sz = std::to_string(m.bytes >> 30) + " GiB";
    std::string cyc;
    for (double c : m.cycles) cyc += (cyc.empty() ? "" : ", ") + F(c);
    r.Line("| managed prefetch device -> host, " + sz + ", cycles 1..4 | " + cyc + " |");
    r.Line("| managed prefetch device -> host, " + sz + ", steady state (median of cycles 2..4) | " + F(m.steady) + " |");
    r.Line("| managed prefetch host -> device, " + sz + " (best) | " + F(m.h2d) + " |");
  }
  r.Line("| cudaMallocHost of " + std::to_string(args.gib) + " GiB | " + F(malloc_host_s, 3) + " s |");
  if (!batch_note.empty()) r.Line("| note | " + batch_note + " |");
  r.Line("");

  // ---- spillway -----------------------------------------------------------------
  PinnedPoolOptions po;
  po.capacity_bytes = 5 * total + kGiB;
  po.slab_bytes = 256 * kMiB;
  po.initial_bytes = 256 * kMiB;
  PinnedHostAllocator pool(po);
  t0 = Clock::now();
  Status warm = pool.WaitForFree(4 * total + 256 * kMiB, std::chrono::seconds(120));
  const double warm_s = Since(t0);
  if (!warm.ok()) Die("warming the pinned pool", warm);

  TierConfig gc;
  gc.name = "gpu0";
  gc.kind = TierKind::kGpu;
  gc.capacity_bytes = 6 * total;
  gc.device = 0;
  GpuTierOptions go;
  go.host_allocator = &pool;
  GpuTier tier(gc, 0, go);
  t0 = Clock::now();
  CK(tier.Open());
  const double gpu_open_ms = Since(t0) * 1e3;

  // Sources: 8 MiB objects, 64 MiB objects, 64 KiB objects (each `total`).
  Objects big8, big64, small;
  big8.Build(d_a, 8 * kMiB, total / (8 * kMiB));
  big64.Build(d_a, 64 * kMiB, total / (64 * kMiB));
  small.Build(d_a, 64 << 10, total / (64 << 10));
  t0 = Clock::now();
  auto locs8 = StoreViews(tier, big8.views);
  const double put8_s = Since(t0);
  auto locs64 = StoreViews(tier, big64.views);
  t0 = Clock::now();
  auto locs_small = StoreViews(tier, small.views);
  const double put_small_s = Since(t0);

  auto load_once = [&](std::vector<Location>& locs) {
    auto t = Clock::now();
    auto blobs = Val(tier.LoadToHost(locs), "LoadToHost");
    const double s = Since(t);
    blobs.clear();
    return s;
  };
  load_once(locs8);  // warm-up
  const Sample sp8 = Measure(total, reps, [&] { return load_once(locs8); });
  const Sample sp64 = Measure(total, reps, [&] { return load_once(locs64); });
  load_once(locs_small);
  const Sample sp_small = Measure(total, reps, [&] { return load_once(locs_small); });
  // Verify one of each (contents 0x5a).
  {
    auto b = Val(tier.LoadToHost(std::span(locs_small).subspan(0, 3)), "verify");
    for (auto& x : b) {
      for (uint64_t i = 0; i < x->size(); i += 4099) {
        if (x->data()[i] != std::byte{0x5a}) Die("verify", Status::Corruption("bad byte in a 64 KiB object"));
      }
    }
  }

  // Host -> device (promotion): 8 MiB objects from pinned host blobs.
  auto host_src = Val(tier.LoadToHost(locs8), "LoadToHost (sources)");
  std::vector<std::span<const std::byte>> hspans(host_src.size());
  std::vector<ObjectView> hviews(host_src.size());
  for (size_t i = 0; i < host_src.size(); ++i) {
    hspans[i] = {host_src[i]->data(), static_cast<size_t>(host_src[i]->size())};
    hviews[i] = ObjectView{big8.keys[i], std::span(&hspans[i], 1)};
  }
  auto h2d_once = [&] {
    auto t = Clock::now();
    auto l = StoreViews(tier, hviews);
    const double s = Since(t);
    FreeAll(tier, l);
    return s;
  };
  h2d_once();
  const Sample sp_h2d = Measure(total, reps, h2d_once);

  // Both at once: spilling 8 MiB objects while unspilling others.
  const Sample sp_bidir = Measure(2 * total, reps, [&] {
    std::vector<Location> up;
    auto t = Clock::now();
    std::thread th([&] { up = StoreViews(tier, hviews); });
    auto blobs = Val(tier.LoadToHost(locs8), "LoadToHost");
    th.join();
    const double s = Since(t);
    blobs.clear();
    FreeAll(tier, up);
    return s;
  });
  host_src.clear();

  // Host -> device of 64 KiB objects (promotion of small objects; no target).
  Sample sp_h2d_small{};
  {
    auto small_src = Val(tier.LoadToHost(locs_small), "LoadToHost (small sources)");
    std::vector<std::span<const std::byte>> sspans(small_src.size());
    std::vector<ObjectView> sviews(small_src.size());
    for (size_t i = 0; i < small_src.size(); ++i) {
      sspans[i] = {small_src[i]->data(), static_cast<size_t>(small_src[i]->size())};
      sviews[i] = ObjectView{small.keys[i], std::span(&sspans[i], 1)};
    }
    sp_h2d_small = Measure(total, std::min(reps, 3), [&] {
      auto t = Clock::now();
      auto l = StoreViews(tier, sviews);
      const double s = Since(t);
      FreeAll(tier, l);
      return s;
    });
  }

  r.Line("## spillway (GpuTier with the pinned pool)");
  r.Line("");
  r.Line("| path | GB/s | reference | ratio | target |");
  r.Line("| --- | --- | --- | --- | --- |");
  auto sp_line = [&](const std::string& name, Sample s, const std::string& ref_name, double ref, double target) {
    const double ratio = ref > 0 ? s.median / ref : 0;
    std::string verdict = target > 0 ? (ratio >= target ? "≥ " + F(target, 2) + "× met" : "≥ " + F(target, 2) + "× MISSED by " + F((target - ratio) / target * 100, 0) + "%") : "";
    r.Line("| " + name + " | " + F(s.median) + " (" + F(s.best) + ") | " + ref_name + " " + F(ref) + " | " +
           F(ratio, 2) + "× | " + verdict + " |");
  };
  sp_line("gpu → host, 8 MiB objects (LoadToHost)", sp8, "D2H pinned 1 copy", ref_d2h.median, 0.9);
  sp_line("gpu → host, 8 MiB objects", sp8, "D2H pinned 8 MiB copies", ref_d2h_8m.median, 0.9);
  sp_line("gpu → host, 8 MiB objects", sp8, "D2H pageable", ref_pageable.median, 3.0);
  for (const Managed& m : managed) {
    if (m.cycles.empty()) continue;
    const std::string sz = std::to_string(m.bytes >> 30) + " GiB";
    sp_line("gpu → host, 8 MiB objects", sp8, "managed prefetch " + sz + ", steady", m.steady, 5.0);
    sp_line("gpu → host, 8 MiB objects", sp8, "managed prefetch " + sz + ", first cycle", m.cycles[0], 0);
  }
  r.Line("| (ceiling for any spiller: one pinned copy vs managed steady state) | | | " +
         (managed.empty() || managed[0].steady <= 0 ? std::string("-") : F(ref_d2h.median / managed[0].steady) + "× at " +
          std::to_string(managed[0].bytes >> 30) + " GiB") + " | |");
  sp_line("gpu → host, 64 MiB objects", sp64, "D2H pinned 1 copy", ref_d2h.median, 0.9);
  sp_line("gpu → host, 64 KiB objects, batched", sp_small, "D2H pinned 1 copy", ref_d2h.median, 0.7);
  sp_line("gpu → host, 64 KiB objects, batched", sp_small, "D2H pinned 64 KiB copies", ref_d2h_64k.median, 0);
  sp_line("host → gpu, 8 MiB objects (Store from pinned)", sp_h2d, "H2D pinned 1 copy", ref_h2d.median, 0.9);
  sp_line("gpu → host and host → gpu at once (total)", sp_bidir, "bidirectional pinned", ref_bidir.median, 0.8);
  sp_line("host → gpu, 64 KiB objects (Store from pinned, one copy each)", sp_h2d_small, "H2D pinned 1 copy",
          ref_h2d.median, 0);
  r.Line("");

  // ---- managed mode of the tier ------------------------------------------------
  {
    TierConfig mc = gc;
    mc.name = "gpu-managed";
    mc.memory = GpuMemory::kManaged;
    mc.capacity_bytes = total + 64 * kMiB;
    GpuTier mt(mc, 0);
    Status st = mt.Open();
    if (st.ok()) {
      auto ml = StoreViews(mt, big8.views);
      std::vector<double> cyc;
      for (int c = 0; c < 4; ++c) {
        auto t = Clock::now();
        auto blobs = Val(mt.LoadToHost(ml), "managed LoadToHost");
        cyc.push_back(Gbps(total, Since(t)));
        blobs.clear();
        CK(mt.PrefetchToDevice(ml));
      }
      FreeAll(mt, ml);
      std::string s;
      for (double c : cyc) s += (s.empty() ? "" : ", ") + F(c);
      r.Line("- GpuTier in `memory: managed` mode, 8 MiB objects demoted by prefetch, cycles 1..4: " + s + " GB/s");
    } else {
      r.Line("- GpuTier managed mode not measured: " + st.ToString());
    }
  }

  // ---- gpu -> file through the host --------------------------------------------
  if (!args.skip_file) {
    Status st = GpuToFile(r, args, tier, pool, locs8, total, ref_d2h.median);
    if (!st.ok()) r.Line("- gpu → file not measured: " + st.ToString());
  }

  FreeAll(tier, locs8);
  FreeAll(tier, locs64);
  FreeAll(tier, locs_small);

  r.Line("");
  r.Line("## Start-up and other figures");
  r.Line("");
  r.Line("| what | figure | target |");
  r.Line("| --- | --- | --- |");
  r.Line("| open a 64 GiB pinned host tier (PinnedHostAllocator + HostTier + first Allocate) | " + F(open_ms, 3) +
         " ms | < 100 ms: " + (open_ms < 100 ? "met" : "MISSED") + " |");
  r.Line("| config GPU probe, cold (DetectGpus: driver start) | " + F(probe_ms, 1) +
         " ms | |");
  r.Line("| GpuTier::Open (context already made) | " + F(gpu_open_ms, 1) + " ms | |");
  PinnedPoolStats ps = pool.stats();
  r.Line("| pinned pool warm-up in the background: " + F(ps.slab_bytes / double(kGiB), 2) + " GiB in " +
         std::to_string(ps.slabs) + " slabs | " + F(ps.pin_seconds, 2) + " s pinning (" + F(warm_s, 2) +
         " s waited) | |");
  r.Line("| pinned pool fallbacks to malloc during the run | " + std::to_string(ps.fallback_allocations) + " | 0 |");
  r.Line("| Put of device objects (D2D into the pool), 8 MiB objects | " + F(Gbps(total, put8_s)) + " GB/s | |");
  r.Line("| Put of device objects, 64 KiB objects | " + F(Gbps(total, put_small_s)) + " GB/s | |");

  cuda::FreeHost(h_a);
  cuda::FreeHost(h_b);
  cuda::Free(d_a);
  cuda::Free(d_b);
  const int engine_rc = args.skip_engine ? 0 : engine_section();
  if (!args.out.empty()) {
    std::ofstream f(args.out);
    f << r.md.str();
  }
  return engine_rc;
}

}  // namespace
}  // namespace spillway::gpubench

int main(int argc, char** argv) { return spillway::gpubench::Run(spillway::gpubench::Parse(argc, argv)); }