// Parsing and formatting of sizes; see units.h for the accepted forms.
#include "base/units.h"

#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>

namespace spillway {
namespace {

struct Unit {
  const char* name;
  long double multiplier;
};

constexpr std::array<Unit, 11> kUnits{{
    {"B", 1.0L},
    {"KiB", 1024.0L}, {"MiB", 1048576.0L}, {"GiB", 1073741824.0L},
    {"TiB", 1099511627776.0L}, {"PiB", 1125899906842624.0L},
    {"KB", 1e3L}, {"MB", 1e6L}, {"GB", 1e9L}, {"TB", 1e12L}, {"PB", 1e15L},
}};

constexpr const char* kExpected =
    "expected bytes, a size like 64GiB or 1.5TB, or a percentage like 80%";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

Status Invalid(std::string_view text, std::string_view why) {
  std::string m = "invalid size '";
  m += text;
  m += "': ";
  m += why;
  return Status::InvalidArgument(std::move(m));
}

// Splits "1.5 GiB" into its number ("1.5") and unit ("GiB").
void SplitNumber(std::string_view s, std::string_view* number, std::string_view* unit) {
  size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  *number = s.substr(0, i);
  *unit = Trim(s.substr(i));
}

bool ValidDecimal(std::string_view n) {
  size_t dots = 0, digits = 0;
  for (char c : n) {
    if (c == '.') {
      ++dots;
    } else {
      ++digits;
    }
  }
  return digits > 0 && dots <= 1 && n.front() != '.' && n.back() != '.';
}

}  // namespace

bool LooksLikePercent(std::string_view text) {
  text = Trim(text);
  return !text.empty() && text.back() == '%';
}

StatusOr<SizeSpec> ParseSize(std::string_view text) {
  std::string_view s = Trim(text);
  if (s.empty()) return Invalid(text, kExpected);
  if (s.front() == '-') return Invalid(text, "a size cannot be negative");
  if (s.front() == '+') s.remove_prefix(1);
  std::string_view number, unit;
  SplitNumber(s, &number, &unit);
  if (number.empty() || !ValidDecimal(number)) return Invalid(text, kExpected);

  double value = 0;
  auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return Invalid(text, "the number is out of range");
  }

  SizeSpec spec;
  if (unit == "%") {
    if (value <= 0 || value > 100) {
      return Invalid(text, "a percentage must be above 0 and at most 100");
    }
    spec.is_percent = true;
    spec.percent = value;
    return spec;
  }
  if (unit.empty()) {
    if (number.find('.') != std::string_view::npos) {
      return Invalid(text, "a byte count must be a whole number (or add a unit, e.g. 1.5GiB)");
    }
    uint64_t bytes = 0;
    auto r = std::from_chars(number.data(), number.data() + number.size(), bytes);
    if (r.ec != std::errc()) return Invalid(text, "larger than 2^64 bytes");
    spec.bytes = bytes;
    return spec;
  }
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    long double bytes = static_cast<long double>(value) * u.multiplier;
    if (bytes + 0.5L >= 18446744073709551616.0L) return Invalid(text, "larger than 2^64 bytes");
    spec.bytes = static_cast<uint64_t>(bytes + 0.5L);
    return spec;
  }
  for (const Unit& u : kUnits) {
    if (EqualsIgnoreCase(unit, u.name)) {
      return Invalid(text, "unknown unit '" + std::string(unit) + "'; did you mean '" + u.name +
                               "'? Units are case-sensitive");
    }
  }
  return Invalid(text, "unknown unit '" + std::string(unit) +
                           "': expected B, KiB, MiB, GiB, TiB, PiB, KB, MB, GB, TB, PB or %");
}

uint64_t ResolveSize(const SizeSpec& spec, uint64_t total_bytes) {
  if (!spec.is_percent) return spec.bytes;
  long double bytes = static_cast<long double>(total_bytes) * spec.percent / 100.0L;
  return static_cast<uint64_t>(bytes);
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::array<const char*, 6> kNames{"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  size_t unit = 0;
  long double value = static_cast<long double>(bytes);
  while (value >= 1024.0L && unit + 1 < kNames.size()) {
    value /= 1024.0L;
    ++unit;
  }
  char buf[64];
  if (unit == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.2Lf", value);
  std::string s = buf;
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s + " " + kNames[unit];
}

}  // namespace spillway
