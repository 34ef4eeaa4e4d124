// Escaping bytes for display (base/escape.h).
#include "base/escape.h"

#include <cstdio>

namespace spillway {
namespace {

bool Escaped(std::string_view s, size_t i, EscapeMode mode) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (mode == EscapeMode::kQuotedBytes) return c < 0x20 || c >= 0x7f || c == '"' || c == '\\';
  if (c == '\n' && mode == EscapeMode::kControlKeepNewlines) return false;
  if (c < 0x20 || c == 0x7f) return true;
  // A C1 control encoded in UTF-8: the lead byte C2 and the control itself.
  const auto next = i + 1 < s.size() ? static_cast<unsigned char>(s[i + 1]) : 0;
  const auto prev = i > 0 ? static_cast<unsigned char>(s[i - 1]) : 0;
  return (c == 0xc2 && next >= 0x80 && next <= 0x9f) || (prev == 0xc2 && c >= 0x80 && c <= 0x9f);
}

}  // namespace

std::string EscapeControlBytes(std::string_view text, EscapeMode mode) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (!Escaped(text, i, mode)) {
      out += text[i];
      continue;
    }
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(text[i]));
    out += buf;
  }
  return out;
}

}  // namespace spillway
