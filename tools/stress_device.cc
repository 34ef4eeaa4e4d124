// `spillway stress --device` (see stress_device.h). Each thread owns the keys
// k with k % threads == thread, so the model needs no locking. Objects are
// made on the host from the seeded pattern (base/pattern.h), copied into
// device memory from the engine (AllocateDevice), and stored either adopted
// (PutDeviceAllocation: the engine owns the allocation, whose release drops
// our reference) or copied (Put with memory kDevice). Reads copy every device
// buffer back to the host and compare it with the pattern.
#include "tools/stress_device.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "base/cuda_runtime.h"
#include "base/pattern.h"
#include "engine/stats_export.h"
#include "spillway/engine.h"
#include "tools/cli_util.h"

namespace spillway::cli {
namespace {

struct Model {
  uint64_t seed = 0;  // 0: absent
  uint64_t size = 0;
  uint32_t buffers = 1;
};

struct Counts {
  std::atomic<uint64_t> ops{0}, adopted{0}, copied{0}, gets_device{0}, gets_any{0}, acquires{0}, erases{0},
      flushes{0}, on_device{0}, verified_bytes{0};
  std::atomic<uint64_t> lost{0}, corrupt{0}, errors{0}, no_space{0}, releases{0};
  std::mutex mu;
  std::string first;
  void Problem(const std::string& what, std::atomic<uint64_t>& c) {
    c.fetch_add(1);
    std::lock_guard<std::mutex> l(mu);
    if (first.empty()) first = what;
  }
};

std::string Key(uint64_t k) { return "dstress/" + std::to_string(k); }

std::vector<uint64_t> Split(const Model& m) {
  std::vector<uint64_t> s;
  uint64_t off = 0;
  for (uint32_t i = 0; i < m.buffers; ++i) {
    const uint64_t n = (i + 1 == m.buffers) ? m.size - off : m.size / m.buffers;
    s.push_back(n);
    off += n;
  }
  return s;
}

// Copies each buffer of `h` to the host (device or host memory alike) and
// compares it with the model's pattern; "" when equal.
std::string Verify(const Handle& h, const Model& m, std::vector<std::byte>& scratch, Counts& c) {
  if (h.size() != m.size) return "size " + std::to_string(h.size()) + " != " + std::to_string(m.size);
  if (h.num_buffers() != m.buffers) return "buffer count " + std::to_string(h.num_buffers());
  uint64_t off = 0;
  for (size_t i = 0; i < h.num_buffers(); ++i) {
    auto b = h.buffer(i);
    std::span<const std::byte> host = b;
    if (h.where() == Where::kDevice && !b.empty()) {
      scratch.resize(b.size());
      Status st = cuda::Memcpy(scratch.data(), b.data(), b.size());
      if (!st.ok()) return "copy back: " + st.ToString();
      host = {scratch.data(), b.size()};
    }
    if (!CheckPattern(m.seed, off, host)) return "bytes differ in buffer " + std::to_string(i);
    off += b.size();
  }
  c.verified_bytes.fetch_add(m.size, std::memory_order_relaxed);
  return "";
}

Status PutDevice(Engine& e, const std::string& key, const Model& m, bool adopt, std::vector<std::byte>& host,
                 Counts& c) {
  host.resize(m.size);
  FillPattern(m.seed, 0, host);
  auto mem = e.AllocateDevice(m.size);
  if (!mem.ok()) return mem.status();
  SPILLWAY_RETURN_IF_ERROR(cuda::Memcpy(mem->get(), host.data(), m.size));
  const std::vector<uint64_t> sizes = Split(m);
  if (adopt) {
    void* p = mem->get();
    auto holder = std::make_shared<std::shared_ptr<void>>(std::move(*mem));
    return e.PutDeviceAllocation(key, p, sizes, [holder, &c](void*) {
      holder->reset();
      c.releases.fetch_add(1, std::memory_order_relaxed);
    });
  }
  std::vector<std::span<const std::byte>> bufs;
  uint64_t off = 0;
  for (uint64_t n : sizes) {
    bufs.emplace_back(static_cast<const std::byte*>(mem->get()) + off, n);
    off += n;
  }
  PutOptions po;
  po.memory = Where::kDevice;
  return e.Put(key, bufs, po);
}

void Read(Engine& e, const std::string& key, const Model& m, Where w, uint64_t seed, std::vector<std::byte>& scratch,
          Counts& c) {
  auto h = e.Get(key, w);
  if (m.seed == 0) {
    if (h.ok()) c.Problem("seed " + std::to_string(seed) + ": erased " + key + " came back", c.corrupt);
    return;
  }
  if (!h.ok()) {
    if (h.status().IsNoSpace()) {
      c.no_space.fetch_add(1);  // no room on the device right now; the final pass decides
    } else {
      c.Problem("seed " + std::to_string(seed) + ": " + key + ": " + h.status().ToString(),
                h.status().IsCorruption() ? c.corrupt : c.lost);
    }
    return;
  }
  if (w == Where::kDevice && h->where() != Where::kDevice) {
    c.Problem(key + ": Get(kDevice) returned host memory", c.corrupt);
  }
  if (h->where() == Where::kDevice) c.on_device.fetch_add(1, std::memory_order_relaxed);
  std::string bad = Verify(*h, m, scratch, c);
  if (!bad.empty()) c.Problem("seed " + std::to_string(seed) + ": " + key + ": " + bad, c.corrupt);
}

void Worker(Engine& e, const DeviceStressOptions& o, int tid, uint64_t lo, uint64_t hi, std::vector<Model>& model,
            Counts& c, std::chrono::steady_clock::time_point deadline) {
  std::mt19937_64 rng(o.seed * 1000003 + tid);
  std::vector<std::byte> host, scratch;
  std::vector<uint64_t> mine;
  for (uint64_t k = tid; k < o.keys; k += o.threads) mine.push_back(k);
  if (mine.empty()) return;
  const uint64_t my_ops = o.ops / o.threads + (static_cast<uint64_t>(tid) < o.ops % o.threads ? 1 : 0);
  std::uniform_real_distribution<double> logsize(std::log(double(lo)), std::log(double(hi) + 1));
  for (uint64_t i = 0;; ++i) {
    if (o.seconds > 0 ? std::chrono::steady_clock::now() >= deadline : i >= my_ops) break;
    const uint64_t k = mine[rng() % mine.size()];
    Model& m = model[k];
    const std::string key = Key(k);
    const int dice = static_cast<int>(rng() % 1000);
    c.ops.fetch_add(1, std::memory_order_relaxed);
    if (dice < 350) {  // put or overwrite
      Model n;
      n.seed = rng() | 1;
      n.size = std::min<uint64_t>(hi, std::max<uint64_t>(lo, static_cast<uint64_t>(std::exp(logsize(rng)))));
      n.buffers = 1 + static_cast<uint32_t>(rng() % 3);
      const bool adopt = rng() % 2 == 0;
      Status st = PutDevice(e, key, n, adopt, host, c);
      (adopt ? c.adopted : c.copied).fetch_add(1, std::memory_order_relaxed);
      if (st.ok()) {
        m = n;
      } else if (st.IsNoSpace()) {
        c.no_space.fetch_add(1);  // the previous value must remain
      } else {
        c.Problem("seed " + std::to_string(o.seed) + ": put " + key + ": " + st.ToString(), c.errors);
      }
    } else if (dice < 700) {
      c.gets_device.fetch_add(1, std::memory_order_relaxed);
      Read(e, key, m, Where::kDevice, o.seed, scratch, c);
    } else if (dice < 800) {
      c.gets_any.fetch_add(1, std::memory_order_relaxed);
      Read(e, key, m, Where::kAny, o.seed, scratch, c);
    } else if (dice < 900) {  // Acquire up to 4 present keys of this thread onto the device
      std::vector<std::string> keys;
      std::vector<const Model*> models;
      for (int j = 0; j < 4; ++j) {
        const uint64_t q = mine[rng() % mine.size()];
        if (model[q].seed == 0) continue;
        bool dup = false;
        for (auto& s : keys) dup |= s == Key(q);
        if (dup) continue;
        keys.push_back(Key(q));
        models.push_back(&model[q]);
      }
      if (keys.empty()) continue;
      c.acquires.fetch_add(1, std::memory_order_relaxed);
      auto hs = e.Acquire(keys, Where::kDevice);
      if (!hs.ok()) {
        if (hs.status().IsNoSpace()) {
          c.no_space.fetch_add(1);
        } else {
          c.Problem("seed " + std::to_string(o.seed) + ": acquire: " + hs.status().ToString(), c.lost);
        }
        continue;
      }
      for (size_t j = 0; j < hs->size(); ++j) {
        if ((*hs)[j].where() != Where::kDevice) c.Problem(keys[j] + ": Acquire(kDevice) gave host memory", c.corrupt);
        std::string bad = Verify((*hs)[j], *models[j], scratch, c);
        if (!bad.empty()) c.Problem("seed " + std::to_string(o.seed) + ": acquire " + keys[j] + ": " + bad, c.corrupt);
      }
    } else if (dice < 995) {
      c.erases.fetch_add(1, std::memory_order_relaxed);
      Status st = e.Erase(key);
      if (st.ok()) {
        m = Model();
      } else if (!st.IsNotFound() || m.seed != 0) {
        c.Problem("seed " + std::to_string(o.seed) + ": erase " + key + ": " + st.ToString(), c.lost);
      }
    } else {
      c.flushes.fetch_add(1, std::memory_order_relaxed);
      Status st = e.Flush();
      if (!st.ok()) c.Problem("flush: " + st.ToString(), c.errors);
    }
  }
}

}  // namespace

int RunDeviceStress(const DeviceStressOptions& o) {
  uint64_t lo = 4096, hi = 4ull << 20;
  std::string why;
  if (!o.sizes.empty() && !ParseSizeRange(o.sizes, &lo, &hi, &why)) {
    std::fprintf(stderr, "spillway stress --device: --sizes '%s': %s\n", o.sizes.c_str(), why.c_str());
    return 2;
  }
  if (lo == 0) lo = 1;
  // Each thread fills one object's bytes on the host and copies another back:
  // a MAX the machine cannot allocate is refused here, not met as bad_alloc.
  if (!StressSizesFit(hi, o.threads, &why)) {
    std::fprintf(stderr, "spillway stress --device: --sizes '%s': %s\n", o.sizes.c_str(), why.c_str());
    return 2;
  }
  EngineOptions eo;
  eo.profile = o.profile;
  auto engine = Engine::OpenFile(o.config, eo);
  if (!engine.ok()) {
    std::fprintf(stderr, "spillway stress --device: %s\n", engine.status().ToString().c_str());
    return 2;
  }
  Engine& e = **engine;
  {
    auto probe = e.AllocateDevice(1);
    if (!probe.ok()) {
      std::fprintf(stderr, "spillway stress --device: the chain needs a usable gpu tier: %s\n",
                   probe.status().ToString().c_str());
      return 2;
    }
  }
  std::vector<Model> model(o.keys);
  Counts c;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                    std::chrono::duration<double>(o.seconds));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) {
    threads.emplace_back([&, t] { Worker(e, o, t, lo, hi, model, c, deadline); });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  Status fs = e.Flush();
  if (!fs.ok()) c.Problem("final flush: " + fs.ToString(), c.lost);
  uint64_t verified = 0, present = 0;
  if (o.verify) {
    std::vector<std::byte> scratch;
    for (uint64_t k = 0; k < o.keys; ++k) {
      const Model& m = model[k];
      present += m.seed != 0;
      auto h = e.Get(Key(k), Where::kDevice);
      if (m.seed == 0) {
        if (h.ok()) c.Problem("final: erased " + Key(k) + " came back", c.corrupt);
        continue;
      }
      if (!h.ok()) {
        c.Problem("seed " + std::to_string(o.seed) + ": final read of " + Key(k) + ": " + h.status().ToString(),
                  h.status().IsCorruption() ? c.corrupt : c.lost);
        continue;
      }
      if (h->where() != Where::kDevice) c.Problem("final: " + Key(k) + " not on the device", c.corrupt);
      std::string bad = Verify(*h, m, scratch, c);
      if (!bad.empty()) c.Problem("seed " + std::to_string(o.seed) + ": final read of " + Key(k) + ": " + bad, c.corrupt);
      ++verified;
    }
  }
  EngineStats stats = e.Stats();
  const uint64_t bad = c.lost.load() + c.corrupt.load() + c.errors.load();
  if (o.json) {
    nlohmann::json j = {{"device", true}, {"ops", c.ops.load()}, {"seconds", secs},
                        {"puts_adopted", c.adopted.load()}, {"puts_copied", c.copied.load()},
                        {"gets_device", c.gets_device.load()}, {"gets_any", c.gets_any.load()},
                        {"acquires", c.acquires.load()}, {"erases", c.erases.load()}, {"flushes", c.flushes.load()},
                        {"releases", c.releases.load()}, {"no_space", c.no_space.load()},
                        {"verified_bytes", c.verified_bytes.load()}, {"verified", verified}, {"present", present},
                        {"lost", c.lost.load()}, {"corrupt", c.corrupt.load()}, {"errors", c.errors.load()},
                        {"first_problem", c.first}, {"seed", o.seed}, {"threads", o.threads},
                        {"stats", nlohmann::json::parse(StatsToJson(stats))}};
    j["ok"] = bad == 0;  // as the exit status says (docs/cli.md)
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s", FormatStatsTable(stats).c_str());
    std::printf("\nstress --device: seed %llu, %d threads, %llu ops in %.2f s\n",
                static_cast<unsigned long long>(o.seed), o.threads, static_cast<unsigned long long>(c.ops.load()),
                secs);
    std::printf("        puts adopted %llu copied %llu, Get(kDevice) %llu, Get(kAny) %llu, Acquire %llu, erases %llu, "
                "flushes %llu\n",
                static_cast<unsigned long long>(c.adopted.load()), static_cast<unsigned long long>(c.copied.load()),
                static_cast<unsigned long long>(c.gets_device.load()),
                static_cast<unsigned long long>(c.gets_any.load()), static_cast<unsigned long long>(c.acquires.load()),
                static_cast<unsigned long long>(c.erases.load()), static_cast<unsigned long long>(c.flushes.load()));
    std::printf("        adopted allocations released %llu, no space %llu, %.2f GB verified on copy-back\n",
                static_cast<unsigned long long>(c.releases.load()), static_cast<unsigned long long>(c.no_space.load()),
                c.verified_bytes.load() / 1e9);
    std::printf("        verified %llu objects: lost %llu corrupt %llu errors %llu\n",
                static_cast<unsigned long long>(verified), static_cast<unsigned long long>(c.lost.load()),
                static_cast<unsigned long long>(c.corrupt.load()), static_cast<unsigned long long>(c.errors.load()));
    if (!c.first.empty()) std::printf("first discrepancy: %s (replay with --seed %llu)\n", c.first.c_str(),
                                      static_cast<unsigned long long>(o.seed));
  }
  engine->reset();
  return bad == 0 ? 0 : 1;
}

}  // namespace spillway::cli
