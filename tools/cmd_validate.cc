// `spillway validate FILE [--profile P] [--strict] [--json]`: checks a
// tier-chain config (every profile; the chosen one also against this machine)
// and prints the problems and the resolved chain.
// Exit status: 0 valid, 1 invalid, 2 usage error, or a file that cannot be read
// or is not a regular file (a FIFO or device is refused at once, never read).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/escape.h"
#include "base/units.h"
#include "spillway/config_loader.h"
#include "tools/cli_util.h"
#include "tools/command.h"
#include "tools/tier_json.h"

namespace spillway::cli {
namespace {

struct ValidateArgs {
  std::string file;
  std::string profile;
  bool strict = false;
  bool json = false;
  bool create_dirs = false;
  int worker = -1;  // --worker; -1: $SPILLWAY_WORKER_INDEX
};

nlohmann::ordered_json DiagnosticJson(const Diagnostic& d) {
  return {{"file", d.file}, {"line", d.line},       {"column", d.column},
          {"path", d.path}, {"message", d.message}, {"hint", d.hint}};
}

std::string Fraction(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string CodecText(const CodecConfig& c) {
  if (c.kind == CodecKind::kNone) return "none";
  return std::string(CodecKindName(c.kind)) + ":" + std::to_string(c.level);
}

std::string Joined(const std::vector<std::string>& parts, const char* sep) {
  std::string s;
  for (const std::string& p : parts) s += (s.empty() ? "" : sep) + p;
  return s.empty() ? "-" : s;
}

std::vector<std::string> Filesystems(const TierConfig& t, const LoadResult& r) {
  std::vector<std::string> out;
  for (const std::string& p : t.paths) {
    auto it = r.paths.find(p);
    out.push_back(it == r.paths.end() || it->second.filesystem.empty() ? "?"
                                                                      : it->second.filesystem);
  }
  return out;
}

std::string Notes(const TierConfig& t) {
  std::vector<std::string> notes;
  if (t.kind == TierKind::kGpu) {
    std::string d = "device " + std::to_string(t.device);
    if (t.device_auto) d += " (auto)";
    if (!t.device_list.empty()) {
      std::vector<std::string> l;
      for (int x : t.device_list) l.push_back(std::to_string(x));
      d += " (of [" + Joined(l, ",") + "])";
    }
    notes.push_back(d);
    notes.push_back(GpuMemoryName(t.memory));
  }
  if (t.kind == TierKind::kHost && t.pinned) notes.push_back("pinned");
  if (t.kind == TierKind::kFile) {
    notes.push_back(t.io.direct ? "direct" : "buffered");
    if (t.persistent) notes.push_back("persistent");
  }
  if (t.optional) notes.push_back("optional");
  return Joined(notes, ",");
}

nlohmann::ordered_json TierJson(const TierConfig& t, const LoadResult& r) {
  return TierConfigJson(t, r.paths);  // the schema info --json shares (tools/tier_json.h)
}

void PrintTable(const LoadResult& r) {
  std::vector<std::vector<std::string>> rows = {
      {"NAME", "KIND", "CAPACITY", "WATERMARKS", "CODEC", "MEDIUM", "PATHS", "FILESYSTEM",
       "NOTES"}};
  for (const TierConfig& t : r.config.tiers) {
    bool file = t.kind == TierKind::kFile;
    rows.push_back({t.name, TierKindName(t.kind),
                    std::to_string(t.capacity_bytes) + " (" + FormatBytes(t.capacity_bytes) + ")",
                    Fraction(t.watermarks.low) + "-" + Fraction(t.watermarks.high),
                    CodecText(t.codec), file ? MediumName(t.medium) : "-",
                    Joined(t.paths, ","), Joined(Filesystems(t, r), ","), Notes(t)});
  }
  // Names, paths and filesystems come from the file and ${VAR}s: a newline
  // there would forge a row, an ESC sequence would reach the terminal.
  for (auto& row : rows) {
    for (std::string& cell : row) cell = EscapeControlBytes(cell);
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

void PrintHuman(const LoadResult& r, const std::string& file) {
  const std::string source = EscapeControlBytes(file);
  for (const Diagnostic& d : r.errors) std::printf("%s\n", d.ToString().c_str());
  for (const Diagnostic& d : r.warnings) std::printf("%s\n", d.ToString().c_str());
  if (!r.ok()) {
    std::printf("%s: invalid: %zu error(s), %zu warning(s)\n", source.c_str(), r.errors.size(),
                r.warnings.size());
    return;
  }
  std::string worker = r.config.worker >= 0 ? "; worker " + std::to_string(r.config.worker) : "";
  if (r.config.workers_per_node > 1) {
    worker += (r.config.worker >= 0 ? " of " : "; ") + std::to_string(r.config.workers_per_node) + " workers per node";
  }
  std::printf("%s: valid; profile %s%s; %zu tier(s), %zu warning(s)\n", source.c_str(),
              r.config.profile.empty() ? "(none)" : ("'" + EscapeControlBytes(r.config.profile) + "'").c_str(), worker.c_str(),
              r.config.tiers.size(), r.warnings.size());
  PrintTable(r);
}

void PrintJson(const LoadResult& r) {
  // "ok": the verdict of every --json output (docs/cli.md).
  nlohmann::ordered_json out = {{"ok", r.ok()},
                        {"file", r.config.source},
                        {"errors", nlohmann::ordered_json::array()},
                        {"warnings", nlohmann::ordered_json::array()},
                        {"tiers", nlohmann::ordered_json::array()},
                        {"profiles", r.profiles}};
  out["profile"] = r.config.profile.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.config.profile);
  out["worker"] = r.config.worker >= 0 ? nlohmann::ordered_json(r.config.worker) : nlohmann::ordered_json(nullptr);
  out["workers_per_node"] = r.config.workers_per_node;
  for (const Diagnostic& d : r.errors) out["errors"].push_back(DiagnosticJson(d));
  for (const Diagnostic& d : r.warnings) out["warnings"].push_back(DiagnosticJson(d));
  if (r.ok()) {
    for (const TierConfig& t : r.config.tiers) out["tiers"].push_back(TierJson(t, r));
  }
  std::printf("%s\n", out.dump(2).c_str());
}

int RunValidate(const ValidateArgs& args) {
  std::string text;
  std::string source = args.file;
  if (args.file == "-") {
    source = "<stdin>";
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    StatusOr<std::string> read = ReadConfigText(args.file);
    if (!read.ok()) {
      if (args.json) {
        LoadResult r;
        r.config.source = args.file;
        r.errors.push_back(Diagnostic{Diagnostic::Severity::kError, args.file, 0, 0, "",
                                      read.status().message(), ""});
        PrintJson(r);
      } else {
        std::fprintf(stderr, "spillway validate: %s\n", EscapeControlBytes(read.status().message()).c_str());
      }
      return 2;
    }
    text = std::move(*read);
  }
  LoadOptions options;
  options.profile = args.profile;
  options.all_profiles = true;
  options.create_dirs = args.create_dirs;
  if (args.worker >= 0) options.worker = args.worker;
  LoadResult result = LoadConfigString(text, source, options);
  if (args.strict) {
    for (Diagnostic& w : result.warnings) {
      w.severity = Diagnostic::Severity::kError;
      result.errors.push_back(std::move(w));
    }
    result.warnings.clear();
  }
  if (args.json) {
    PrintJson(result);
  } else {
    PrintHuman(result, source);
  }
  return result.ok() ? 0 : 1;
}

void Register(CLI::App& root, int& exit_code) {
  auto args = std::make_shared<ValidateArgs>();
  auto* cmd = root.add_subcommand(
      "validate", "Check a tier-chain config file (every profile) and print the resolved chain");
  cmd->add_option("file", args->file, "Config file, or - to read standard input")->required();
  cmd->add_option("--profile", args->profile,
                  "Profile to resolve (default: $SPILLWAY_PROFILE, then the hostname rules)");
  cmd->add_option("--worker", args->worker,
                  "Resolve the chain for this worker (0-based; default: $SPILLWAY_WORKER_INDEX): picks its device "
                  "from device: auto or a device list. Every worker's devices are checked either way")
      ->transform(WholeNumber(0, 4095));
  cmd->add_flag("--strict", args->strict, "Treat warnings as errors");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  cmd->add_flag("--create-dirs", args->create_dirs,
                "Create missing tier directories (mode 0700) instead of only checking the parent");
  // Placeholders in --help (tools/help_format.h): what the value is.
  cmd->get_option("--profile")->type_name("NAME");
  cmd->callback([&exit_code, args] { exit_code = RunValidate(*args); });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
