// What gpu_bench's sections share: timing, GB/s samples, the markdown
// report, the command line's values, device-object views, and dying on a
// failed call (a benchmark has no caller to return an error to).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "spillway/status.h"
#include "tiers/gpu_tier.h"
#include "tiers/pinned_pool.h"
#include "tiers/tier.h"

namespace spillway::gpubench {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

inline double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
inline double Gbps(uint64_t bytes, double secs) { return secs > 0 ? bytes / 1e9 / secs : 0; }

inline void Die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "gpu_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  std::exit(1);
}
#define CK(expr)                                 \
  do {                                           \
    ::spillway::Status _s = (expr);              \
    if (!_s.ok()) Die(#expr, _s);                \
  } while (0)
template <typename T>
T Val(StatusOr<T> v, const char* what) {
  if (!v.ok()) Die(what, v.status());
  return std::move(*v);
}

struct Sample {
  double median = 0, best = 0;
};
// Runs `once` (returns seconds) `reps` times; GB/s median and best.
inline Sample Measure(uint64_t bytes, int reps, const std::function<double()>& once) {
  std::vector<double> g;
  for (int i = 0; i < reps; ++i) g.push_back(Gbps(bytes, once()));
  std::sort(g.begin(), g.end());
  return {g[g.size() / 2], g.back()};
}

struct Report {
  std::ostringstream md;
  void Line(const std::string& s) {
    md << s << "\n";
    std::printf("%s\n", s.c_str());
    std::fflush(stdout);
  }
};

inline std::string F(double v, int prec = 2) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

struct Args {
  std::string out;
  std::string dir;
  uint64_t gib = 1;
  int reps = 5;
  bool skip_file = false;
  bool engine_only = false;  // only the engine-level section (engine_bench.cc)
  bool skip_engine = false;
  uint64_t engine_gib = 4;
};

// Device-object views over slices of one device buffer.
struct Objects {
  std::vector<std::string> keys;
  std::vector<std::span<const std::byte>> spans;
  std::vector<ObjectView> views;
  void Build(const std::byte* base, uint64_t object_bytes, uint64_t count) {
    keys.resize(count);
    spans.resize(count);
    views.resize(count);
    for (uint64_t i = 0; i < count; ++i) {
      keys[i] = "o" + std::to_string(i);
      spans[i] = {base + i * object_bytes, static_cast<size_t>(object_bytes)};
    }
    for (uint64_t i = 0; i < count; ++i) views[i] = ObjectView{keys[i], std::span(&spans[i], 1)};
  }
};

inline std::vector<Location> StoreViews(GpuTier& tier, std::vector<ObjectView>& views) {
  for (auto& v : views) {
    if (!tier.TryReserve(tier.ReserveEstimate(v))) Die("gpu tier reserve", Status::NoSpace("tier full"));
  }
  return Val(tier.Store(views), "GpuTier::Store");
}

inline void FreeAll(Tier& tier, std::vector<Location>& locs) {
  for (auto& l : locs) tier.Free(l);
  locs.clear();
}

// gpu -> file through the host, streamed (gpu_to_file.cc).
Status GpuToFile(Report& r, const Args& args, GpuTier& tier, PinnedHostAllocator& pool,
                 std::vector<Location>& locs8, uint64_t total, double pcie_d2h);

}  // namespace spillway::gpubench
