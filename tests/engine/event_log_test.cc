// EventLog: JSON lines that parse, never the key, the token-bucket rate limit
// (with an injected clock, then with the real one under threads), per-key
// sampling, and the file's safety rules (0600, O_APPEND, no symlinks).
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "codecs/codec.h"
#include "engine/event_log.h"
#include "test_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

MetricsConfig LogConfig(const std::string& path, double sample = 1.0, uint32_t rate = 1000000) {
  MetricsConfig m;
  m.event_log = path;
  m.event_sample = sample;
  m.event_rate_limit = rate;
  return m;
}

MoveEvent Event(std::string_view key, bool ok = true) {
  return MoveEvent{key, 4096, 1024, "host", "disk", "lz4", true, 37, ok};
}

std::unique_ptr<EventLog> OpenOrDie(const MetricsConfig& m, EventLog::Clock clock = nullptr) {
  auto log = EventLog::Open(m, std::move(clock));
  REQUIRE_MESSAGE(log.ok(), log.status().ToString());
  REQUIRE(*log);
  return std::move(*log);
}

}  // namespace

TEST_CASE("event log: off is a null pointer, bad settings are refused") {
  MetricsConfig off;
  auto log = EventLog::Open(off);
  REQUIRE(log.ok());
  CHECK(*log == nullptr);
  TempDir dir("obs-ev");
  CHECK(EventLog::Open(LogConfig(dir.sub("a.log"), 1.5)).status().code() == StatusCode::kInvalidArgument);
  CHECK(EventLog::Open(LogConfig(dir.sub("a.log"), -0.1)).status().code() == StatusCode::kInvalidArgument);
  CHECK(EventLog::Open(LogConfig(dir.sub("a.log"), 1.0, 0)).status().code() == StatusCode::kInvalidArgument);
  CHECK_FALSE(EventLog::Open(LogConfig(dir.sub("missing-dir/a.log"))).ok());
}

TEST_CASE("event log: every line is JSON with the documented fields, and never the key") {
  TempDir dir("obs-ev");
  const std::string path = dir.sub("events.log");
  {
    auto log = OpenOrDie(LogConfig(path));
    for (int i = 0; i < 100; ++i) {
      const std::string key = "secret-key-" + std::to_string(i);
      MoveEvent e = Event(key, i % 10 != 3);
      e.down = i % 2 == 0;
      e.raw_bytes = 1000 + i;
      e.stored_bytes = i == 0 ? 0 : 500;
      e.micros = i;
      log->Record(e);
    }
    CHECK(log->written() == 100);
    CHECK(log->dropped() == 0);
  }
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);

  auto lines = ReadLines(path);
  REQUIRE(lines.size() == 100);
  for (size_t i = 0; i < lines.size(); ++i) {
    CAPTURE(lines[i]);
    CHECK(lines[i].find("secret") == std::string::npos);
    nlohmann::json j;
    REQUIRE_NOTHROW(j = nlohmann::json::parse(lines[i]));
    for (const char* f : {"ts", "key_hash", "size", "stored", "from", "to", "codec", "ratio", "us", "direction",
                          "outcome"}) {
      CHECK_MESSAGE(j.contains(f), f);
    }
    const std::string key = "secret-key-" + std::to_string(i);
    char want[24];
    std::snprintf(want, sizeof(want), "%016llx", static_cast<unsigned long long>(Checksum64(key.data(), key.size())));
    CHECK(j["key_hash"] == want);
    CHECK(j["size"] == 1000 + i);
    CHECK(j["us"] == i);
    CHECK(j["from"] == "host");
    CHECK(j["to"] == "disk");
    CHECK(j["codec"] == "lz4");
    CHECK(j["direction"] == (i % 2 == 0 ? "down" : "up"));
    CHECK(j["outcome"] == (i % 10 != 3 ? "ok" : "failed"));
    CHECK(j["ratio"].get<double>() == doctest::Approx(i == 0 ? 0.0 : 500.0 / (1000 + i)).epsilon(1e-3));
    const std::string ts = j["ts"];
    CHECK(ts.size() == 27);  // 2024-05-01T12:00:00.123456Z
    CHECK(ts.back() == 'Z');
  }
}

TEST_CASE("event log: names that need escaping still give valid JSON") {
  MoveEvent e = Event("k");
  e.from = "a\"b\\c\nd";
  e.to = std::string_view("\x01\xff", 2);
  const std::string line = EventLog::FormatLine(e, 1714564800123456ull);
  REQUIRE(line.back() == '\n');
  nlohmann::json j;
  REQUIRE_NOTHROW(j = nlohmann::json::parse(line));
  CHECK(j["from"] == "a\"b\\c\nd");
  CHECK(j["ts"] == "2024-05-01T12:00:00.123456Z");
}

TEST_CASE("event log: the token bucket allows a burst of one second, then the rate") {
  TempDir dir("obs-ev");
  const std::string path = dir.sub("rl.log");
  auto now = std::make_shared<std::atomic<uint64_t>>(1'000'000'000);
  auto log = OpenOrDie(LogConfig(path, 1.0, 100), [now] { return now->load(); });
  for (int i = 0; i < 1000; ++i) log->Record(Event("k" + std::to_string(i)));
  CHECK(log->written() == 100);
  CHECK(log->dropped() == 900);
  *now += 500'000'000;  // half a second: 50 tokens
  for (int i = 0; i < 500; ++i) log->Record(Event("k" + std::to_string(i)));
  CHECK(log->written() == 150);
  *now += 60'000'000'000;  // a minute idle: the bucket holds one second's worth
  for (int i = 0; i < 1000; ++i) log->Record(Event("k" + std::to_string(i)));
  CHECK(log->written() == 250);
  CHECK(log->dropped() == 900 + 450 + 900);
  CHECK(ReadLines(path).size() == 250);
}

TEST_CASE("event log: rate limit under four threads with the real clock, lines never interleave") {
  TempDir dir("obs-ev");
  const std::string path = dir.sub("mt.log");
  const uint32_t rate = 200;
  auto log = OpenOrDie(LogConfig(path, 1.0, rate));
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20000; ++i) log->Record(Event("t" + std::to_string(t) + "/" + std::to_string(i)));
    });
  }
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(log->written() + log->dropped() == 80000);
  CHECK(log->written() >= rate);
  CHECK(log->written() <= rate + rate * secs + 1);
  auto lines = ReadLines(path);
  CHECK(lines.size() == log->written());
  for (const std::string& l : lines) {
    CHECK(nlohmann::json::accept(l));
  }
}

TEST_CASE("event log: sampling is a fraction of keys, all moves of a sampled key, failures always") {
  TempDir dir("obs-ev");
  const std::string path = dir.sub("sample.log");
  auto log = OpenOrDie(LogConfig(path, 0.25));
  const int n = 20000;
  for (int i = 0; i < n; ++i) log->Record(Event("key/" + std::to_string(i)));
  const double fraction = static_cast<double>(log->written()) / n;
  CHECK(fraction > 0.22);
  CHECK(fraction < 0.28);
  CHECK(log->written() + log->sampled_out() == static_cast<uint64_t>(n));
  CHECK(log->dropped() == 0);

  // The same key three times: all three lines or none.
  const uint64_t before = log->written();
  int sampled_keys = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "again/" + std::to_string(i);
    const uint64_t w0 = log->written();
    for (int r = 0; r < 3; ++r) log->Record(Event(key));
    const uint64_t got = log->written() - w0;
    CHECK((got == 0 || got == 3));
    sampled_keys += got == 3;
  }
  CHECK(sampled_keys > 0);
  CHECK(log->written() == before + 3 * sampled_keys);

  auto none = OpenOrDie(LogConfig(dir.sub("none.log"), 0.0));
  for (int i = 0; i < 100; ++i) none->Record(Event("x" + std::to_string(i), /*ok=*/i % 4 != 0));
  CHECK(none->written() == 25);  // only the failed moves
  CHECK(none->sampled_out() == 75);
}

TEST_CASE("event log: appends to an existing file, refuses symlinks and non-regular files") {
  TempDir dir("obs-ev");
  const std::string path = dir.sub("append.log");
  {
    std::ofstream(path) << "{\"earlier\":true}\n";
  }
  {
    auto log = OpenOrDie(LogConfig(path));
    log->Record(Event("a"));
  }
  {
    auto log = OpenOrDie(LogConfig(path));
    log->Record(Event("b"));
  }
  auto lines = ReadLines(path);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0] == "{\"earlier\":true}");

  const std::string link = dir.sub("link.log");
  REQUIRE(::symlink(path.c_str(), link.c_str()) == 0);
  auto refused = EventLog::Open(LogConfig(link));
  CHECK_FALSE(refused.ok());
  CHECK(refused.status().message().find("symbolic link") != std::string::npos);
  CHECK(ReadLines(path).size() == 3);

  const std::string fifo = dir.sub("fifo.log");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_FALSE(EventLog::Open(LogConfig(fifo)).ok());  // and does not hang
  CHECK_FALSE(EventLog::Open(LogConfig(dir.path())).ok());
}
