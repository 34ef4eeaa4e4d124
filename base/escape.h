// Text from outside the program (paths after ${VAR} expansion, YAML keys,
// object keys, OS messages) made safe to show a person: escaped bytes print
// as \xNN, so an ESC sequence cannot drive the terminal, a newline cannot
// forge an output line and a NUL cannot cut a C string short. Every
// human-readable output goes through this one function; JSON output does not
// (its encoder escapes on its own).
#pragma once

#include <string>
#include <string_view>

namespace spillway {

enum class EscapeMode {
  // C0 controls (newline and tab included), DEL, and the C1 controls as
  // UTF-8 encodes them (C2 80..C2 9F, which some terminals obey). Other
  // bytes, UTF-8 text included, pass as they are.
  kControl,
  // As kControl, but a newline passes: for messages that are several lines
  // by design, whose parts were escaped when they were built.
  kControlKeepNewlines,
  // Arbitrary bytes shown between double quotes (object keys): only
  // printable ASCII other than '"' and '\' passes.
  kQuotedBytes,
};

std::string EscapeControlBytes(std::string_view text, EscapeMode mode = EscapeMode::kControl);

}  // namespace spillway
