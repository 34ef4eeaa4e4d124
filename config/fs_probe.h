// What the machine offers a tier: physical memory, filesystem sizes, and the
// checks on a file tier's directory (existence, ownership, permissions,
// filesystem type against `medium`, O_DIRECT).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "spillway/config.h"
#include "config/diagnostics.h"
#include "spillway/config_loader.h"

namespace spillway {

uint64_t PhysicalMemoryBytes();

// Size of the filesystem holding `path`, or its nearest existing parent; 0
// when nothing along the path can be measured.
uint64_t FilesystemBytes(const std::string& path);

// The filesystem type of `dir` as validate and info name it ("ext4", "xfs",
// "tmpfs", "nfs", ... or "0x<magic>"); empty when statfs fails.
std::string FilesystemTypeName(const std::string& dir);

// Checks the directory `tier.paths[index]` and reports under `field`
// ("tiers[2]"). Creates it (mode 0700) when options.create_dirs; otherwise a
// missing directory is fine when its nearest existing parent is writable, and
// that parent is what gets probed.
PathProbe CheckTierDirectory(const TierConfig& tier, size_t index, const std::string& field,
                             const LoadOptions& options, DiagnosticSink& sink);

// Where a directory really is, so that tier directories aliased or nested
// through symlinks or bind mounts can be told apart: its canonical path
// (symlinks resolved; for a directory not made yet, through its nearest
// existing parent) and the device/inode of it and of each existing ancestor.
struct DirIdentity {
  std::string canonical;
  bool exists = false;  // chain[0] is the directory itself
  std::vector<std::pair<uint64_t, uint64_t>> chain;  // (st_dev, st_ino), innermost first, up to "/"
};
DirIdentity IdentifyDirectory(const std::string& path);

// Tests only: replaces the O_DIRECT probe (no filesystem here may refuse it);
// the function says whether `dir` accepts O_DIRECT. Null restores the real one.
using DirectIoProbeFn = bool (*)(const std::string& dir);
void SetDirectIoProbeForTesting(DirectIoProbeFn probe);

}  // namespace spillway
