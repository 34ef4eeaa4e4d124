// `spillway bench` section 4: does the cost of spilling grow linearly?
//
// Against object count: 1 KiB objects, 10^3 .. 10^6 of them (quick: to
// 10^5), the host tier 1/8 of the data (at least 1 MiB) so about the same
// share spills at every count. Against bytes: 1 MiB objects, 1x .. 8x a fixed
// host tier. The growth exponent is the least-squares slope of log(wall time)
// against log(objects or bytes spilled to the file tier): 1.0 is linear; fixed
// costs (engine open, the final fdatasync) pull it below 1 at small sizes.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <tuple>

#include "base/cuda_runtime.h"
#include "bench/harness/common.h"

namespace spillway::bench {

void RunScalingSection(Context& ctx) {
  const Options& o = ctx.options;
  Report& rep = ctx.report;
  const int reps = o.Reps();
  std::vector<uint64_t> counts = {1'000, 10'000, 100'000};
  if (!o.quick) counts.push_back(1'000'000);
  const uint64_t host_fixed = o.quick ? 64 * kMiB : 128 * kMiB;
  const std::vector<uint64_t> multiples = {1, 2, 4, 8};
  const std::string dir = o.dir + "/scaling";
  ctx.progress.Begin("4 scaling", 0.15, reps * static_cast<int>(counts.size() + multiples.size()));
  nlohmann::json runs = nlohmann::json::array();

  struct Point {
    std::vector<double> wall, work, bps;
    std::string error;
  };
  std::vector<Point> by_count(counts.size()), by_bytes(multiples.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < counts.size(); ++i) {
      const uint64_t size = kKiB;
      const uint64_t host = std::max<uint64_t>(kMiB, counts[i] * size / 8);
      ctx.progress.Step(std::to_string(counts[i]) + " objects of 1 KiB");
      SpillRun s = SpillObjects(dir, ctx.pool, size, counts[i], host, 0);
      if (!s.error.empty() && by_count[i].error.empty()) by_count[i].error = s.error;
      by_count[i].wall.push_back(s.error.empty() ? s.wall_s : kNaN);
      by_count[i].work.push_back(static_cast<double>(s.file_objects));
      by_count[i].bps.push_back(s.error.empty() ? s.write_bps / 1e9 : kNaN);
      runs.push_back({{"rep", r}, {"series", "count"}, {"objects", counts[i]}, {"object_bytes", size},
                      {"host_tier_bytes", host}, {"wall_s", s.wall_s}, {"file_objects", s.file_objects},
                      {"file_bytes", s.file_bytes}, {"demoted_objects", s.demoted_objects},
                      {"demoted_bytes", s.demoted_bytes}, {"spill_Bps", s.write_bps}, {"error", s.error}});
    }
    for (size_t i = 0; i < multiples.size(); ++i) {
      const uint64_t size = kMiB;
      const uint64_t count = multiples[i] * host_fixed / size;
      ctx.progress.Step(std::to_string(multiples[i]) + "x the host tier");
      SpillRun s = SpillObjects(dir, ctx.pool, size, count, host_fixed, 0);
      if (!s.error.empty() && by_bytes[i].error.empty()) by_bytes[i].error = s.error;
      by_bytes[i].wall.push_back(s.error.empty() ? s.wall_s : kNaN);
      by_bytes[i].work.push_back(static_cast<double>(s.file_bytes));
      by_bytes[i].bps.push_back(s.error.empty() ? s.write_bps / 1e9 : kNaN);
      runs.push_back({{"rep", r}, {"series", "bytes"}, {"multiple", multiples[i]}, {"objects", count},
                      {"host_tier_bytes", host_fixed}, {"wall_s", s.wall_s}, {"file_objects", s.file_objects},
                      {"file_bytes", s.file_bytes}, {"demoted_objects", s.demoted_objects},
                      {"demoted_bytes", s.demoted_bytes}, {"spill_Bps", s.write_bps}, {"error", s.error}});
    }
  }
  std::filesystem::remove_all(dir);
  rep.details["scaling"] = runs;

  auto fit = [&](std::vector<Point>& pts, const std::string& series, const std::string& plot) {
    std::vector<std::pair<double, double>> xy;
    std::string error;
    for (Point& p : pts) {
      xy.push_back({Median(p.work), Median(p.wall)});
      rep.Line(plot, series).points.push_back({Median(p.work), Median(p.wall)});
      if (error.empty()) error = p.error;
    }
    // The slope between the two largest points: what the next factor of
    // scale costs, free of the fixed costs that flatten the whole-range fit.
    const std::vector<std::pair<double, double>> last(xy.end() - std::min<size_t>(2, xy.size()), xy.end());
    return std::make_tuple(LogLogSlope(xy), LogLogSlope(last), error);
  };
  auto [count_slope, count_local, count_err] = fit(by_count, "wall time vs objects spilled (1 KiB)", "scaling_count");
  auto [bytes_slope, bytes_local, bytes_err] = fit(by_bytes, "wall time vs bytes spilled (1 MiB objects)", "scaling_bytes");
  for (size_t i = 0; i < counts.size(); ++i) {
    rep.Add(Row{"scaling.count." + std::to_string(counts[i]), 4,
                "spill throughput, " + std::to_string(counts[i]) + " objects of 1 KiB", Median(by_count[i].bps),
                "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", by_count[i].error, by_count[i].bps});
  }
  char fig[128];
  std::snprintf(fig, sizeof(fig), "growth exponent of time vs object count (10^3..%s)", o.quick ? "10^5" : "10^6");
  rep.Add(Row{"scaling.count.exponent", 4, fig, count_slope, "", "", kNaN, kNaN, 1.10, Better::kLower,
              "~1.0 (linear): <= 1.10", count_err, {count_slope}});
  rep.Add(Row{"scaling.count.local_exponent", 4,
              "exponent between the two largest counts (" + std::to_string(counts[counts.size() - 2]) + " -> " +
                  std::to_string(counts.back()) + ")",
              count_local, "", "", kNaN, kNaN, kNaN, Better::kLower, "", count_err, {count_local}});
  for (size_t i = 0; i < multiples.size(); ++i) {
    rep.Add(Row{"scaling.bytes." + std::to_string(multiples[i]) + "x", 4,
                "spill throughput, " + std::to_string(multiples[i]) + "x the " + SizeName(host_fixed) + " host tier",
                Median(by_bytes[i].bps), "GB/s", "", kNaN, kNaN, kNaN, Better::kHigher, "", by_bytes[i].error,
                by_bytes[i].bps});
  }
  rep.Add(Row{"scaling.bytes.exponent", 4, "growth exponent of time vs bytes written (1x..8x the host tier)",
              bytes_slope, "", "", kNaN, kNaN, 1.10, Better::kLower, "~1.0 (linear): <= 1.10", bytes_err, {bytes_slope}});
  rep.Add(Row{"scaling.bytes.local_exponent", 4, "exponent between 4x and 8x the host tier", bytes_local, "", "", kNaN,
              kNaN, kNaN, Better::kLower, "", bytes_err, {bytes_local}});
  rep.Note("Section 4: growth exponent = least-squares slope of log(wall time, first Put to Flush) against "
           "log(objects or bytes that reached the file tier), medians of " + std::to_string(reps) + " runs per point; by count "
           "(1 KiB objects) the host tier is 1/8 of the data (at least 1 MiB), by bytes it is fixed at " + SizeName(host_fixed) + ".");
}

void RunGpuSection(Context& ctx) {
  Report& rep = ctx.report;
  ctx.progress.Begin("6 gpu", 0.01, 1);
  ctx.progress.Step("looking for a CUDA device");
  // The CLI is built without the GPU benchmark; bench/gpu/gpu_bench.cc
  // (scripts/gpu_run.sh) measures the GPU targets on a machine that has one.
  std::string latest;
  if (!ctx.source_dir.empty()) {
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(ctx.source_dir + "/bench/results", ec)) {
      const std::string n = e.path().filename().string();
      if (n.rfind("gpu-", 0) == 0 && e.path().extension() == ".md" && n > latest) latest = n;
    }
  }
  const std::string ref = latest.empty() ? "bench/results/gpu-*.md" : "bench/results/" + latest;
  Row row{"gpu", 6, "GPU boundaries (gpu -> host, host -> gpu, gpu -> file)", kNaN, "", "", kNaN, kNaN, kNaN,
          Better::kHigher, "", "", {}};
  row.skipped = true;
  auto devices = cuda::DeviceCount();
  const std::string why = devices.ok() ? std::to_string(*devices) + " CUDA device(s) present, but this CLI does not "
                                         "drive them: run scripts/gpu_run.sh (bench/gpu/gpu_bench.cc)"
                                       : "no CUDA device (" + devices.status().message() + ")";
  row.note = "skipped: " + why + "; GPU figures by reference: " + ref;
  rep.Add(row);
  rep.details["gpu_reference"] = ref;
  if (!latest.empty()) {
    // Quote the GPU report's target table by reference, verbatim.
    std::ifstream f(ctx.source_dir + "/" + ref);
    std::string line, table;
    bool in = false;
    while (std::getline(f, line)) {
      if (line.rfind("## Targets", 0) == 0) {
        in = true;
        continue;
      }
      if (in && line.rfind("## ", 0) == 0) break;
      if (in && line.rfind("|", 0) == 0) table += line + "\n";
    }
    rep.details["gpu_targets_markdown"] = table;
  }
}

}  // namespace spillway::bench
