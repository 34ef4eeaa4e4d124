// ParseWholeNumber and ParseRealNumber (base/parse_number.h).
#include "base/parse_number.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace spillway {
namespace {
// "0.01", "1000", "1e+08": a bound in a message.
std::string FormatNumber(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
}  // namespace

bool ParseWholeNumber(std::string_view text, uint64_t lo, uint64_t hi, uint64_t* value, std::string* why) {
  const std::string range = "from " + std::to_string(lo) + " to " + std::to_string(hi);
  const bool digits =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    *why = "'" + std::string(text) + "' is not a whole number " + range;
    return false;
  }
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    *why = "'" + std::string(text) + "' is out of range: expected a whole number " + range;
    return false;
  }
  *value = v;
  return true;
}

bool ParseRealNumber(std::string_view text, double lo, double hi, bool above_lo, double* value, std::string* why) {
  const std::string range = std::string(above_lo ? "above " : "from ") + FormatNumber(lo) +
                            (above_lo ? " and at most " : " to ") + FormatNumber(hi);
  // from_chars also reads "nan", "inf" and "infinity": only digits, points, signs and exponents pass here.
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+';
  });
  double v = 0;
  const auto [end, ec] = plain ? std::from_chars(text.data(), text.data() + text.size(), v)
                               : std::from_chars_result{text.data(), std::errc::invalid_argument};
  if (!plain || ec == std::errc::invalid_argument || end != text.data() + text.size()) {
    *why = "'" + std::string(text) + "' is not a number " + range;
    return false;
  }
  if (ec != std::errc() || !std::isfinite(v) || v < lo || v > hi || (above_lo && v == lo)) {
    *why = "'" + std::string(text) + "' is out of range: expected a number " + range;
    return false;
  }
  *value = v;
  return true;
}

}  // namespace spillway
