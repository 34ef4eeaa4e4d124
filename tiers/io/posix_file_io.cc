// PosixFileIo: FileIo over plain syscalls. It serves where the kernel refuses
// io_uring (old kernels, seccomp, RLIMIT_MEMLOCK) and provides every
// non-data operation for the io_uring implementation too.
#include "tiers/io/posix_file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <string>

namespace spillway::io_internal {

namespace {

std::string Quoted(std::string_view op, const std::string& path) {
  std::string s(op);
  s += " '";
  s += path;
  s += "'";
  return s;
}

std::string Quoted(std::string_view op, const std::string& path, uint64_t offset, uint64_t len) {
  return Quoted(op, path) + " offset " + std::to_string(offset) + " len " + std::to_string(len);
}

// Linux transfers at most 0x7ffff000 bytes per pread/pwrite call anyway;
// asking for less keeps the arithmetic in ssize_t.
constexpr size_t kMaxChunk = 1u << 30;

}  // namespace

std::string FdPath(int fd) {
  char link[64];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  char buf[PATH_MAX];
  ssize_t n = ::readlink(link, buf, sizeof(buf) - 1);
  if (n <= 0) return "fd " + std::to_string(fd);
  return std::string(buf, static_cast<size_t>(n));
}

std::string DescribeRequest(std::string_view op, const IoRequest& r) {
  return Quoted(op, FdPath(r.fd), r.offset, r.len);
}

Status RequestError(const IoRequest& r, int err) {
  std::string what = DescribeRequest(r.op == IoRequest::Op::kRead ? "pread" : "pwrite", r);
  if (err == EINVAL) {
    int fl = ::fcntl(r.fd, F_GETFL);
    if (fl >= 0 && (fl & O_DIRECT)) {
      what += " (O_DIRECT needs buffer, offset and length aligned to " + std::to_string(kIoAlign) + ")";
    }
  }
  return Status::FromErrno(err, what);
}

Status TransferBlocking(IoRequest& r) {
  auto* p = static_cast<char*>(r.buf);
  size_t done = 0;
  while (done < r.len) {
    size_t n = std::min(r.len - done, kMaxChunk);
    off_t off = static_cast<off_t>(r.offset + done);
    ssize_t got = r.op == IoRequest::Op::kRead ? ::pread(r.fd, p + done, n, off)
                                               : ::pwrite(r.fd, p + done, n, off);
    if (got < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      int err = errno;
      r.result = -err;
      return RequestError(r, err);
    }
    if (got == 0) {
      // A read of 0 is end of file: the request ends there (see file_io.h).
      // A write of 0 makes no progress and would loop forever; the kernel
      // only does that on a broken device.
      if (r.op == IoRequest::Op::kRead) break;
      r.result = -EIO;
      return Status::IOError(DescribeRequest("pwrite", r) + ": wrote 0 bytes after " +
                             std::to_string(done));
    }
    done += static_cast<size_t>(got);
  }
  r.result = static_cast<ssize_t>(done);
  return Status::OK();
}

StatusOr<FileHandle> PosixFileIo::Open(const std::string& path, const OpenOptions& opts) {
  int flags = O_CLOEXEC | O_NOFOLLOW | (opts.write ? O_RDWR : O_RDONLY);
  if (opts.create) flags |= O_CREAT;
  if (opts.create && opts.exclusive) flags |= O_EXCL;
  int fd = ::open(path.c_str(), flags, 0600);
  if (fd < 0) {
    int err = errno;
    std::string what = Quoted("open", path);
    if (err == ELOOP) what += " (a symlink: spillway does not follow symlinks)";
    if (err == ENOENT) return Status::NotFound(what + ": no such file");
    return Status::FromErrno(err, what);
  }
  FileHandle h;
  h.fd = fd;
  h.path = path;
  if (opts.try_direct) {
    // O_DIRECT is switched on after open rather than passed to open(): an
    // exclusive create on a filesystem that refuses O_DIRECT would otherwise
    // create the file, fail with EINVAL, and then fail the retry with EEXIST.
    // The kernel applies the same FMODE_CAN_ODIRECT check on both paths.
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
      h.direct = true;
    } else if (errno != EINVAL) {
      int err = errno;
      ::close(fd);
      return Status::FromErrno(err, Quoted("fcntl(O_DIRECT)", path));
    }
  }
  return h;
}

Status PosixFileIo::Close(FileHandle& file) {
  if (file.fd < 0) return Status::OK();
  int fd = file.fd;
  file.fd = -1;
  // Never retry close on EINTR: Linux has released the fd already.
  if (::close(fd) != 0 && errno != EINTR) return Status::FromErrno(errno, Quoted("close", file.path));
  return Status::OK();
}

Status PosixFileIo::SubmitAndWait(std::span<IoRequest> requests, uint32_t /*queue_depth*/) {
  Status first;
  for (IoRequest& r : requests) {
    if (!first.ok()) {
      r.result = -ECANCELED;
      continue;
    }
    first = TransferBlocking(r);
  }
  return first;
}

Status PosixFileIo::Sync(const FileHandle& file) {
  while (::fdatasync(file.fd) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, Quoted("fdatasync", file.path));
  }
  return Status::OK();
}

Status PosixFileIo::PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) {
  while (::fallocate(file.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                     static_cast<off_t>(len)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EOPNOTSUPP || errno == ENOSYS) {
      return Status::NotSupported(Quoted("punch hole", file.path, offset, len) +
                                  ": the filesystem cannot punch holes");
    }
    return Status::FromErrno(errno, Quoted("punch hole", file.path, offset, len));
  }
  return Status::OK();
}

Status PosixFileIo::Allocate(const FileHandle& file, uint64_t offset, uint64_t len) {
  while (::fallocate(file.fd, 0, static_cast<off_t>(offset), static_cast<off_t>(len)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EOPNOTSUPP || errno == ENOSYS) {
      return Status::NotSupported(Quoted("fallocate", file.path, offset, len) +
                                  ": the filesystem cannot preallocate");
    }
    return Status::FromErrno(errno, Quoted("fallocate", file.path, offset, len));
  }
  return Status::OK();
}

Status PosixFileIo::Truncate(const FileHandle& file, uint64_t size) {
  while (::ftruncate(file.fd, static_cast<off_t>(size)) != 0) {
    if (errno != EINTR) {
      return Status::FromErrno(errno, Quoted("ftruncate", file.path) + " to " + std::to_string(size));
    }
  }
  return Status::OK();
}

StatusOr<uint64_t> PosixFileIo::FileSize(const FileHandle& file) {
  struct stat st;
  if (::fstat(file.fd, &st) != 0) return Status::FromErrno(errno, Quoted("fstat", file.path));
  return static_cast<uint64_t>(st.st_size);
}

StatusOr<uint64_t> PosixFileIo::AllocatedBytes(const FileHandle& file) {
  struct stat st;
  if (::fstat(file.fd, &st) != 0) return Status::FromErrno(errno, Quoted("fstat", file.path));
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

StatusOr<FsSpace> PosixFileIo::SpaceOf(const std::string& path) {
  struct statvfs vfs;
  if (::statvfs(path.c_str(), &vfs) != 0) return Status::FromErrno(errno, Quoted("statvfs", path));
  FsSpace s;
  s.total_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  s.free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  return s;
}

Status PosixFileIo::Remove(const std::string& path) {
  if (::unlink(path.c_str()) != 0) {
    if (errno == ENOENT) return Status::NotFound(Quoted("unlink", path) + ": no such file");
    return Status::FromErrno(errno, Quoted("unlink", path));
  }
  return Status::OK();
}

Status PosixFileIo::CreateDir(const std::string& path) {
  if (path.empty()) return Status::InvalidArgument("mkdir: empty path");
  // mkdir -p: create each missing component in turn. EEXIST is fine as long
  // as what exists is a directory (another thread may have just made it).
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    std::string prefix = path.substr(0, pos);
    if (prefix.empty() || prefix.back() == '/') continue;
    if (::mkdir(prefix.c_str(), 0700) == 0) continue;
    int err = errno;
    if (err != EEXIST) return Status::FromErrno(err, Quoted("mkdir", prefix));
    struct stat st;
    if (::stat(prefix.c_str(), &st) != 0) return Status::FromErrno(errno, Quoted("stat", prefix));
    if (!S_ISDIR(st.st_mode)) {
      return Status::IOError(Quoted("mkdir", prefix) + ": exists and is not a directory");
    }
  }
  return Status::OK();
}

StatusOr<std::vector<std::string>> PosixFileIo::ListDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound(Quoted("opendir", path) + ": no such directory");
    return Status::FromErrno(errno, Quoted("opendir", path));
  }
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    int err = errno;
    ::close(fd);
    return Status::FromErrno(err, Quoted("fdopendir", path));
  }
  std::vector<std::string> names;
  errno = 0;
  while (struct dirent* e = ::readdir(dir)) {
    std::string_view n(e->d_name);
    if (n != "." && n != "..") names.emplace_back(n);
    errno = 0;
  }
  int err = errno;
  ::closedir(dir);
  if (err != 0) return Status::FromErrno(err, Quoted("readdir", path));
  std::sort(names.begin(), names.end());  // deterministic order for callers and tests
  return names;
}

Status PosixFileIo::SyncDir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Status::FromErrno(errno, Quoted("open dir", path));
  Status s;
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    s = Status::FromErrno(errno, Quoted("fsync dir", path));
    break;
  }
  ::close(fd);
  return s;
}

}  // namespace spillway::io_internal

namespace spillway {

std::unique_ptr<FileIo> MakePosixFileIo() { return std::make_unique<io_internal::PosixFileIo>(); }

}  // namespace spillway
