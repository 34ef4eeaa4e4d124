// Shared CLI helpers (tools/cli_util.h).
#include "tools/cli_util.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "base/checked_math.h"
#include "base/units.h"
#include "config/fs_probe.h"
#include "spillway/version.h"

namespace spillway::cli {
std::string VersionLine() {
#ifdef SPILLWAY_HAVE_CUDA
  return std::string("spillway ") + kVersion + " (CUDA: yes)";
#else
  return std::string("spillway ") + kVersion + " (CUDA: no)";
#endif
}

std::string FindDataFile(std::string_view relative) {
  namespace fs = std::filesystem;
  std::vector<fs::path> roots = {fs::current_path()};
  char self[4096] = {};
  if (::readlink("/proc/self/exe", self, sizeof(self) - 1) > 0) {
    const fs::path bin = fs::path(self).parent_path();
    for (fs::path p = bin; !p.empty() && p != p.root_path(); p = p.parent_path()) roots.push_back(p);
    roots.push_back(bin.parent_path() / "share" / "spillway");
  }
#ifdef SPILLWAY_SOURCE_DIR
  // A build tree knows its sources: an out-of-tree build (cmake -S . -B /elsewhere)
  // finds them here, after an installed layout's share/spillway.
  roots.push_back(SPILLWAY_SOURCE_DIR);
#endif
  for (const fs::path& r : roots) {
    std::error_code ec;
    const fs::path c = r / relative;
    if (fs::is_regular_file(c, ec)) return c.string();
  }
  return "";
}

CLI::Validator WholeNumber(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        uint64_t v = 0;
        std::string why;
        if (!ParseWholeNumber(text, lo, hi, &v, &why)) return why;
        text = std::to_string(v);  // CLI11 would read a leading 0 as octal
        return "";
      },
      "N", "whole number");
}

CLI::Validator RealNumber(double lo, double hi, bool above_lo) {
  return CLI::Validator(
      [lo, hi, above_lo](std::string& text) -> std::string {
        double v = 0;
        std::string why;
        return ParseRealNumber(text, lo, hi, above_lo, &v, &why) ? "" : why;
      },
      "X", "number");
}

namespace {
bool ParseOneSize(std::string_view text, uint64_t* bytes, std::string* why) {
  auto spec = ParseSize(text);
  if (!spec.ok()) {
    *why = spec.status().message();
    return false;
  }
  if (spec->is_percent) {
    *why = "a percentage is not a size here";
    return false;
  }
  *bytes = spec->bytes;
  return true;
}
}  // namespace

CLI::Validator SizeArg() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t b = 0;
        std::string why;
        if (!ParseOneSize(text, &b, &why)) return "'" + text + "' is not a size (" + why + ")";
        text = std::to_string(b);
        return "";
      },
      "SIZE", "size");
}

bool ParseSizeRange(const std::string& text, uint64_t* min, uint64_t* max, std::string* why) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) {
    *why = "expected MIN:MAX, e.g. 4KiB:1MiB";
    return false;
  }
  std::string w;
  if (!ParseOneSize(std::string_view(text).substr(0, colon), min, &w)) {
    *why = "MIN: " + w;
    return false;
  }
  if (!ParseOneSize(std::string_view(text).substr(colon + 1), max, &w)) {
    *why = "MAX: " + w;
    return false;
  }
  if (*max == 0 || *min > *max) {
    *why = "MIN must be at most MAX and MAX above 0";
    return false;
  }
  return true;
}

CLI::Validator IntList(int lo, int hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        if (text.empty()) return "the list is empty";
        size_t pos = 0;
        while (pos <= text.size()) {
          const size_t comma = std::min(text.find(',', pos), text.size());
          const std::string item = text.substr(pos, comma - pos);
          uint64_t v = 0;
          std::string why;
          if (lo < 0 || !ParseWholeNumber(item, static_cast<uint64_t>(lo), static_cast<uint64_t>(hi), &v, &why)) {
            return "'" + item + "' is not a section number (" + std::to_string(lo) + "-" + std::to_string(hi) + ")";
          }
          pos = comma + 1;
        }
        return "";
      },
      "LIST", "int list");
}

Progress::Progress(std::string label) : label_(std::move(label)), enabled_(::isatty(STDOUT_FILENO) == 1) {}

void Progress::Done() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
  drawn_ = false;
}

void Progress::Update(double fraction, std::string_view detail) {
  if (!enabled_) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  if (last_ms_ >= 0 && now - last_ms_ < 100 && fraction < 1.0) return;
  last_ms_ = now;
  fraction = std::clamp(fraction, 0.0, 1.0);
  std::fprintf(stderr, "\r\033[K%s %3.0f%% %.*s", label_.c_str(), 100.0 * fraction, static_cast<int>(detail.size()),
               detail.data());
  std::fflush(stderr);
  drawn_ = true;
}

bool StressSizesFit(uint64_t max_size, int threads, std::string* why) {
  uint64_t held = 0;
  const uint64_t memory = PhysicalMemoryBytes();
  if (CheckedMul(max_size, 2 * static_cast<uint64_t>(threads), &held) && (memory == 0 || held <= memory)) return true;
  *why = "MAX of " + FormatBytes(max_size) + " per object, for " + std::to_string(threads) +
         " threads each holding two, is more than this machine's memory (" + FormatBytes(memory) + ")";
  return false;
}

}  // namespace spillway::cli
