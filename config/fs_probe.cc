// Filesystem and memory probes behind the machine checks of validate.cc.
#include "config/fs_probe.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/tier_files.h"

namespace spillway {
namespace {

struct FsType {
  unsigned long magic;
  const char* name;
  bool network;
  bool memory;
};

constexpr FsType kFsTypes[] = {
    {0xEF53, "ext4", false, false},       {0x58465342, "xfs", false, false},
    {0x9123683E, "btrfs", false, false},  {0x2FC12FC1, "zfs", false, false},
    {0xF2F52010, "f2fs", false, false},   {0x794C7630, "overlay", false, false},
    {0x01021994, "tmpfs", false, true},   {0x858458F6, "ramfs", false, true},
    {0x6969, "nfs", true, false},         {0xFF534D42, "cifs", true, false},
    {0xFE534D42, "smb2", true, false},    {0x00C36400, "ceph", true, false},
    {0x0BD00BD0, "lustre", true, false},  {0x47504653, "gpfs", true, false},
    {0x65735546, "fuse", true, false},    {0x5346414F, "afs", true, false},
    {0x4D44, "vfat", false, false},       {0x5346544E, "ntfs", false, false},
};

std::atomic<DirectIoProbeFn> g_direct_probe{nullptr};

const FsType* FindFsType(unsigned long magic) {
  for (const FsType& t : kFsTypes) {
    if (t.magic == magic) return &t;
  }
  return nullptr;
}

std::string Parent(const std::string& path) {
  size_t cut = path.find_last_of('/');
  if (cut == std::string::npos) return ".";
  if (cut == 0) return "/";
  return path.substr(0, cut);
}

std::string NearestExisting(std::string path) {
  struct stat st;
  while (stat(path.c_str(), &st) != 0) {
    if (path == "/" || path == ".") break;
    path = Parent(path);
  }
  return path;
}

int MakeDirs(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  if (path != "/" && path != ".") {
    if (int err = MakeDirs(Parent(path))) return err;
  }
  if (mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) return errno;
  return 0;
}

// Whether a file in `dir` can be created and written with O_DIRECT. Returns
// the errno of creating the file, 0 when it could be created.
int ProbeWrite(const std::string& dir, bool* direct_ok) {
  static std::atomic<unsigned> counter{0};
  std::string name = dir + "/.spillway-probe-" + std::to_string(getpid()) + "-" +
                     std::to_string(counter.fetch_add(1));
  int fd = open(name.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  close(fd);
  *direct_ok = false;
  fd = open(name.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd >= 0) {
    constexpr size_t kBlock = 4096;
    void* buf = std::aligned_alloc(kBlock, kBlock);
    if (buf) {
      std::memset(buf, 0, kBlock);
      *direct_ok = pwrite(fd, buf, kBlock, 0) == static_cast<ssize_t>(kBlock);
      std::free(buf);
    }
    close(fd);
  }
  unlink(name.c_str());
  return 0;
}

void MeasureFilesystem(const std::string& dir, PathProbe* probe, const FsType** type) {
  struct statfs fs;
  *type = nullptr;
  if (statfs(dir.c_str(), &fs) == 0) {
    unsigned long magic = static_cast<unsigned long>(fs.f_type) & 0xFFFFFFFFul;
    *type = FindFsType(magic);
    char hex[32];
    std::snprintf(hex, sizeof hex, "0x%lx", magic);
    probe->filesystem = *type ? (*type)->name : hex;
  }
  struct statvfs vfs;
  if (statvfs(dir.c_str(), &vfs) == 0) {
    probe->fs_total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
    probe->fs_free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  }
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) probe->fs_id = st.st_dev;
}

void CheckMedium(const TierConfig& tier, const std::string& dir, const FsType* type,
                 const std::string& field, DiagnosticSink& sink) {
  if (!type || tier.medium == Medium::kUnspecified) return;
  const std::string medium = MediumName(tier.medium);
  if (tier.medium != Medium::kNfs && (type->network || type->memory)) {
    sink.Warning(field + ".medium",
                 "medium is " + medium + " but '" + dir + "' is on " + type->name +
                     (type->memory ? " (memory, lost at reboot)" : " (a network filesystem)"),
                 type->network ? "use medium: nfs" : "use a directory on a local disk");
  } else if (tier.medium == Medium::kNfs && !type->network) {
    sink.Warning(field + ".medium",
                 "medium is nfs but '" + dir + "' is on a local " + type->name + " filesystem",
                 "use the medium of the local disk, e.g. ssd");
  }
}

}  // namespace

std::string FilesystemTypeName(const std::string& dir) {
  PathProbe probe;
  const FsType* type = nullptr;
  MeasureFilesystem(dir, &probe, &type);
  return probe.filesystem;
}

void SetDirectIoProbeForTesting(DirectIoProbeFn probe) { g_direct_probe.store(probe); }

DirIdentity IdentifyDirectory(const std::string& path) {
  DirIdentity id;
  std::string existing = path;
  std::string rest;  // components below `existing` that do not exist yet
  struct stat st;
  while (stat(existing.c_str(), &st) != 0 && existing != "/" && existing != ".") {
    const size_t cut = existing.find_last_of('/');
    const std::string leaf = cut == std::string::npos ? existing : existing.substr(cut + 1);
    if (!leaf.empty()) rest = rest.empty() ? leaf : leaf + "/" + rest;
    existing = Parent(existing);
  }
  char real[PATH_MAX];
  std::string canonical = realpath(existing.c_str(), real) ? std::string(real) : existing;
  id.exists = rest.empty();
  for (std::string p = canonical;; p = Parent(p)) {
    if (stat(p.c_str(), &st) == 0) id.chain.emplace_back(st.st_dev, st.st_ino);
    if (p == "/" || p == ".") break;
  }
  if (!rest.empty()) canonical += (canonical == "/" ? "" : "/") + rest;
  id.canonical = canonical;
  return id;
}

uint64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

uint64_t FilesystemBytes(const std::string& path) {
  struct statvfs vfs;
  if (path.empty() || statvfs(NearestExisting(path).c_str(), &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
}

PathProbe CheckTierDirectory(const TierConfig& tier, size_t index, const std::string& field,
                             const LoadOptions& options, DiagnosticSink& sink) {
  const std::string& dir = tier.paths[index];
  const std::string at = field + ".paths[" + std::to_string(index) + "]";
  PathProbe probe;
  std::string target = dir;
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      sink.Error(at, "cannot access '" + dir + "': " + std::strerror(errno));
      return probe;
    }
    if (options.create_dirs) {
      if (int err = MakeDirs(dir)) {
        sink.Error(at, "cannot create directory '" + dir + "': " + std::strerror(err),
                   "create it, or choose a writable location");
        return probe;
      }
      lstat(dir.c_str(), &st);
    } else {
      target = NearestExisting(Parent(dir));
      if (access(target.c_str(), W_OK | X_OK) != 0) {
        sink.Error(at, "directory '" + dir + "' does not exist and cannot be created: '" +
                           target + "' is not writable");
        return probe;
      }
    }
  }
  if (target == dir) {
    probe.exists = true;
    if (S_ISLNK(st.st_mode)) {
      char real[PATH_MAX];
      std::string real_hint = realpath(dir.c_str(), real) ? "use '" + std::string(real) + "'"
                                                          : "the link is dangling";
      if (!tier.allow_symlink) {
        sink.Error(at, "'" + dir + "' is a symlink", real_hint + ", or set allow_symlink: true");
        return probe;
      }
      if (stat(dir.c_str(), &st) != 0) {
        sink.Error(at, "cannot follow symlink '" + dir + "': " + std::strerror(errno));
        return probe;
      }
    }
    if (!S_ISDIR(st.st_mode)) {
      sink.Error(at, "'" + dir + "' is not a directory");
      return probe;
    }
    // Others who may create files here could plant a segment (served at
    // recovery) or a LOCK; the sticky bit only stops them deleting ours.
    if (st.st_mode & (S_IWOTH | S_IWGRP)) {
      char mode[8];
      std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
      sink.Error(at, "'" + dir + "' is " + ((st.st_mode & S_IWOTH) ? "world" : "group") + "-writable (mode " +
                         mode + "): other users could plant files in it",
                 "chmod go-w '" + dir + "', or use a new subdirectory (the engine creates it 0700)");
      return probe;
    }
    if (st.st_uid != geteuid() && !tier.allow_symlink) {
      sink.Error(at, "'" + dir + "' is owned by uid " + std::to_string(st.st_uid) +
                         ", not by this user (uid " + std::to_string(geteuid()) + ")",
                 "chown it, or set allow_symlink: true to accept it");
      return probe;
    }
    // A persistent tier leaves its manifest there (tiers/segment_manifest.h);
    // a scratch tier would delete the records, and Open refuses to.
    if (!tier.persistent && access((dir + "/" + kManifestName).c_str(), F_OK) == 0) {
      sink.Warning(at, "'" + dir + "' holds records written by a persistent tier (it has a " + kManifestName +
                           "), and this tier is not persistent",
                   tier.wipe_persistent ? "wipe_persistent: true is set: Open will delete them"
                                        : "Open refuses it: set persistent: true to keep the records, or "
                                          "wipe_persistent: true to delete them");
    }
  }
  bool direct_ok = false;
  if (int err = ProbeWrite(target, &direct_ok)) {
    if (target == dir) {
      sink.Error(at, "'" + dir + "' is not writable: " + std::strerror(err));
    } else {
      sink.Error(at, "directory '" + dir + "' does not exist and cannot be created: cannot write in '" +
                         target + "': " + std::strerror(err));
    }
    return probe;
  }
  if (DirectIoProbeFn override_probe = g_direct_probe.load()) direct_ok = override_probe(target);
  probe.direct_io = direct_ok;
  const FsType* type = nullptr;
  MeasureFilesystem(target, &probe, &type);
  CheckMedium(tier, dir, type, field, sink);
  if (tier.io.direct && !direct_ok) {
    sink.Warning(at, "the filesystem of '" + dir + "' (" + probe.filesystem +
                         ") refuses O_DIRECT: buffered I/O will be used",
                 "set io.direct: false to silence this");
  }
  return probe;
}

}  // namespace spillway
