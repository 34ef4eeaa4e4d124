// Escaping bytes for display (base/escape.h).
#include "base/escape.h"

#include <doctest/doctest.h>

namespace spillway {
namespace {

TEST_CASE("control bytes print as \\xNN while text (UTF-8 included) passes") {
  CHECK(EscapeControlBytes("/var/tmp/spill") == "/var/tmp/spill");
  CHECK(EscapeControlBytes("caf\xc3\xa9 \xe2\x9c\x93") == "caf\xc3\xa9 \xe2\x9c\x93");
  CHECK(EscapeControlBytes("a\x1b[31mb\nc\td\x7f") == "a\\x1b[31mb\\x0ac\\x09d\\x7f");
  CHECK(EscapeControlBytes(std::string_view("a\0b", 3)) == "a\\x00b");
  // A C1 control as UTF-8 encodes it (U+009B, CSI), which some terminals obey.
  CHECK(EscapeControlBytes("x\xc2\x9b" "31m") == "x\\xc2\\x9b31m");
  CHECK(EscapeControlBytes("\xc2\xa0") == "\xc2\xa0");  // a no-break space is text
}

TEST_CASE("a multi-line message keeps its newlines, nothing else") {
  CHECK(EscapeControlBytes("one\ntwo\x1b", EscapeMode::kControlKeepNewlines) == "one\ntwo\\x1b");
}

TEST_CASE("quoted bytes: only printable ASCII other than quote and backslash pass") {
  CHECK(EscapeControlBytes("k\"e\\y\xff\x01", EscapeMode::kQuotedBytes) == "k\\x22e\\x5cy\\xff\\x01");
  CHECK(EscapeControlBytes("stress/12", EscapeMode::kQuotedBytes) == "stress/12");
}

}  // namespace
}  // namespace spillway
