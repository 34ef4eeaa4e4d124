// Helpers shared by the subcommands: the version line, files installed beside
// the binary (examples, the bench peer), size arguments with units, and a
// progress line shown only on a terminal.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/parse_number.h"

namespace spillway::cli {

// "spillway 0.1.0 (CUDA: no)": `spillway --version` and `spillway version`.
std::string VersionLine();

// Finds `relative` (e.g. "examples/tiers.yaml", "bench/zict_peer.py") in, in
// order: the working directory, the directories above the executable (a build
// folder inside the source tree), <exe>/../share/spillway (what `cmake
// --install` lays out), and the source tree the binary was built from (an
// out-of-tree build). Empty when none has it.
std::string FindDataFile(std::string_view relative);

// Numeric options. CLI11 alone reads "-1" into an unsigned option as 2^64-1,
// "99999999999999999999" as 2^64-1 and "nan" past CLI::Range (NaN compares
// false), so every numeric option goes through ParseWholeNumber or
// ParseRealNumber (base/parse_number.h). A refused value is a usage error
// (exit 2): "--ops: '-1' is not a whole number ...".
// CLI11 transforms for the two; they rewrite the text to the plain number the
// option's variable is then read from.
CLI::Validator WholeNumber(uint64_t lo, uint64_t hi);
CLI::Validator RealNumber(double lo, double hi, bool above_lo = false);

// A size as the config writes it ("4KiB", "1.5 MiB", "65536"); no percentages.
// The CLI11 validator rewrites the option's text to plain bytes, so the option
// can be bound to an integer; a bad value is a usage error (exit 2) naming why.
CLI::Validator SizeArg();
// "MIN:MAX" with units on both sides, MIN <= MAX, MAX > 0. Each side goes
// through the same checks as SizeArg (no sign, no NaN, below 2^64).
bool ParseSizeRange(const std::string& text, uint64_t* min, uint64_t* max, std::string* why);
// The stress tests' threads each hold two objects of up to `max_size` bytes
// (one written, one read back): false, and why, when that cannot fit in this
// machine's memory, so a MAX it cannot allocate is refused before the run.
bool StressSizesFit(uint64_t max_size, int threads, std::string* why);

// "1,2,5": every item an integer in [lo, hi].
CLI::Validator IntList(int lo, int hi);

// A one-line progress indicator on stderr, redrawn in place, shown only when
// stdout is a terminal (so pipes, files and CI logs stay clean).
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress() { Done(); }
  // Clears the line; call before printing anything else.
  void Done();
  // Redraws at most ten times a second; fraction in [0, 1].
  void Update(double fraction, std::string_view detail = {});
  bool enabled() const { return enabled_; }

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  int64_t last_ms_ = -1;
};

}  // namespace spillway::cli
