// Rules that ask the machine: gpu tiers against the probe, percentages, and
// the checks on file tier directories. Each rule has a passing and a failing
// case.
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <fstream>

#include "config/fs_probe.h"
#include "config_test_util.h"
#include "test_util.h"

namespace spillway {
namespace {

using testing::FileChain;
using testing::FindError;
using testing::FindWarning;
using testing::LoadYaml;
using testing::TempDir;

const char* kGpuChain =
    "version: 1\n"
    "tiers:\n"
    "  - name: gpu0\n"
    "    kind: gpu\n"
    "    device: DEVICE\n"
    "    capacity: 50%\n"
    "    OPTIONAL\n"
    "  - {name: host, kind: host, capacity: 1GiB}\n";

std::string GpuChain(int device, bool optional) {
  std::string s = kGpuChain;
  s.replace(s.find("DEVICE"), 6, std::to_string(device));
  s.replace(s.find("OPTIONAL"), 8, optional ? "optional: true" : "optional: false");
  return s;
}

LoadOptions WithGpus(bool built_with_cuda, std::vector<uint64_t> devices) {
  LoadOptions o = testing::NoMachine();
  o.gpu.emplace();
  o.gpu->built_with_cuda = built_with_cuda;
  o.gpu->device_total_bytes = std::move(devices);
  return o;
}

LoadOptions Fs(bool create_dirs = true) {
  LoadOptions o;
  o.create_dirs = create_dirs;
  return o;
}

TEST_CASE("a gpu tier resolves its percentage against the device") {
  LoadResult r = LoadYaml(GpuChain(1, false), WithGpus(true, {8ull << 30, 16ull << 30}));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  REQUIRE(r.config.tiers.size() == 2);
  CHECK(r.config.tiers[0].capacity_bytes == 8ull << 30);
}

TEST_CASE("a gpu tier in a build without CUDA") {
  LoadResult r = LoadYaml(GpuChain(0, false), WithGpus(false, {}));
  std::optional<Diagnostic> d = FindError(r, "tiers[0].kind", "built without CUDA");
  REQUIRE(d);
  CHECK(d->line == 4);
  LoadResult optional = LoadYaml(GpuChain(0, true), WithGpus(false, {}));
  REQUIRE_MESSAGE(optional.ok(), optional.Summary());
  CHECK(FindWarning(optional, "tiers[0].kind", "built without CUDA"));
  REQUIRE(optional.config.tiers.size() == 1);
  CHECK(optional.config.tiers[0].name == "host");
}

TEST_CASE("a gpu tier naming a device that is not there") {
  LoadResult r = LoadYaml(GpuChain(2, false), WithGpus(true, {1ull << 30}));
  std::optional<Diagnostic> d = FindError(r, "tiers[0].device", "device 2 not found (1 CUDA devices visible)");
  REQUIRE(d);
  CHECK(d->line == 5);
  LoadResult none = LoadYaml(GpuChain(0, false), WithGpus(true, {}));
  CHECK(FindError(none, "tiers[0].device", "0 CUDA devices visible"));
  LoadResult optional = LoadYaml(GpuChain(2, true), WithGpus(true, {1ull << 30}));
  REQUIRE(optional.ok());
  CHECK(FindWarning(optional, "tiers[0].device", "left out"));
}

TEST_CASE("dropping every tier leaves an error") {
  std::string only_gpu = "version: 1\ntiers:\n  - {name: g, kind: gpu, capacity: 1GiB, optional: true}\n";
  CHECK(FindError(LoadYaml(only_gpu, WithGpus(false, {})), "tiers", "no tier is left"));
}

TEST_CASE("FinalizeConfig drops optional tiers and resolves percentages") {
  Config c;
  TierConfig gpu;
  gpu.name = "gpu0";
  gpu.kind = TierKind::kGpu;
  gpu.capacity_text = "80%";
  gpu.optional = true;
  TierConfig host;
  host.name = "host";
  host.capacity_text = "10%";
  c.tiers = {gpu, host};
  std::vector<Diagnostic> d = FinalizeConfig(c, WithGpus(false, {}));
  REQUIRE(d.size() == 1);
  CHECK(d[0].severity == Diagnostic::Severity::kWarning);
  REQUIRE(c.tiers.size() == 1);
  CHECK(c.tiers[0].capacity_bytes == PhysicalMemoryBytes() / 10);
}

TEST_CASE("host and file percentages") {
  LoadResult host = LoadYaml("version: 1\ntiers:\n  - {name: h, kind: host, capacity: 50%}\n");
  REQUIRE(host.ok());
  CHECK(host.config.tiers[0].capacity_bytes == PhysicalMemoryBytes() / 2);
  TempDir dir("pct");
  std::string yaml = FileChain(dir.sub("tier"));
  yaml.replace(yaml.find("capacity: 1MiB"), 14, "capacity: 1%");
  LoadResult file = LoadYaml(yaml, Fs(false));
  REQUIRE_MESSAGE(file.ok(), file.Summary());
  uint64_t fs = FilesystemBytes(dir.path());
  REQUIRE(fs > 0);
  CHECK(file.config.tiers[1].capacity_bytes == fs / 100);
  CHECK(FilesystemBytes(dir.sub("not/yet/there")) == fs);
}

TEST_CASE("a missing directory is created, mode 0700, when asked") {
  TempDir dir("mk");
  std::string target = dir.sub("a/b");
  LoadResult r = LoadYaml(FileChain(target), Fs(true));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  struct stat st;
  REQUIRE(stat(target.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(r.paths.at(target).exists);
  CHECK_FALSE(r.paths.at(target).filesystem.empty());
}

TEST_CASE("without create_dirs a missing directory is checked at its parent") {
  TempDir dir("nomk");
  std::string target = dir.sub("later");
  LoadResult r = LoadYaml(FileChain(target), Fs(false));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  struct stat st;
  CHECK(stat(target.c_str(), &st) != 0);
  CHECK_FALSE(r.paths.at(target).exists);
}

TEST_CASE("a directory that cannot be created is an error") {
  TempDir dir("file");
  std::string blocker = dir.sub("plain-file");
  std::ofstream(blocker) << "x";
  LoadResult r = LoadYaml(FileChain(blocker + "/sub"), Fs(true));
  CHECK(FindError(r, "tiers[1].paths[0]", "cannot"));
  LoadResult not_dir = LoadYaml(FileChain(blocker), Fs(true));
  CHECK(FindError(not_dir, "tiers[1].paths[0]", "not a directory"));
}

TEST_CASE("a directory that cannot be written is an error") {
  if (geteuid() == 0) {
    MESSAGE("running as root: permission bits do not stop root; checking a read-only path instead");
    LoadResult r = LoadYaml(FileChain("/proc/spillway-test"), Fs(false));
    CHECK(FindError(r, "tiers[1].paths[0]", "cannot be created"));
    CHECK(LoadYaml(FileChain(TempDir("w").sub("x")), Fs(false)).ok());
    return;
  }
  TempDir dir("ro");
  chmod(dir.path().c_str(), 0500);
  LoadResult r = LoadYaml(FileChain(dir.sub("x")), Fs(false));
  CHECK(FindError(r, "tiers[1].paths[0]", "not writable"));
  chmod(dir.path().c_str(), 0700);
}

TEST_CASE("a symlinked directory needs allow_symlink") {
  TempDir dir("link");
  std::string real = dir.sub("real");
  std::string link = dir.sub("link");
  REQUIRE(mkdir(real.c_str(), 0700) == 0);
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  LoadResult r = LoadYaml(FileChain(link), Fs());
  std::optional<Diagnostic> d = FindError(r, "tiers[1].paths[0]", "is a symlink");
  REQUIRE(d);
  CHECK(d->hint.find(real) != std::string::npos);
  LoadResult allowed = LoadYaml(FileChain(link, "    allow_symlink: true\n"), Fs());
  CHECK_MESSAGE(allowed.ok(), allowed.Summary());
  CHECK(LoadYaml(FileChain(real), Fs()).ok());
}

TEST_CASE("a directory others can write is refused, with the sticky bit or without") {
  TempDir dir("ww");
  std::string open_dir = dir.sub("open");
  REQUIRE(mkdir(open_dir.c_str(), 0700) == 0);
  for (auto [mode, what] : {std::pair{0777, "world-writable"}, std::pair{01777, "world-writable"},
                            std::pair{0770, "group-writable"}, std::pair{01730, "group-writable"}}) {
    CAPTURE(mode);
    chmod(open_dir.c_str(), mode);
    CHECK(FindError(LoadYaml(FileChain(open_dir), Fs()), "tiers[1].paths[0]", what));
  }
  chmod(open_dir.c_str(), 0755);
  LoadResult own = LoadYaml(FileChain(open_dir), Fs());
  CHECK_MESSAGE(own.ok(), own.Summary());
}

TEST_CASE("a directory owned by someone else needs allow_symlink") {
  TempDir dir("own");
  std::string d = dir.sub("theirs");
  REQUIRE(mkdir(d.c_str(), 0700) == 0);
  if (geteuid() != 0) {
    MESSAGE("not root: cannot give a directory away; checking the owned case only");
    CHECK(LoadYaml(FileChain(d), Fs()).ok());
    return;
  }
  REQUIRE(chown(d.c_str(), 4242, 4242) == 0);
  CHECK(FindError(LoadYaml(FileChain(d), Fs()), "tiers[1].paths[0]", "owned by uid 4242"));
  CHECK(LoadYaml(FileChain(d, "    allow_symlink: true\n"), Fs()).ok());
}

TEST_CASE("free space below the capacity is a warning") {
  TempDir dir("free");
  LoadResult small = LoadYaml(FileChain(dir.sub("s")), Fs());
  REQUIRE(small.ok());
  CHECK_FALSE(FindWarning(small, "tiers[1].capacity", "free"));
  std::string yaml = FileChain(dir.sub("s"));
  yaml.replace(yaml.find("capacity: 1MiB"), 14, "capacity: 1000PiB");
  LoadResult big = LoadYaml(yaml, Fs());
  CHECK(big.ok());
  CHECK(FindWarning(big, "tiers[1].capacity", "free for a capacity of"));
}

bool IsTmpfs(const char* path) {
  struct statfs fs;
  return statfs(path, &fs) == 0 && fs.f_type == 0x01021994;
}

TEST_CASE("a medium that disagrees with the filesystem is a warning") {
  TempDir local("medium");
  struct statfs fs;
  REQUIRE(statfs(local.path().c_str(), &fs) == 0);
  bool local_disk = fs.f_type == 0xEF53 || fs.f_type == 0x58465342 || fs.f_type == 0x9123683E;
  if (local_disk) {
    LoadResult nfs = LoadYaml(FileChain(local.sub("n"), "    medium: nfs\n"), Fs());
    CHECK(nfs.ok());
    CHECK(FindWarning(nfs, "tiers[1].medium", "medium is nfs but"));
    LoadResult ssd = LoadYaml(FileChain(local.sub("s"), "    medium: ssd\n"), Fs());
    CHECK(ssd.warnings.empty());
  } else {
    MESSAGE("test directory is not on ext4/xfs/btrfs; skipping the nfs-on-local case");
  }
  if (IsTmpfs("/dev/shm") && access("/dev/shm", W_OK) == 0) {
    std::string dir = "/dev/shm/spillway-medium-" + std::to_string(getpid());
    LoadResult r = LoadYaml(FileChain(dir, "    medium: nvme\n"), Fs());
    CHECK(FindWarning(r, "tiers[1].medium", "is on tmpfs"));
    rmdir(dir.c_str());
  } else {
    MESSAGE("/dev/shm is not a writable tmpfs; skipping the nvme-on-tmpfs case");
  }
}

bool RefuseDirect(const std::string&) { return false; }

TEST_CASE("a filesystem that refuses O_DIRECT gives a warning and buffered I/O") {
  TempDir dir("direct");
  LoadResult real = LoadYaml(FileChain(dir.sub("d")), Fs());
  REQUIRE(real.ok());
  if (real.paths.at(dir.sub("d")).direct_io) {
    CHECK(real.config.tiers[1].io.direct);
    CHECK_FALSE(FindWarning(real, "tiers[1].paths[0]", "O_DIRECT"));
  }
  SetDirectIoProbeForTesting(RefuseDirect);
  LoadResult refused = LoadYaml(FileChain(dir.sub("d")), Fs());
  SetDirectIoProbeForTesting(nullptr);
  REQUIRE(refused.ok());
  CHECK(FindWarning(refused, "tiers[1].paths[0]", "buffered I/O will be used"));
  CHECK_FALSE(refused.config.tiers[1].io.direct);
  LoadResult off = LoadYaml(FileChain(dir.sub("d"), "    io: {direct: false}\n"), Fs());
  CHECK_FALSE(FindWarning(off, "tiers[1].paths[0]", "O_DIRECT"));
}

TEST_CASE("tier directories aliased or nested through a symlinked parent are refused") {
  TempDir dir("alias");
  const std::string real = dir.sub("real");
  const std::string link = dir.sub("link");
  REQUIRE(mkdir(real.c_str(), 0700) == 0);
  REQUIRE(symlink(real.c_str(), link.c_str()) == 0);
  auto chain = [](const std::string& a, const std::string& b) {
    return "version: 1\ntiers:\n  - {name: host, kind: host, capacity: 64MiB}\n"
           "  - {name: scratch, kind: file, capacity: 1MiB, paths: [\"" + a + "\"]}\n"
           "  - {name: keep, kind: file, capacity: 1MiB, persistent: true, paths: [\"" + b + "\"]}\n";
  };
  for (bool create : {false, true}) {
    CAPTURE(create);
    LoadResult same = LoadYaml(chain(link + "/d", real + "/d"), Fs(create));
    std::optional<Diagnostic> d = FindError(same, "tiers[2].paths[0]", "same directory as");
    CHECK_MESSAGE(d, same.Summary());
    LoadResult nested = LoadYaml(chain(link + "/d/inner", real + "/d"), Fs(create));
    CHECK_MESSAGE(FindError(nested, "tiers[2].paths[0]", "inside"), nested.Summary());
    LoadResult around = LoadYaml(chain(link, real + "/d"), Fs(create));
    CHECK_MESSAGE(FindError(around, "tiers[2].paths[0]", "inside"), around.Summary());
    LoadResult apart = LoadYaml(chain(link + "/a", real + "/b"), Fs(create));
    CHECK_MESSAGE(apart.ok(), apart.Summary());
  }
}

TEST_CASE("a scratch tier on a directory of persistent records is a warning") {
  TempDir dir("wipe");
  { std::ofstream(dir.sub("MANIFEST")) << "x"; }
  LoadResult r = LoadYaml(FileChain(dir.path()), Fs());
  std::optional<Diagnostic> w = FindWarning(r, "tiers[1].paths[0]", "persistent tier");
  REQUIRE_MESSAGE(w, r.Summary());
  CHECK(w->hint.find("wipe_persistent") != std::string::npos);
  LoadResult kept = LoadYaml(FileChain(dir.path(), "    persistent: true\n"), Fs());
  CHECK_FALSE(FindWarning(kept, "tiers[1].paths[0]", "persistent tier"));
  LoadResult wiped = LoadYaml(FileChain(dir.path(), "    wipe_persistent: true\n"), Fs());
  CHECK_MESSAGE(wiped.ok(), wiped.Summary());
  CHECK(FindWarning(wiped, "tiers[1].paths[0]", "persistent tier"));
}

}  // namespace
}  // namespace spillway
