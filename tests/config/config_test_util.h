// Helpers for the config tests: load YAML from a string and look for a
// diagnostic by key path and message text.
#pragma once

#include <doctest/doctest.h>

#include <optional>
#include <string>

#include "spillway/config_loader.h"

namespace spillway::testing {

// Options that keep a test off the filesystem and away from GPUs.
inline LoadOptions NoMachine() {
  LoadOptions o;
  o.check_filesystem = false;
  o.create_dirs = false;
  return o;
}

inline LoadResult LoadYaml(const std::string& yaml, const LoadOptions& options = NoMachine()) {
  return LoadConfigString(yaml, "test.yaml", options);
}

// A copy, so that it outlives a temporary LoadResult.
inline std::optional<Diagnostic> FindIn(const std::vector<Diagnostic>& list,
                                        const std::string& path, const std::string& text) {
  for (const Diagnostic& d : list) {
    if (d.path == path && d.message.find(text) != std::string::npos) return d;
  }
  return std::nullopt;
}

inline std::optional<Diagnostic> FindError(const LoadResult& r, const std::string& path,
                                           const std::string& text) {
  return FindIn(r.errors, path, text);
}

inline std::optional<Diagnostic> FindWarning(const LoadResult& r, const std::string& path,
                                             const std::string& text) {
  return FindIn(r.warnings, path, text);
}

// A valid one-tier chain with `tier_body` appended to the tier's keys (each
// line indented by four spaces).
inline std::string HostChain(const std::string& tier_body = "") {
  return "version: 1\n"
         "tiers:\n"
         "  - name: host\n"
         "    kind: host\n"
         "    capacity: 1GiB\n" +
         tier_body;
}

// A host tier over a file tier in `dir`, with `file_body` appended to the file tier.
inline std::string FileChain(const std::string& dir, const std::string& file_body = "") {
  return "version: 1\n"
         "tiers:\n"
         "  - {name: host, kind: host, capacity: 64MiB}\n"
         "  - name: disk\n"
         "    kind: file\n"
         "    capacity: 1MiB\n"
         "    paths: [\"" + dir + "\"]\n" +
         file_body;
}

}  // namespace spillway::testing
