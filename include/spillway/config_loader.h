// Loading and validating a tier-chain config file.
//
// The loader collects every problem instead of stopping at the first; each
// Diagnostic names the file, 1-based line and column, the key path
// ("tiers[2].capacity"), what was expected, and a hint where one exists.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spillway/config.h"
#include "spillway/status.h"

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
// Left unset in LoadOptions, the loader asks this machine (DetectGpus); tests
// and tools that check a config for another machine pass their own.
struct GpuProbe {
  bool built_with_cuda = false;
  std::vector<uint64_t> device_total_bytes;  // one entry per visible device
  // Optional, for messages: "GPU-8e9f..." per visible device (may be empty).
  std::vector<std::string> device_uuids;
  // This process's CUDA_VISIBLE_DEVICES, which `device: auto` follows:
  // set, the worker's GPU is the first visible device (dask-cuda gives each
  // worker its own list, its GPU first). DetectGpus reads the environment;
  // a probe built by hand has it unset unless the caller sets it.
  bool cuda_visible_devices_set = false;
  std::string cuda_visible_devices;
};

// A caller's own ${NAME} variables, resolved before the environment (a Dask
// store gives each worker its own directories this way). Called with the
// variable's name and its ${NAME:-default} text, expanded (nullopt when the
// reference has no default, or its default cannot be expanded); returns the
// value, or nullopt to leave NAME to the environment. An error fails the
// config with its message at the value that names the variable. Values are
// substituted into parsed strings, never into the YAML text: a value cannot
// change the document's structure.
using VarResolver = std::function<StatusOr<std::optional<std::string>>(
    const std::string& name, const std::optional<std::string>& fallback)>;

// Where a scratch file tier's directory goes (LoadOptions::scratch_path).
using ScratchPathRewrite = std::function<std::string(const std::string& path)>;

struct LoadOptions {
  std::string profile;          // empty: SPILLWAY_PROFILE, then hostname rules, then none
  bool check_filesystem = true; // stat/statfs/O_DIRECT probes on file tier paths
  bool create_dirs = true;      // create missing tier directories while checking
  bool all_profiles = false;    // validate: check every profile, not only the chosen one
  std::optional<GpuProbe> gpu;  // unset: DetectGpus()
  // The worker (0-based index among the engines on this node) the chain is
  // for: picks `device: auto` / `device: [list]` entries. Unset:
  // $SPILLWAY_WORKER_INDEX (the Dask preload sets it), else none (worker 0's
  // device). validate checks the devices of every worker of the node either way.
  std::optional<int> worker;
  // Asked first for every ${NAME}; empty: the environment alone.
  VarResolver vars;
  // Set: called with each expanded path of every file tier that is not
  // persistent, before the paths are checked; its result is the path used.
  // Lets several engines share one config with a scratch directory each.
  ScratchPathRewrite scratch_path;
};

// What the checks found at a file tier directory (or, when the directory does
// not exist yet, at its nearest existing parent).
struct PathProbe {
  std::string filesystem;       // statfs type: "ext4", "xfs", "tmpfs", "nfs", ... or "0x<hex>"
  uint64_t fs_total_bytes = 0;  // size of that filesystem
  uint64_t fs_free_bytes = 0;   // space available to this user
  uint64_t fs_id = 0;           // st_dev: equal for directories on one filesystem
  bool exists = false;          // the directory itself exists
  bool direct_io = false;       // the filesystem accepted an O_DIRECT write
};

struct LoadResult {
  Config config;  // the resolved chain (valid only when ok())
  std::vector<Diagnostic> errors;
  std::vector<Diagnostic> warnings;
  std::vector<std::string> profiles;       // profile names the file defines, in file order
  std::map<std::string, PathProbe> paths;  // file tier directory -> what was found there
  bool ok() const { return errors.empty(); }
  // All errors (and warnings) as one message, one per line.
  std::string Summary() const;
};

// This machine's GPUs as the CUDA runtime sees them (base/cuda_runtime): in a
// build without CUDA, built_with_cuda is false and there are no devices. The
// first call starts the CUDA driver (tens of milliseconds).
GpuProbe DetectGpus();

// The whole file; NotFound or IOError name the file. Refuses files over 16 MiB.
StatusOr<std::string> ReadConfigText(const std::string& path);

// Loads and checks `path` (see LoadConfigString).
LoadResult LoadConfigFile(const std::string& path, const LoadOptions& options = {});
// Parses `yaml`, picks the profile (options.profile, else $SPILLWAY_PROFILE,
// else the first profile whose hostname rule matches gethostname(), else
// none), resolves the chain and checks it against this machine. With
// options.all_profiles every other profile (and the chain without a profile)
// is checked too, for everything that does not depend on the machine.
// Optional tiers that cannot be set up here are left out of the result with a
// warning; percentages become bytes; io.direct is cleared where the
// filesystem refuses O_DIRECT.
LoadResult LoadConfigString(std::string_view yaml, const std::string& source_name,
                            const LoadOptions& options = {});

// Semantic checks on a Config built in code (the same rules the loader applies
// after parsing, without positions).
std::vector<Diagnostic> ValidateConfig(const Config& config, const LoadOptions& options = {});

// ValidateConfig, and then what the loader does to a chain it returns:
// resolves percentages in capacity_text, leaves out optional tiers that cannot
// be set up, clears io.direct where O_DIRECT is refused. `config` is usable
// when no returned diagnostic is an error.
std::vector<Diagnostic> FinalizeConfig(Config& config, const LoadOptions& options = {});

// Convenience: the resolved Config, or InvalidArgument listing every error.
StatusOr<Config> LoadConfig(const std::string& path, const LoadOptions& options = {});

}  // namespace spillway
