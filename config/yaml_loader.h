// Loading and validating a tier-chain config file.
//
// The loader collects every problem instead of stopping at the first; each
// Diagnostic names the file, 1-based line and column, the key path
// ("tiers[2].capacity"), what was expected, and a hint where one exists.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "engine/status.h"

namespace spillway {

struct Diagnostic {
  enum class Severity : unsigned char { kError, kWarning };
  Severity severity = Severity::kError;
  std::string file;
  int line = 0;    // 1-based; 0 when not tied to a position
  int column = 0;  // 1-based
  std::string path;     // key path, e.g. "tiers[2].capacity"
  std::string message;  // what is wrong and what was expected
  std::string hint;     // e.g. "did you mean 'capacity'?"; may be empty
  // "file:line:col: error: tiers[2].capacity: message (hint)"
  std::string ToString() const;
};

// What the machine offers, for resolving percentages and checking gpu tiers.
// Filled by the caller (the engine and CLI ask the CUDA runtime); the config
// library itself never talks to CUDA.
struct GpuProbe {
  bool built_with_cuda = false;
  std::vector<uint64_t> device_total_bytes;  // one entry per visible device
};

struct LoadOptions {
  std::string profile;          // empty: SPILLWAY_PROFILE, then hostname rules, then none
  bool check_filesystem = true; // stat/statfs/O_DIRECT probes on file tier paths
  bool create_dirs = true;      // create missing tier directories while checking
  bool all_profiles = false;    // validate: check every profile, not only the chosen one
  GpuProbe gpu;
};

struct LoadResult {
  Config config;  // the resolved chain (valid only when ok())
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  bool ok() const { return errors.empty(); }
  // All errors (and warnings) as one message, one per line.
  std::string Summary() const;
};

LoadResult LoadConfigFile(const std::string& path, const LoadOptions& options = {});
LoadResult LoadConfigString(std::string_view yaml, const std::string& source_name,
                            const LoadOptions& options = {});

// Semantic checks on a Config built in code (the same rules the loader applies
// after parsing, without positions).
std::vector<Diagnostic> ValidateConfig(const Config& config, const LoadOptions& options = {});

// Convenience: the resolved Config, or InvalidArgument listing every error.
StatusOr<Config> LoadConfig(const std::string& path, const LoadOptions& options = {});

}  // namespace spillway
