// ParseFaultSpec: the `--faults SPEC` language of `spillway stress` and the
// tests. Accepts the documented forms, rejects everything else with a
// message that says what to fix.
#include <doctest/doctest.h>

#include "tiers/io/fault_file_io.h"

namespace spillway {
namespace {

bool Contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string ErrorOf(std::string_view text) {
  auto spec = ParseFaultSpec(text);
  REQUIRE_MESSAGE(!spec.ok(), "accepted: " << text);
  CHECK(spec.status().code() == StatusCode::kInvalidArgument);
  return spec.status().message();
}

TEST_CASE("the documented example parses") {
  auto spec = ParseFaultSpec("eio=0.01,enospc=0.001,short=0.01,torn=0.001,latency_us=50,seed=7");
  REQUIRE(spec.ok());
  CHECK(spec->eio_read == 0.01);
  CHECK(spec->eio_write == 0.01);
  CHECK(spec->eio_sync == 0.01);
  CHECK(spec->enospc == 0.001);
  CHECK(spec->short_write == 0.01);
  CHECK(spec->torn_write == 0.001);
  CHECK(spec->latency_us == 50);
  CHECK(spec->latency == 1.0);
  CHECK(spec->seed == 7);
  CHECK(spec->schedule.empty());
}

TEST_CASE("specific eio keys override eio whatever the order") {
  auto spec = ParseFaultSpec("eio_read=0.1, eio=0.5 ,eio_sync=0.01");
  REQUIRE(spec.ok());
  CHECK(spec->eio_read == 0.1);
  CHECK(spec->eio_write == 0.5);
  CHECK(spec->eio_sync == 0.01);
  auto only = ParseFaultSpec("eio_read=0.1,eio_write=0.05,eio_sync=0.01");
  REQUIRE(only.ok());
  CHECK(only->eio_write == 0.05);
  CHECK(only->enospc == 0);
}

TEST_CASE("empty spec means no faults") {
  for (const char* text : {"", " ", ",,"}) {
    auto spec = ParseFaultSpec(text);
    REQUIRE(spec.ok());
    CHECK(spec->eio_read == 0);
    CHECK(spec->latency_us == 0);
    CHECK(spec->schedule.empty());
  }
}

TEST_CASE("schedules: KIND@N and KIND@A-B") {
  auto spec = ParseFaultSpec("eio_write@3,torn@5-9,eio@0,latency@2-4");
  REQUIRE(spec.ok());
  REQUIRE(spec->schedule.size() == 6);  // "eio" expands to read, write and sync
  CHECK(spec->schedule[0].kind == FaultKind::kEioWrite);
  CHECK(spec->schedule[0].first == 3);
  CHECK(spec->schedule[0].last == 3);
  CHECK(spec->schedule[1].kind == FaultKind::kTornWrite);
  CHECK(spec->schedule[1].first == 5);
  CHECK(spec->schedule[1].last == 9);
  CHECK(spec->schedule[2].kind == FaultKind::kEioRead);
  CHECK(spec->schedule[4].kind == FaultKind::kEioSync);
  CHECK(spec->schedule[5].kind == FaultKind::kLatency);
  CHECK(Contains(ErrorOf("torn@9-5"), "KIND@FIRST-LAST"));
  CHECK(Contains(ErrorOf("torn@x"), "KIND@N"));
  CHECK(Contains(ErrorOf("tron@1"), "did you mean 'torn'?"));
}

TEST_CASE("unknown keys get a suggestion") {
  CHECK(ErrorOf("eoi=0.1") == "fault spec: unknown fault 'eoi', did you mean 'eio'?");
  CHECK(Contains(ErrorOf("enospc=0.1,shrot=0.2"), "unknown fault 'shrot', did you mean 'short'?"));
  CHECK(Contains(ErrorOf("eio_wirte=0.1"), "did you mean 'eio_write'?"));
  std::string far = ErrorOf("banana=1");
  CHECK(Contains(far, "unknown fault 'banana'"));
  CHECK(Contains(far, "known: eio"));
}

TEST_CASE("bad values are rejected") {
  CHECK(Contains(ErrorOf("eio=1.5"), "'eio' probability 1.5 is out of range"));
  CHECK(Contains(ErrorOf("torn=-0.1"), "out of range"));
  CHECK(Contains(ErrorOf("short=abc"), "expects a probability from 0 to 1, got 'abc'"));
  CHECK(Contains(ErrorOf("eio="), "expects a probability"));
  CHECK(Contains(ErrorOf("eio=nan"), "out of range"));
  CHECK(Contains(ErrorOf("seed=-3"), "'seed' expects a whole number"));
  CHECK(Contains(ErrorOf("latency_us=99999999"), "at most 10000000"));
  CHECK(Contains(ErrorOf("eio"), "expected KEY=VALUE"));
  CHECK(Contains(ErrorOf("eio=0.1,eio=0.2"), "given twice"));
  CHECK(ParseFaultSpec("eio=1,torn=0").ok());  // the bounds themselves are fine
}

TEST_CASE("ToString round-trips through the parser") {
  FaultSpec spec;
  spec.eio_read = 0.25;
  spec.eio_sync = 0.001;
  spec.enospc = 0.5;
  spec.short_write = 1;
  spec.latency_us = 40;
  spec.latency = 0;
  spec.seed = 99;
  spec.schedule = {{FaultKind::kTornWrite, 4, 4}, {FaultKind::kEioRead, 1, 8}};
  std::string text = spec.ToString();
  CAPTURE(text);
  auto back = ParseFaultSpec(text);
  REQUIRE(back.ok());
  CHECK(back->eio_read == spec.eio_read);
  CHECK(back->eio_write == 0);
  CHECK(back->eio_sync == spec.eio_sync);
  CHECK(back->enospc == spec.enospc);
  CHECK(back->short_write == 1);
  CHECK(back->latency_us == 40);
  CHECK(back->latency == 0);
  CHECK(back->seed == 99);
  REQUIRE(back->schedule.size() == 2);
  CHECK(back->schedule[0].kind == FaultKind::kTornWrite);
  CHECK(back->schedule[1].last == 8);
  CHECK(ParseFaultSpec("").value().ToString() == "seed=1");
}

}  // namespace
}  // namespace spillway
