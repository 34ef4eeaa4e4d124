// What the machine offers a tier: physical memory, filesystem sizes, and the
// checks on a file tier's directory (existence, ownership, permissions,
// filesystem type against `medium`, O_DIRECT).
#pragma once

#include <cstdint>
#include <string>

#include "spillway/config.h"
#include "config/diagnostics.h"
#include "spillway/config_loader.h"

namespace spillway {

uint64_t PhysicalMemoryBytes();

// Size of the filesystem holding `path`, or its nearest existing parent; 0
// when nothing along the path can be measured.
uint64_t FilesystemBytes(const std::string& path);

// Checks the directory `tier.paths[index]` and reports under `field`
// ("tiers[2]"). Creates it (mode 0700) when options.create_dirs; otherwise a
// missing directory is fine when its nearest existing parent is writable, and
// that parent is what gets probed.
PathProbe CheckTierDirectory(const TierConfig& tier, size_t index, const std::string& field,
                             const LoadOptions& options, DiagnosticSink& sink);

// Tests only: replaces the O_DIRECT probe (no filesystem here may refuse it);
// the function says whether `dir` accepts O_DIRECT. Null restores the real one.
using DirectIoProbeFn = bool (*)(const std::string& dir);
void SetDirectIoProbeForTesting(DirectIoProbeFn probe);

}  // namespace spillway
