// The YAML front end: the only file that includes yaml-cpp. It turns the
// document into ConfigNodes, picks the profile, and runs the schema reader
// and the checks over each chain. yaml-cpp's exceptions stop here.
#include "spillway/config_loader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>

#include "base/cuda_runtime.h"
#include "config/diagnostics.h"
#include "config/node.h"
#include "config/schema.h"
#include "config/validate.h"

namespace spillway {
namespace {

constexpr size_t kMaxNodes = 100000;  // aliases can make a small file expand enormously
constexpr int kMaxDepth = 64;         // deeper than any valid config
constexpr size_t kMaxFileBytes = 16u << 20;


class NodeConverter {
 public:
  // Empty when the document is too large or too deep; see `problem`.
  ConfigNode Convert(const YAML::Node& node, int depth) {
    ConfigNode out;
    if (++count_ > kMaxNodes || depth > kMaxDepth) {
      if (problem_.empty()) {
        problem_ = count_ > kMaxNodes ? "the document has more than 100000 values (after aliases)"
                                      : "the document nests deeper than 64 levels";
        problem_at_ = node.Mark();
      }
      return out;
    }
    const YAML::Mark mark = node.Mark();
    out.line = mark.line >= 0 ? mark.line + 1 : 0;
    out.column = mark.column >= 0 ? mark.column + 1 : 0;
    switch (node.Type()) {
      case YAML::NodeType::Scalar:
        out.kind = ConfigNode::Kind::kScalar;
        out.scalar = node.Scalar();
        break;
      case YAML::NodeType::Sequence:
        out.kind = ConfigNode::Kind::kSequence;
        for (const YAML::Node& item : node) {
          out.items.push_back(Convert(item, depth + 1));
          if (!problem_.empty()) break;
        }
        break;
      case YAML::NodeType::Map:
        out.kind = ConfigNode::Kind::kMap;
        for (const auto& kv : node) {
          ConfigNode key = Convert(kv.first, depth + 1);
          ConfigNode value = Convert(kv.second, depth + 1);
          if (value.is_null()) {
            value.line = key.line;
            value.column = key.column;
          }
          out.entries.push_back(ConfigEntry{std::move(key), std::move(value)});
          if (!problem_.empty()) break;
        }
        break;
      default:
        out.kind = ConfigNode::Kind::kNull;
        break;
    }
    return out;
  }
  const std::string& problem() const { return problem_; }
  const YAML::Mark& problem_at() const { return problem_at_; }

 private:
  size_t count_ = 0;
  std::string problem_;
  YAML::Mark problem_at_;
};

Origin MarkOrigin(const YAML::Mark& mark) {
  if (mark.line < 0) return Origin{};
  return Origin{"", mark.line + 1, mark.column + 1};
}

// Parses `yaml` into `root`; false (with the error reported) when it is not YAML.
bool ParseYaml(std::string_view yaml, DiagnosticSink& sink, ConfigNode* root) {
  try {
    YAML::Node doc = YAML::Load(std::string(yaml));
    NodeConverter converter;
    *root = converter.Convert(doc, 0);
    if (!converter.problem().empty()) {
      sink.ErrorAt(MarkOrigin(converter.problem_at()), converter.problem());
      return false;
    }
    return true;
  } catch (const YAML::Exception& e) {
    sink.ErrorAt(MarkOrigin(e.mark), "YAML syntax error: " + e.msg,
                 "check indentation, colons and brackets at or just before this position");
  } catch (const std::exception& e) {
    sink.ErrorAt(Origin{}, std::string("cannot parse the document: ") + e.what());
  }
  return false;
}

std::string Hostname() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "";
  return host;
}

// The profile to apply, "" for none; reports an unknown requested name.
std::string ChooseProfile(const SchemaReader& reader, const LoadOptions& options,
                          DiagnosticSink& sink) {
  std::string requested = options.profile;
  std::string from = "requested";
  if (requested.empty()) {
    std::optional<std::string> env = ProcessEnv("SPILLWAY_PROFILE");
    if (env && !env->empty()) {
      requested = *env;
      from = "named by SPILLWAY_PROFILE";
    }
  }
  if (requested.empty()) return reader.ProfileForHost(Hostname());
  if (reader.HasProfile(requested)) return requested;
  std::vector<std::string_view> names(reader.profile_names().begin(),
                                      reader.profile_names().end());
  sink.ErrorAt(Origin{"profiles", 0, 0}, "unknown profile '" + requested + "' " + from,
               names.empty() ? "the file defines no profiles" : SuggestHint(requested, names));
  return "";
}

void Resolve(const ConfigNode& root, const LoadOptions& options, DiagnosticSink& sink,
             LoadResult* result) {
  SchemaReader reader(root, sink, ProcessEnv, options.vars);
  if (!reader.ReadDocument()) return;
  result->profiles = reader.profile_names();
  const std::string chosen = ChooseProfile(reader, options, sink);

  ChainResult selected = reader.ReadChain(chosen);
  sink.set_origins(&selected.origins);
  if (options.scratch_path) {
    for (TierConfig& t : selected.config.tiers) {
      if (t.kind != TierKind::kFile || t.persistent) continue;
      for (std::string& p : t.paths) p = options.scratch_path(p);
    }
  }
  CheckConfigValues(selected.config, sink);
  CheckMachine(&selected.config, options, sink, &result->paths);
  result->config = std::move(selected.config);

  if (!options.all_profiles) return;
  std::vector<std::string> others = reader.profile_names();
  others.insert(others.begin(), "");
  for (const std::string& name : others) {
    if (name == chosen) continue;
    ChainResult chain = reader.ReadChain(name);
    sink.set_origins(&chain.origins);
    CheckConfigValues(chain.config, sink);
  }
  sink.set_origins(nullptr);
}

}  // namespace

GpuProbe DetectGpus() {
  GpuProbe probe;
  probe.built_with_cuda = cuda::BuiltWithCuda();
  probe.device_total_bytes = cuda::VisibleDeviceTotalBytes();
  for (size_t d = 0; d < probe.device_total_bytes.size(); ++d) {
    auto id = cuda::GetDeviceIdentity(static_cast<int>(d));
    probe.device_uuids.push_back(id.ok() ? id->uuid : std::string());
  }
  if (std::optional<std::string> v = ProcessEnv("CUDA_VISIBLE_DEVICES")) {
    probe.cuda_visible_devices_set = true;
    probe.cuda_visible_devices = *v;
  }
  return probe;
}

StatusOr<std::string> ReadConfigText(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever; only a regular file is read (then with blocking reads).
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return Status::NotFound("cannot open '" + path + "': no such file");
    return Status::FromErrno(err, "cannot open '" + path + "'");
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    close(fd);
    return Status::IOError("cannot read '" + path + "': it is a directory");
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return Status::IOError("cannot read '" + path + "': not a regular file (a FIFO, socket or device)");
  }
  if (int fl = fcntl(fd, F_GETFL); fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
    close(fd);
    return Status::IOError("'" + path + "' is larger than 16 MiB; not a config file?");
  }
  std::string text;
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Status::FromErrno(err, "cannot read '" + path + "'");
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFileBytes) {
      close(fd);
      return Status::IOError("'" + path + "' is larger than 16 MiB; not a config file?");
    }
  }
  close(fd);
  return text;
}

LoadResult LoadConfigString(std::string_view yaml, const std::string& source_name,
                            const LoadOptions& options) {
  LoadResult result;
  DiagnosticSink sink(source_name);
  ConfigNode root;
  if (ParseYaml(yaml, sink, &root)) Resolve(root, options, sink, &result);
  result.config.source = source_name;
  result.errors = sink.TakeErrors();
  result.warnings = sink.TakeWarnings();
  return result;
}

LoadResult LoadConfigFile(const std::string& path, const LoadOptions& options) {
  StatusOr<std::string> text = ReadConfigText(path);
  if (!text.ok()) {
    LoadResult result;
    Diagnostic d;
    d.file = path;
    d.message = text.status().message();
    result.errors.push_back(std::move(d));
    result.config.source = path;
    return result;
  }
  return LoadConfigString(*text, path, options);
}

std::vector<Diagnostic> FinalizeConfig(Config& config, const LoadOptions& options) {
  DiagnosticSink sink(config.source);
  CheckConfigValues(config, sink);
  CheckMachine(&config, options, sink, nullptr);
  std::vector<Diagnostic> out = sink.TakeErrors();
  for (Diagnostic& w : sink.TakeWarnings()) out.push_back(std::move(w));
  return out;
}

std::vector<Diagnostic> ValidateConfig(const Config& config, const LoadOptions& options) {
  Config copy = config;
  return FinalizeConfig(copy, options);
}

StatusOr<Config> LoadConfig(const std::string& path, const LoadOptions& options) {
  LoadResult result = LoadConfigFile(path, options);
  if (!result.ok()) {
    std::string message;
    for (const Diagnostic& d : result.errors) {
      if (!message.empty()) message += '\n';
      message += d.ToString();
    }
    return Status::InvalidArgument(std::move(message));
  }
  return std::move(result.config);
}

}  // namespace spillway
