// The rules a chain must satisfy, shared by the YAML loader (which places
// reports through Origins) and ValidateConfig (configs built in code).
#pragma once

#include <map>
#include <string>

#include "spillway/config.h"
#include "config/diagnostics.h"
#include "spillway/config_loader.h"

namespace spillway {

// Rules that need nothing but the values: version, watermarks, codec levels,
// capacities, I/O settings, tier names, chain order, shared directories.
// A capacity still written as a percentage (capacity_bytes 0) is not checked.
void CheckConfigValues(const Config& config, DiagnosticSink& sink);

// Rules that ask this machine: gpu tiers against options.gpu, percentages
// resolved into capacity_bytes, file tier directories (when
// options.check_filesystem). Leaves out optional tiers that cannot be set up
// and clears io.direct where O_DIRECT is refused. `probes` (may be null)
// receives what was found at each directory.
void CheckMachine(Config* config, const LoadOptions& options, DiagnosticSink& sink,
                  std::map<std::string, PathProbe>* probes);

}  // namespace spillway
