// Suggestions, diagnostic formatting, and where reports are placed.
#include <doctest/doctest.h>

#include "config/diagnostics.h"

namespace spillway {
namespace {

TEST_CASE("edit distance counts an adjacent swap as one edit") {
  CHECK(EditDistance("capacity", "capacity") == 0);
  CHECK(EditDistance("capactiy", "capacity") == 1);
  CHECK(EditDistance("gpuu", "gpu") == 1);
  CHECK(EditDistance("", "abc") == 3);
  CHECK(EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("suggestions for near misses, the list otherwise") {
  std::vector<std::string_view> keys{"name", "kind", "capacity", "watermarks"};
  CHECK(SuggestHint("capactiy", keys) == "did you mean 'capacity'?");
  CHECK(SuggestHint("watermark", keys) == "did you mean 'watermarks'?");
  CHECK(SuggestHint("Kind", keys) == "did you mean 'kind'?");
  CHECK(SuggestHint("zzzzzz", keys) == "expected one of: name, kind, capacity, watermarks");
  CHECK(SuggestHint("x", {"lz4"}) == "expected one of: lz4");
}

TEST_CASE("a diagnostic prints as file:line:col: severity: path: message (hint)") {
  Diagnostic d{Diagnostic::Severity::kError, "a.yaml", 7, 12, "tiers[2].capacity",
               "unknown key 'capactiy'", "did you mean 'capacity'?"};
  CHECK(d.ToString() ==
        "a.yaml:7:12: error: tiers[2].capacity: unknown key 'capactiy' (did you mean 'capacity'?)");
  Diagnostic w{Diagnostic::Severity::kWarning, "a.yaml", 0, 0, "", "no position", ""};
  CHECK(w.ToString() == "a.yaml: warning: no position");
}

TEST_CASE("origins fall back to the nearest recorded parent") {
  Origins o;
  o.Set("tiers[0]", Origin{"tiers[2]", 10, 5});
  o.Set("tiers[0].capacity", Origin{"profiles.p.tiers.ssd.capacity", 30, 17});
  CHECK(o.Find("tiers[0].capacity").line == 30);
  Origin inherited = o.Find("tiers[0].codec.level");
  CHECK(inherited.path == "tiers[2].codec.level");
  CHECK(inherited.line == 10);
  Origin none = o.Find("version");
  CHECK(none.path == "version");
  CHECK(none.line == 0);
}

TEST_CASE("the sink drops repeats and errors nested in an earlier error") {
  DiagnosticSink sink("f.yaml");
  sink.ErrorAt(Origin{"tiers[1].paths[0]", 4, 3}, "unset variable");
  sink.Error("tiers[1].paths", "no directory");
  sink.Error("tiers[1].capacity", "zero");
  sink.Error("tiers[1].capacity", "zero");
  sink.WarningAt(Origin{"x", 2, 1}, "w");
  sink.WarningAt(Origin{"x", 2, 1}, "w");
  std::vector<Diagnostic> errors = sink.TakeErrors();
  REQUIRE(errors.size() == 2);
  CHECK(errors[0].line == 4);
  CHECK(errors[1].path == "tiers[1].capacity");
  CHECK(errors[1].line == 0);
  CHECK(sink.TakeWarnings().size() == 1);
}

}  // namespace
}  // namespace spillway
