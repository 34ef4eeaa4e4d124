// `spillway bench` section 3: small objects held in the host tier. Put and
// Get-hit throughput with p50/p99 latency on 1 and 2 threads, and the memory
// the engine spends per object.
//
// Throughput is timed over the whole loop; latency is sampled on every 8th
// operation (two clock reads per 8 operations cost under 1% of the loop).
// Keys are formatted before the clock starts. Get hits pick keys uniformly at
// random; every 64th hit is compared with its source.
//
// Memory per object runs in a child process (`--memory-probe`, hidden) so that
// freed heap of the earlier sections cannot absorb the growth: RSS after N1
// and after N2 Puts of 16-byte values under 16-byte keys; the marginal bytes
// per object minus the 32 bytes of key and value is the engine's metadata.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "base/parse_number.h"
#include "base/process_memory.h"
#include "bench/harness/common.h"
#include "spillway/engine.h"

namespace spillway::bench {
namespace {

constexpr int kSampleEvery = 8;
constexpr uint64_t kMemValueBytes = 16;
constexpr size_t kMemKeyBytes = 16;

Config HostOnly(uint64_t capacity) {
  Config c;
  c.source = "<spillway bench>";
  c.tiers.push_back(BenchHostTier(capacity));
  return c;
}

struct OpStats {
  double ops_per_s = kNaN, p50_us = kNaN, p99_us = kNaN;
  uint64_t bad = 0;
  std::string error;
};

uint64_t XorShift(uint64_t& s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Runs body(thread, i, sample) for `per_thread` iterations on `threads`
// threads; body returns false on a failure.
template <typename Body>
OpStats RunThreads(int threads, uint64_t per_thread, Body&& body) {
  std::vector<std::vector<double>> lat(threads);
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  std::vector<double> secs(threads);
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      lat[t].reserve(per_thread / kSampleEvery + 1);
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      const double start = Now();
      for (uint64_t i = 0; i < per_thread; ++i) {
        if (i % kSampleEvery == 0) {
          const auto a = std::chrono::steady_clock::now();
          body(t, i, true);
          lat[t].push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count());
        } else {
          body(t, i, false);
        }
      }
      secs[t] = Now() - start;
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  go.store(true, std::memory_order_release);
  for (auto& th : ts) th.join();
  OpStats s;
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  const double wall = *std::max_element(secs.begin(), secs.end());
  s.ops_per_s = wall > 0 ? threads * per_thread / wall : kNaN;
  s.p50_us = Quantile(all, 0.50);
  s.p99_us = Quantile(all, 0.99);
  return s;
}

struct SmallResult {
  OpStats put, get, baseline;
};

SmallResult RunSmall(const DataPool& pool, uint64_t size, uint64_t objects, int threads, uint64_t gets_per_thread) {
  SmallResult res;
  auto opened = Engine::Open(HostOnly(64 * kGiB));
  if (!opened.ok()) {
    res.put.error = opened.status().ToString();
    return res;
  }
  std::unique_ptr<Engine> engine = std::move(*opened);
  std::vector<std::string> keys(objects);
  for (uint64_t i = 0; i < objects; ++i) {
    char k[32];
    std::snprintf(k, sizeof(k), "small/%010llu", static_cast<unsigned long long>(i));
    keys[i] = k;
  }
  std::mutex mu;
  std::string first_error;
  auto fail = [&](const std::string& e) {
    std::lock_guard<std::mutex> l(mu);
    if (first_error.empty()) first_error = e;
  };
  const uint64_t per_thread = objects / threads;
  res.put = RunThreads(threads, per_thread, [&](int t, uint64_t i, bool) {
    const uint64_t k = t * per_thread + i;
    Status st = engine->Put(keys[k], pool.Slice(k, size));
    if (!st.ok()) fail("put: " + st.ToString());
  });
  std::atomic<uint64_t> bad{0};
  std::vector<uint64_t> seeds(threads);
  for (int t = 0; t < threads; ++t) seeds[t] = 0x9E3779B97F4A7C15ull * (t + 1);
  const uint64_t stored = per_thread * threads;
  res.get = RunThreads(threads, gets_per_thread, [&](int t, uint64_t i, bool) {
    const uint64_t k = XorShift(seeds[t]) % stored;
    auto h = engine->Get(keys[k]);
    if (!h.ok()) {
      fail("get: " + h.status().ToString());
      return;
    }
    if (h->size() != size) bad.fetch_add(1, std::memory_order_relaxed);
    // Every 64th hit (never a latency-sampled one) is compared in full.
    if (i % 64 == 1) {
      const auto want = pool.Slice(k, size);
      if (std::memcmp(h->buffer(0).data(), want.data(), size) != 0) bad.fetch_add(1, std::memory_order_relaxed);
    }
  });
  res.get.bad = bad.load();
  if (!first_error.empty()) res.put.error = first_error;
  if (res.get.bad) res.get.error = std::to_string(res.get.bad) + " Gets returned wrong bytes";

  // In-run baseline: a mutex-guarded std::unordered_map of shared_ptr blobs,
  // the simplest thread-safe object cache, on the same keys and threads.
  if (size <= 100) {
    std::unordered_map<std::string, std::shared_ptr<std::vector<std::byte>>> map;
    std::mutex map_mu;
    for (uint64_t k = 0; k < stored; ++k) {
      auto s = pool.Slice(k, size);
      map.emplace(keys[k], std::make_shared<std::vector<std::byte>>(s.begin(), s.end()));
    }
    for (int t = 0; t < threads; ++t) seeds[t] = 0x9E3779B97F4A7C15ull * (t + 1);
    std::atomic<uint64_t> sink{0};
    res.baseline = RunThreads(threads, gets_per_thread, [&](int t, uint64_t, bool) {
      const uint64_t k = XorShift(seeds[t]) % stored;
      std::shared_ptr<std::vector<std::byte>> v;
      {
        std::lock_guard<std::mutex> l(map_mu);
        v = map.find(keys[k])->second;
      }
      sink.fetch_add(v->size(), std::memory_order_relaxed);
    });
  }
  return res;
}

}  // namespace

int RunMemoryProbe(const std::string& spec) {
  const size_t comma = spec.find(',');
  uint64_t first = 0, second = 0;
  std::string why;
  if (comma == std::string::npos || !ParseWholeNumber(spec.substr(0, comma), 1, UINT64_MAX, &first, &why) ||
      !ParseWholeNumber(spec.substr(comma + 1), 2, UINT64_MAX, &second, &why) || second <= first) {
    std::fprintf(stderr, "--memory-probe wants N1,N2 with 0 < N1 < N2\n");
    return 2;
  }
  const unsigned long long n1 = first, n2 = second;
  auto opened = Engine::Open(HostOnly(64 * kGiB));
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  Engine& e = **opened;
  // Warm the allocator and the engine's lazily built state.
  std::byte value[kMemValueBytes] = {};
  (void)e.Put("warm", value);
  (void)e.Erase("warm");
  const uint64_t rss0 = ProcessResidentBytes();
  uint64_t rss1 = 0;
  char key[kMemKeyBytes + 1];
  for (unsigned long long i = 0; i < n2; ++i) {
    std::snprintf(key, sizeof(key), "m/%014llu", i % 100000000000000ull);  // 16 bytes
    std::memcpy(value, &i, sizeof(i));
    Status st = e.Put(std::string_view(key, kMemKeyBytes), value);
    if (!st.ok()) {
      std::fprintf(stderr, "put %llu: %s\n", i, st.ToString().c_str());
      return 1;
    }
    if (i + 1 == n1) rss1 = ProcessResidentBytes();
  }
  const uint64_t rss2 = ProcessResidentBytes();
  std::printf("{\"n1\":%llu,\"n2\":%llu,\"rss0\":%llu,\"rss1\":%llu,\"rss2\":%llu,\"key_bytes\":%zu,\"value_bytes\":%llu}\n",
              n1, n2, (unsigned long long)rss0, (unsigned long long)rss1, (unsigned long long)rss2, kMemKeyBytes,
              (unsigned long long)kMemValueBytes);
  std::fflush(stdout);
  // Tearing down millions of entries proves nothing here; skip it.
  ::_exit(0);
}

void RunSmallSection(Context& ctx) {
  const Options& o = ctx.options;
  Report& rep = ctx.report;
  const int reps = o.Reps();
  const std::vector<uint64_t> sizes = {100, kKiB, 4 * kKiB};
  const std::vector<int> thread_counts = {1, 2};
  const long cores = std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN));
  ctx.progress.Begin("3 small objects", 0.2, reps * static_cast<int>(sizes.size() * thread_counts.size()) + 1);
  nlohmann::json runs = nlohmann::json::array();
  for (uint64_t size : sizes) {
    const uint64_t objects = std::min<uint64_t>(o.quick ? 100'000 : 200'000, (o.quick ? 256 : 512) * kMiB / size);
    for (int threads : thread_counts) {
      std::vector<double> put_ops(reps), get_core(reps), base_core(reps, kNaN);
      std::vector<double> put_p50(reps), put_p99(reps), get_p50(reps), get_p99(reps);
      std::string error;
      const uint64_t gets = o.quick ? 200'000 : 500'000;
      for (int r = 0; r < reps; ++r) {
        ctx.progress.Step(SizeName(size) + ", " + std::to_string(threads) + " thread(s)");
        SmallResult s = RunSmall(ctx.pool, size, objects, threads, gets);
        const double per_core = std::min<double>(threads, cores);
        put_ops[r] = s.put.ops_per_s;
        get_core[r] = s.get.ops_per_s / per_core;
        base_core[r] = s.baseline.ops_per_s / per_core;
        put_p50[r] = s.put.p50_us, put_p99[r] = s.put.p99_us;
        get_p50[r] = s.get.p50_us, get_p99[r] = s.get.p99_us;
        if (error.empty()) error = !s.put.error.empty() ? s.put.error : s.get.error;
        runs.push_back({{"rep", r}, {"object_bytes", size}, {"threads", threads}, {"objects", objects},
                        {"put_ops_per_s", s.put.ops_per_s}, {"put_p50_us", s.put.p50_us}, {"put_p99_us", s.put.p99_us},
                        {"get_ops_per_s", s.get.ops_per_s}, {"get_p50_us", s.get.p50_us}, {"get_p99_us", s.get.p99_us},
                        {"baseline_get_ops_per_s", s.baseline.ops_per_s}, {"error", error}});
      }
      const std::string tag = std::to_string(size) + "." + std::to_string(threads) + "t";
      const std::string where = SizeName(size) + ", " + std::to_string(threads) + (threads == 1 ? " thread" : " threads");
      char fig[160];
      std::snprintf(fig, sizeof(fig), "Put %s (p50 %.2f us, p99 %.2f us)", where.c_str(), Median(put_p50), Median(put_p99));
      rep.Add(Row{"small.put." + tag, 3, fig, Median(put_ops), "ops/s", "", kNaN, kNaN, kNaN, Better::kHigher, "",
                  error, put_ops});
      std::snprintf(fig, sizeof(fig), "Get hit %s, per core (p50 %.2f us, p99 %.2f us)", where.c_str(), Median(get_p50),
                    Median(get_p99));
      rep.Add(Row{"small.get." + tag, 3, fig, Median(get_core), "ops/s/core", "", kNaN, kNaN, 1e6, Better::kHigher,
                  ">= 1,000,000 per core", error, get_core});
      if (size <= 100) {
        rep.Add(Row{"small.baseline_get." + tag, 3,
                    "(baseline: mutex + std::unordered_map of shared_ptr, Get " + where + ", per core)",
                    Median(base_core), "ops/s/core", "", kNaN, kNaN, kNaN, Better::kHigher, "", "", base_core});
      }
      rep.Line("small", "Get hit, " + std::to_string(threads) + "T (per core)").points.push_back({double(size), Median(get_core)});
      rep.Line("small", "Put, " + std::to_string(threads) + "T").points.push_back({double(size), Median(put_ops)});
    }
  }
  rep.details["small"] = runs;

  // Memory per object, in a child process.
  ctx.progress.Step("memory per object");
  const uint64_t n1 = o.quick ? 100'000 : 1'000'000, n2 = o.quick ? 1'000'000 : 10'000'000;
  int rc = 0;
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof(self) - 1) <= 0) std::strcpy(self, "spillway");
  const std::string out = RunCapture(ShellQuote(self) + " bench --memory-probe " + std::to_string(n1) + "," +
                                         std::to_string(n2) + " 2>&1",
                                     &rc);
  double marginal = kNaN, at_n1 = kNaN, at_n2 = kNaN;
  std::string error;
  try {
    auto j = nlohmann::json::parse(out.substr(out.find('{')));
    const double rss0 = j.at("rss0"), rss1 = j.at("rss1"), rss2 = j.at("rss2");
    const double payload = kMemKeyBytes + kMemValueBytes;
    marginal = (rss2 - rss1) / static_cast<double>(n2 - n1) - payload;
    at_n1 = (rss1 - rss0) / static_cast<double>(n1) - payload;
    at_n2 = (rss2 - rss0) / static_cast<double>(n2) - payload;
    rep.details["memory"] = j;
  } catch (const std::exception& e) {
    error = "memory probe failed (exit " + std::to_string(rc) + "): " + out.substr(0, 200);
  }
  rep.Add(Row{"memory.marginal", 3,
              "metadata per object, marginal from " + std::to_string(n1 / 1000) + " K to " + std::to_string(n2 / 1000) +
                  " K objects (RSS growth - 32 B key+value)",
              marginal, "B/object", "", kNaN, kNaN, 64, Better::kLower, "<= 64 B plus the key", error, {marginal}});
  rep.Add(Row{"memory.at_n1", 3, "metadata per object at " + std::to_string(n1 / 1000) + " K objects", at_n1,
              "B/object", "", kNaN, kNaN, kNaN, Better::kLower, "", error, {at_n1}});
  rep.Add(Row{"memory.at_n2", 3, "metadata per object at " + std::to_string(n2 / 1000) + " K objects", at_n2,
              "B/object", "", kNaN, kNaN, kNaN, Better::kLower, "", error, {at_n2}});
  rep.Note("Section 3: host tier only (64 GiB capacity, plain malloc), " + std::string(o.quick ? "100 K" : "200 K") +
           " objects per size (at most " + (o.quick ? "256" : "512") + " MiB), then " +
           (o.quick ? "200 K" : "500 K") + " uniformly random Get hits per thread; per core = ops/s / min(threads, " +
           std::to_string(cores) + " cores). Latency sampled on every 8th operation.");
}

}  // namespace spillway::bench
