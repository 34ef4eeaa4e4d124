// The engine over the in-memory FileIo: a host -> file chain, the event log
// and the metrics dump run with no disk at all, and warnings go to the
// caller's Logger.
#include <mutex>

#include "engine_test_util.h"
#include "tiers/io/mem_file_io.h"

namespace spillway {
namespace {

using namespace spillway::testing;

struct CaptureLogger : Logger {
  void Log(LogLevel, std::string_view m) override {
    std::lock_guard<std::mutex> l(mu);
    lines.emplace_back(m);
  }
  std::mutex mu;
  std::vector<std::string> lines;
};

TEST_CASE("engine over MemFileIo: spills to a file tier, logs events and dumps metrics without a disk") {
  CaptureLogger logger;
  MemFileIo::Options mo;
  mo.direct = false;  // O_DIRECT refused: the file tier warns through its FileIo's logger
  mo.logger = &logger;
  MemFileIo io(mo);
  Config c = HostFileChain("/mem", 64 << 10, 64 << 20);
  c.metrics.event_log = "/mem/events.log";
  c.metrics.prometheus_file = "/mem/metrics.prom";
  REQUIRE(io.CreateDir("/mem").ok());
  EngineOptions o;
  o.file_io = &io;
  o.logger = &logger;
  o.background_mover = false;
  {
    auto e = Engine::Open(c, o);
    REQUIRE_MESSAGE(e.ok(), e.status().ToString());
    std::vector<std::vector<std::byte>> vals;
    for (int i = 0; i < 8; ++i) {
      vals.push_back(Bytes(30000, i));
      REQUIRE((*e)->Put("k" + std::to_string(i), vals.back()).ok());
    }
    for (int i = 0; i < 8; ++i) {
      auto h = (*e)->Get("k" + std::to_string(i));
      REQUIRE_MESSAGE(h.ok(), h.status().ToString());
      CHECK(HandleEquals(*h, vals[i]));
    }
    CHECK(TierNamed((*e)->Stats(), "disk").objects > 0);
  }
  auto names = io.ListDir("/mem/disk");
  REQUIRE(names.ok());
  CHECK(!names->empty());
  auto log = io.Stat("/mem/events.log");
  REQUIRE(log.ok());
  CHECK(log->size > 0);
  auto prom = io.Stat("/mem/metrics.prom");
  REQUIRE(prom.ok());
  CHECK(prom->size > 0);
  bool warned = false;
  for (const std::string& l : logger.lines) warned |= l.find("O_DIRECT refused") != std::string::npos;
  CHECK(warned);
}

}  // namespace
}  // namespace spillway
