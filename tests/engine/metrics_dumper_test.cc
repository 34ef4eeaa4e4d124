// MetricsDumper: the textfile-collector file is replaced atomically (a reader
// never sees a partial file), periodically, with no temp file left behind,
// readable by another user, and the thread stops at once on destruction.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "engine/metrics_dumper.h"
#include "engine/stats_export.h"
#include "test_util.h"

using namespace spillway;
using namespace spillway::testing;
using namespace std::chrono_literals;

namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Stats whose object count is the number of snapshots taken so far, with
// `tiers` tiers so the file is large enough for a torn write to show.
std::function<EngineStats()> CountingSnapshot(std::shared_ptr<std::atomic<uint64_t>> calls, int tiers = 2) {
  return [calls, tiers] {
    EngineStats s;
    for (int i = 0; i < tiers; ++i) {
      TierStats t;
      t.name = "tier" + std::to_string(i);
      t.kind = i == 0 ? "host" : "file";
      t.capacity_bytes = 1ull << 30;
      s.tiers.push_back(t);
    }
    s.objects = ++*calls;
    return s;
  };
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("metrics dumper: DumpNow writes the Prometheus text, mode 0644, no temp file left") {
  TempDir dir("obs-dump");
  const std::string path = dir.sub("spillway.prom");
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  const mode_t old_mask = ::umask(077);
  MetricsDumper d(CountingSnapshot(calls), path, 0);  // no thread
  Status st = d.DumpNow();
  ::umask(old_mask);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  CHECK(d.dumps() == 1);
  auto expect = CountingSnapshot(std::make_shared<std::atomic<uint64_t>>(0))();
  CHECK(ReadAll(path) == StatsToPrometheus(expect));
  struct stat sb;
  REQUIRE(::stat(path.c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0644);
  CHECK(DirEntries(dir.path()) == std::vector<std::string>{"spillway.prom"});
  std::this_thread::sleep_for(100ms);
  CHECK(d.dumps() == 1);  // interval 0: nothing in the background
}

TEST_CASE("metrics dumper: dumps periodically and replaces the previous file") {
  TempDir dir("obs-dump");
  const std::string path = dir.sub("m.prom");
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  MetricsDumper d(CountingSnapshot(calls), path, 0.05);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (d.dumps() < 4 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  REQUIRE(d.dumps() >= 4);
  CHECK(d.failures() == 0);
  CHECK(d.last_status().ok());
  const std::string text = ReadAll(path);
  // The latest snapshot's count is in the file (>= 4 snapshots taken).
  const std::string needle = "\nspillway_objects ";
  const size_t at = text.find(needle);
  REQUIRE(at != std::string::npos);
  CHECK(std::stoull(text.substr(at + needle.size())) >= 4);
  CHECK(DirEntries(dir.path()).size() == 1);
}

TEST_CASE("metrics dumper: a reader never sees a partial file") {
  TempDir dir("obs-dump");
  const std::string path = dir.sub("big.prom");
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  MetricsDumper d(CountingSnapshot(calls, 300), path, 0.001);
  REQUIRE(d.DumpNow().ok());
  const std::string first = ReadAll(path);
  REQUIRE(first.size() > 50000);
  const std::string head = first.substr(0, 40);
  // The last sample line of a whole file (the last family's).
  const std::string tail = first.substr(first.rfind('\n', first.size() - 2) + 1);
  REQUIRE(tail.rfind("spillway_", 0) == 0);
  int reads = 0, torn = 0;
  // Read while the file is replaced; stop after enough overlap (or 10 s on a slow machine).
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < end && (reads < 300 || d.dumps() < 50)) {
    const std::string text = ReadAll(path);
    ++reads;
    if (text.size() < first.size() - 100 || text.compare(0, head.size(), head) != 0 ||
        text.compare(text.size() - tail.size(), tail.size(), tail) != 0) {
      ++torn;
    }
  }
  CHECK(reads > 10);
  CHECK(d.dumps() > 5);
  CHECK(torn == 0);
}

TEST_CASE("metrics dumper: the destructor stops a long-interval thread at once") {
  TempDir dir("obs-dump");
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  const auto start = std::chrono::steady_clock::now();
  {
    MetricsDumper d(CountingSnapshot(calls), dir.sub("x.prom"), 3600);
    std::this_thread::sleep_for(20ms);
  }
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  CHECK(calls->load() == 0);  // no dump was due; none at destruction either
}

TEST_CASE("metrics dumper: a failing dump is reported, not fatal") {
  TempDir dir("obs-dump");
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  MetricsDumper d(CountingSnapshot(calls), dir.sub("no/such/dir/x.prom"), 0);
  Status st = d.DumpNow();
  CHECK_FALSE(st.ok());
  CHECK(d.failures() == 1);
  CHECK_FALSE(d.last_status().ok());
  CHECK(d.dumps() == 0);
}

TEST_CASE("metrics dumper: a link planted at a temporary name is never written through") {
  TempDir dir("obs-dump-link");
  const std::string path = dir.sub("spillway.prom");
  const std::string victim = dir.sub("victim");
  { std::ofstream(victim) << "not metrics"; }
  REQUIRE(::chmod(victim.c_str(), 0600) == 0);
  // The names a dumper could predict: its pid, and the ones around it.
  for (int d = -2; d <= 2; ++d) {
    const std::string guess = dir.sub(".spillway.prom." + std::to_string(::getpid() + d) + ".tmp");
    REQUIRE(::link(victim.c_str(), guess.c_str()) == 0);
  }
  auto calls = std::make_shared<std::atomic<uint64_t>>(0);
  MetricsDumper d(CountingSnapshot(calls), path, 0);
  for (int i = 0; i < 3; ++i) REQUIRE_MESSAGE(d.DumpNow().ok(), d.last_status().ToString());
  CHECK(ReadAll(victim) == "not metrics");
  struct stat sb;
  REQUIRE(::stat(victim.c_str(), &sb) == 0);
  CHECK((sb.st_mode & 0777) == 0600);
  CHECK(ReadAll(path).find("spillway_objects") != std::string::npos);
  size_t temporaries = 0;
  for (const std::string& n : DirEntries(dir.path())) temporaries += n.size() > 4 && n.ends_with(".tmp");
  CHECK(temporaries == 5);  // only the planted links: none of ours left behind
}
