// `spillway info [FILE] [--profile P] [--json]`: the machine as the engine
// sees it (physical memory, the pinned-memory limit, io_uring, CUDA devices)
// and, with FILE, each tier of that chain on this machine: its filesystem,
// free space and whether O_DIRECT works there. Nothing is created or written.
// Exit status: 0 ok, 1 FILE has errors, 2 usage error or unreadable FILE.
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/cuda_runtime.h"
#include "base/escape.h"
#include "codecs/codec.h"
#include "config/fs_probe.h"
#include "engine/stats_export.h"
#include "spillway/config_loader.h"
#include "spillway/file_io.h"
#include "tiers/blob.h"
#include "tools/command.h"
#include "tools/tier_json.h"

namespace spillway::cli {
namespace {

using nlohmann::json;

struct InfoArgs {
  std::string file;
  std::string profile;
  bool json = false;
};

// MemAvailable from /proc/meminfo (bytes); 0 when unknown.
uint64_t AvailableMemoryBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

json Limit(rlim_t v) { return v == RLIM_INFINITY ? json("unlimited") : json(static_cast<uint64_t>(v)); }
std::string LimitText(rlim_t v) { return v == RLIM_INFINITY ? "unlimited" : HumanBytes(static_cast<double>(v)); }

// Every CUDA call goes through base/cuda_runtime.h (a stub without CUDA).
json CudaInfo() {
  json c = {{"built_with_cuda", cuda::BuiltWithCuda()}, {"devices", json::array()}, {"reason", ""}};
  if (!cuda::BuiltWithCuda()) return c;
  StatusOr<int> n = cuda::DeviceCount();
  if (!n.ok()) {
    c["reason"] = n.status().message();
    return c;
  }
  for (int d = 0; d < *n; ++d) {
    json dj = {{"device", d}};
    StatusOr<cuda::MemInfo> mem = cuda::GetMemInfo(d);
    if (mem.ok()) {
      dj["total_bytes"] = mem->total_bytes;
      dj["free_bytes"] = mem->free_bytes;
    } else {
      StatusOr<uint64_t> total = cuda::DeviceTotalBytes(d);
      if (total.ok()) dj["total_bytes"] = *total;
      dj["error"] = mem.status().message();
    }
    c["devices"].push_back(std::move(dj));
  }
  return c;
}

json MachineInfo() {
  json m;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) m["hostname"] = host;
  struct utsname u;
  if (uname(&u) == 0) {
    m["kernel"] = std::string(u.sysname) + " " + u.release;
    m["arch"] = u.machine;
  }
  m["cpus"] = sysconf(_SC_NPROCESSORS_ONLN);
  m["memory_total_bytes"] = PhysicalMemoryBytes();
  m["memory_available_bytes"] = AvailableMemoryBytes();
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
    m["memlock_soft"] = Limit(rl.rlim_cur);
    m["memlock_hard"] = Limit(rl.rlim_max);
    m["memlock_text"] = LimitText(rl.rlim_cur) + " (hard " + LimitText(rl.rlim_max) + ")";
  }
  auto uring = MakeUringFileIo();
  m["io_uring"] = {{"available", uring.ok()}, {"reason", uring.ok() ? "" : uring.status().message()}};
  // Whether objects' large host allocations get 2 MiB pages (tiers/blob.h).
  const Blob::HugePagePolicy& huge = Blob::ObjectHugePages();
  m["huge_pages"] = {{"objects", huge.enabled}, {"reason", huge.reason}};
  m["cuda"] = CudaInfo();
  // Which build of xxh3 verifies records here (codecs/checksum_impl.h).
  m["checksum"] = {{"algorithm", "xxh3-64"}, {"implementation", Checksum64Implementation()}};
  return m;
}

json ConfigInfo(const LoadResult& r) {
  json c;
  c["source"] = r.config.source;
  c["profile"] = r.config.profile;
  c["ok"] = r.ok();
  json errors = json::array(), warnings = json::array();
  for (const Diagnostic& d : r.errors) errors.push_back(d.ToString());
  for (const Diagnostic& d : r.warnings) warnings.push_back(d.ToString());
  c["errors"] = errors;
  c["warnings"] = warnings;
  json tiers = json::array();
  for (const TierConfig& t : r.config.tiers) {
    // The tier schema of validate --json (tools/tier_json.h).
    json tj = json::parse(TierConfigJson(t, r.paths).dump());
    tiers.push_back(std::move(tj));
  }
  c["tiers"] = tiers;
  return c;
}

// A string field for the text output: escaped, since paths come from ${VAR}s
// and reasons from the OS.
std::string Text(const json& j) { return EscapeControlBytes(j.get<std::string>()); }

void PrintMachine(const json& m) {
  std::printf("machine\n");
  if (m.contains("hostname")) {
    std::printf("  host         %s (%s %s, %lld cpus)\n", Text(m["hostname"]).c_str(),
                EscapeControlBytes(m.value("kernel", "?")).c_str(), EscapeControlBytes(m.value("arch", "?")).c_str(),
                m["cpus"].get<long long>());
  }
  std::printf("  memory       %s total, %s available\n",
              HumanBytes(static_cast<double>(m["memory_total_bytes"].get<uint64_t>())).c_str(),
              HumanBytes(static_cast<double>(m["memory_available_bytes"].get<uint64_t>())).c_str());
  if (m.contains("memlock_text")) {
    std::printf("  pinned limit %s (RLIMIT_MEMLOCK, ulimit -l)\n", Text(m["memlock_text"]).c_str());
  }
  const json& u = m["io_uring"];
  if (u["available"].get<bool>()) {
    std::printf("  io_uring     available\n");
  } else {
    std::printf("  io_uring     not available: %s (file tiers use pread/pwrite)\n",
                Text(u["reason"]).c_str());
  }
  std::printf("  huge pages   %s for objects: %s\n", m["huge_pages"]["objects"].get<bool>() ? "yes" : "no",
              Text(m["huge_pages"]["reason"]).c_str());
  std::printf("  checksum     %s (%s)\n", Text(m["checksum"]["algorithm"]).c_str(),
              Text(m["checksum"]["implementation"]).c_str());
  const json& c = m["cuda"];
  if (!c["built_with_cuda"].get<bool>()) {
    std::printf("  CUDA         not available in this build\n");
  } else if (c["devices"].empty()) {
    std::printf("  CUDA         no device: %s\n", Text(c["reason"]).c_str());
  } else {
    std::printf("  CUDA         %zu device(s)\n", c["devices"].size());
    for (const json& d : c["devices"]) {
      std::printf("    device %d", d["device"].get<int>());
      if (d.contains("total_bytes")) {
        std::printf("  %s total", HumanBytes(static_cast<double>(d["total_bytes"].get<uint64_t>())).c_str());
      }
      if (d.contains("free_bytes")) {
        std::printf(", %s free", HumanBytes(static_cast<double>(d["free_bytes"].get<uint64_t>())).c_str());
      }
      if (d.contains("error")) std::printf("  (%s)", Text(d["error"]).c_str());
      std::printf("\n");
    }
  }
}

void PrintConfig(const json& c) {
  std::printf("\nconfig %s%s\n", Text(c["source"]).c_str(),
              c["profile"].get<std::string>().empty() ? "" : (" (profile " + Text(c["profile"]) + ")").c_str());
  for (const json& t : c["tiers"]) {
    std::printf("  tier %-10s %-5s %11s  codec %s", Text(t["name"]).c_str(),
                Text(t["kind"]).c_str(),
                HumanBytes(static_cast<double>(t["capacity_bytes"].get<uint64_t>())).c_str(),
                Text(t["codec"]["name"]).c_str());
    if (t.contains("io")) {
      std::printf("  medium %s  io %s%s", Text(t["medium"]).c_str(),
                  Text(t["io"]["engine"]).c_str(), t["io"]["direct"].get<bool>() ? " direct" : "");
    }
    std::printf("\n");
    if (!t.contains("path_info")) continue;
    for (const json& p : t["path_info"]) {
      if (!p.contains("filesystem")) {
        std::printf("    %s: not probed\n", Text(p["path"]).c_str());
        continue;
      }
      std::printf("    %s%s: %s, %s free of %s, O_DIRECT %s\n", Text(p["path"]).c_str(),
                  p["exists"].get<bool>() ? "" : " (missing; parent probed)",
                  p["filesystem"].get<std::string>().empty() ? "?" : Text(p["filesystem"]).c_str(),
                  HumanBytes(static_cast<double>(p["fs_free_bytes"].get<uint64_t>())).c_str(),
                  HumanBytes(static_cast<double>(p["fs_total_bytes"].get<uint64_t>())).c_str(),
                  p["direct_io"].get<bool>() ? "yes" : "no");
    }
  }
  // Each is a whole diagnostic ("file:line:col: error: path: message"),
  // which names its own severity.
  for (const json& w : c["warnings"]) std::printf("  %s\n", Text(w).c_str());
  for (const json& e : c["errors"]) std::printf("  %s\n", Text(e).c_str());
}

int RunInfo(const InfoArgs& args) {
  json out;
  out["machine"] = MachineInfo();
  int rc = 0;
  if (!args.file.empty()) {
    StatusOr<std::string> text = ReadConfigText(args.file);
    if (!text.ok()) {
      std::fprintf(stderr, "spillway info: %s\n", EscapeControlBytes(text.status().message()).c_str());
      return 2;
    }
    LoadOptions lo;
    lo.profile = args.profile;
    lo.check_filesystem = true;
    lo.create_dirs = false;  // info only looks
    LoadResult r = LoadConfigString(*text, args.file, lo);
    out["config"] = ConfigInfo(r);
    if (!r.ok()) rc = 1;
  }
  out["ok"] = rc == 0;  // the verdict of every --json output (docs/cli.md)
  if (args.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    PrintMachine(out["machine"]);
    if (out.contains("config")) PrintConfig(out["config"]);
  }
  return rc;
}

void Register(CLI::App& root, int& exit_code) {
  auto args = std::make_shared<InfoArgs>();
  auto* cmd = root.add_subcommand(
      "info", "Show the machine as the engine sees it and, with FILE, each tier's filesystem, space and O_DIRECT");
  cmd->add_option("file", args->file, "Tier-chain config file");
  cmd->add_option("--profile", args->profile, "Profile to resolve (default: $SPILLWAY_PROFILE, then hostname rules)");
  cmd->add_flag("--json", args->json, "Print one JSON object instead of text");
  // Placeholders in --help (tools/help_format.h): what the value is.
  cmd->get_option("--profile")->type_name("NAME");
  cmd->callback([&exit_code, args] { exit_code = RunInfo(*args); });
}

const RegisterCommand kReg(Register);

}  // namespace
}  // namespace spillway::cli
