// A demotion that fails on an injected write error (FaultFileIo, tiers/io)
// is logged as a failed move whose `error` field names the cause, not
// "unspecified" (the Demoter passes the failure's Status on).
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

TEST_CASE("a failed demotion's event log line names the injected I/O error") {
  TempDir dir("rel-ev-fail");
  auto base = MakePosixFileIo();
  FaultSpec spec;
  spec.eio_write = 1.0;
  FaultFileIo io(base.get(), spec);
  Config c = RelChain(dir.path(), 1 << 20, {64 << 20});
  c.metrics.event_log = dir.sub("events.jsonl");
  {
    auto e = MustOpen(c, &io, /*background=*/false);
    for (int i = 0; i < 10; ++i) REQUIRE(e->Put("k" + std::to_string(i), RandomBytes(100 << 10, 300 + i)).ok());
    (void)e->Flush();  // above the high watermark: the demotion runs and every write fails
    REQUIRE(io.counts().of(FaultKind::kEioWrite) > 0);
  }
  std::ifstream in(c.metrics.event_log);
  int failed = 0;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.value("outcome", "") != "failed") continue;
    ++failed;
    const std::string error = j.value("error", "");
    CAPTURE(line);
    CHECK(error != "unspecified");
    CHECK(error.find("injected fault") != std::string::npos);  // FaultFileIo's message for the pwrite
    CHECK(j.value("from", "") == "host");
    CHECK(j.value("to", "") == "f0");
  }
  CHECK(failed > 0);
}
