// PosixFileIo: FileIo over plain syscalls. It serves where the kernel refuses
// io_uring (old kernels, seccomp, RLIMIT_MEMLOCK) and provides every
// non-data operation for the io_uring implementation too.
#include "tiers/io/posix_file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <thread>

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

namespace {

// Fds holding a flock (LockFile, OpenOptions::lock). A fork()ed child shares
// their open file descriptions, and with them the lock, for as long as it
// lives; O_CLOEXEC only helps a child that execs. The atfork child handler
// points each such fd at /dev/null instead (dup2 keeps the number valid for
// the child's own later close), so only this process holds the lock.
struct LockedFds {
  std::mutex mu;  // guards fds; held across fork() by the prepare handler
  std::set<int> fds;
  int devnull = -1;
};

LockedFds& Locked() {
  static LockedFds* l = [] {
    auto* p = new LockedFds;  // never destroyed: used by atfork handlers at any time
    p->devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::pthread_atfork([] { Locked().mu.lock(); }, [] { Locked().mu.unlock(); },
                     [] {
                       LockedFds& l = Locked();
                       if (l.devnull >= 0) {
                         for (int fd : l.fds) (void)::dup2(l.devnull, fd);
                       }
                       l.mu.unlock();
                     });
    return p;
  }();
  return *l;
}

void RegisterLocked(int fd) {
  LockedFds& l = Locked();
  std::lock_guard<std::mutex> g(l.mu);
  l.fds.insert(fd);
}

// Drops the lock before the fd closes. LOCK_UN releases it on the open file
// description, for every process sharing it: a child forked between flock
// and RegisterLocked, or made without the atfork handlers (a raw clone),
// then no longer keeps the file locked once we close it.
void Unlock(int fd, bool locked) {
  if (locked) {
    (void)::flock(fd, LOCK_UN);
    LockedFds& l = Locked();
    std::lock_guard<std::mutex> g(l.mu);
    l.fds.erase(fd);
  }
}

// The fd behind a FileHandle: owned by the handle's object, closed with it.
struct PosixFile final : FileObject {
  explicit PosixFile(int f) : fd(f) {}
  ~PosixFile() override {
    if (fd >= 0) {
      Unlock(fd, locked);
      ::close(fd);
    }
  }
  int fd;
  bool locked = false;  // holds a flock (registered in Locked())
};

// Refuses what is not a regular file: a FIFO (opened without blocking, it
// would block the first read), a device, a directory.
Status CheckRegular(int fd, const std::string& path, struct stat* st) {
  if (::fstat(fd, st) != 0) return Status::FromErrno(errno, Quoted("fstat", path));
  if (!S_ISREG(st->st_mode)) {
    const char* what = S_ISFIFO(st->st_mode) ? "a FIFO" : S_ISDIR(st->st_mode) ? "a directory"
                       : S_ISSOCK(st->st_mode) ? "a socket" : "a device";
    return Status::InvalidArgument(Quoted("open", path) + ": " + what +
                                   ", not a regular file; spillway opens only regular files");
  }
  return Status::OK();
}

// Opened with O_NONBLOCK so a FIFO cannot hang open(); blocking again for
// the reads and writes of the regular file it turned out to be (io_uring
// would otherwise return EAGAIN instead of waiting).
Status ClearNonBlock(int fd, const std::string& path) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
    return Status::FromErrno(errno, Quoted("fcntl(~O_NONBLOCK)", path));
  }
  return Status::OK();
}

// The offset and length alignment O_DIRECT reads of `fd` need: statx's
// dio_offset_align (Linux 6.1+, filesystems that report it), when it is a
// power of two that divides kIoAlign; otherwise kIoAlign, which every
// filesystem spillway runs on accepts.
uint32_t DirectReadAlign(int fd) {
#ifdef STATX_DIOALIGN
  struct statx stx {};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 && (stx.stx_mask & STATX_DIOALIGN) != 0) {
    const uint32_t a = stx.stx_dio_offset_align;
    const uint32_t mem = stx.stx_dio_mem_align;
    if (a >= 1 && (a & (a - 1)) == 0 && kIoAlign % a == 0 && mem <= kIoAlign && mem != 0) return a;
  }
#endif
  (void)fd;
  return kIoAlign;
}

}  // namespace

int FdOf(const FileHandle& file) {
  auto* p = dynamic_cast<PosixFile*>(file.object.get());
  return p != nullptr ? p->fd : -1;
}

std::string DescribeRequest(std::string_view op, const IoRequest& r) {
  return Quoted(op, r.file != nullptr ? r.file->path : std::string("(no file)"), r.offset, r.len);
}

Status RequestError(const IoRequest& r, int err) {
  std::string what = DescribeRequest(r.op == IoRequest::Op::kRead ? "pread" : "pwrite", r);
  if (err == EINVAL && r.file != nullptr && r.file->direct) {
    what += " (O_DIRECT needs buffer, offset and length aligned to " + std::to_string(kIoAlign) + ")";
  }
  return Status::FromErrno(err, what);
}

Status TransferBlocking(IoRequest& r) {
  auto* p = static_cast<char*>(r.buf);
  const int fd = r.file != nullptr ? FdOf(*r.file) : -1;
  size_t done = 0;
  while (done < r.len) {
    size_t n = std::min(r.len - done, kMaxChunk);
    off_t off = static_cast<off_t>(r.offset + done);
    ssize_t got = r.op == IoRequest::Op::kRead ? ::pread(fd, p + done, n, off)
                                               : ::pwrite(fd, p + done, n, off);
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

namespace {

// OpenOptions::lock: flock on `fd`'s open file, waiting while an earlier
// holder (a dead process's writes still in flight) keeps it.
Status LockOpenFile(int fd, const std::string& path, uint32_t wait_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  auto pause = std::chrono::microseconds(100);
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return Status::FromErrno(errno, Quoted("flock", path));
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Busy(Quoted("lock", path) + ": still held after " + std::to_string(wait_ms) +
                          " ms by another open of the file (another engine, a process that inherited it, or one "
                          "that died with writes to it still in flight)");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  return Status::OK();
}

}  // namespace

StatusOr<FileHandle> PosixFileIo::Open(const std::string& path, const OpenOptions& opts) {
  int flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (opts.write ? O_RDWR : O_RDONLY);
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
  auto file = std::make_shared<PosixFile>(fd);
  h.object = file;
  h.path = path;
  struct stat st;
  SPILLWAY_RETURN_IF_ERROR(CheckRegular(fd, path, &st));  // ~PosixFile closes fd
  SPILLWAY_RETURN_IF_ERROR(ClearNonBlock(fd, path));
  if (opts.lock) {
    SPILLWAY_RETURN_IF_ERROR(LockOpenFile(fd, path, opts.lock_wait_ms));
    file->locked = true;
    RegisterLocked(fd);
  }
  if (opts.try_direct) {
    // O_DIRECT is switched on after open rather than passed to open(): an
    // exclusive create on a filesystem that refuses O_DIRECT would otherwise
    // create the file, fail with EINVAL, and then fail the retry with EEXIST.
    // The kernel applies the same FMODE_CAN_ODIRECT check on both paths.
    int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0 && ::fcntl(fd, F_SETFL, fl | O_DIRECT) == 0) {
      h.direct = true;
      h.read_align = DirectReadAlign(fd);
    } else if (errno != EINVAL) {
      return Status::FromErrno(errno, Quoted("fcntl(O_DIRECT)", path));  // ~PosixFile closes fd
    }
  }
  return h;
}

Status PosixFileIo::Close(FileHandle& file) {
  std::shared_ptr<FileObject> obj = std::move(file.object);
  auto* p = dynamic_cast<PosixFile*>(obj.get());
  if (p == nullptr || p->fd < 0) return Status::OK();
  int fd = p->fd;
  p->fd = -1;  // closed for every copy of the handle
  Unlock(fd, p->locked);
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
  while (::fdatasync(FdOf(file)) != 0) {
    if (errno != EINTR) return Status::FromErrno(errno, Quoted("fdatasync", file.path));
  }
  return Status::OK();
}

Status PosixFileIo::PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) {
  while (::fallocate(FdOf(file), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
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
  while (::fallocate(FdOf(file), 0, static_cast<off_t>(offset), static_cast<off_t>(len)) != 0) {
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
  while (::ftruncate(FdOf(file), static_cast<off_t>(size)) != 0) {
    if (errno != EINTR) {
      return Status::FromErrno(errno, Quoted("ftruncate", file.path) + " to " + std::to_string(size));
    }
  }
  return Status::OK();
}

StatusOr<uint64_t> PosixFileIo::FileSize(const FileHandle& file) {
  struct stat st;
  if (::fstat(FdOf(file), &st) != 0) return Status::FromErrno(errno, Quoted("fstat", file.path));
  return static_cast<uint64_t>(st.st_size);
}

StatusOr<uint64_t> PosixFileIo::AllocatedBytes(const FileHandle& file) {
  struct stat st;
  if (::fstat(FdOf(file), &st) != 0) return Status::FromErrno(errno, Quoted("fstat", file.path));
  return static_cast<uint64_t>(st.st_blocks) * 512;
}

StatusOr<uint64_t> PosixFileIo::NextData(const FileHandle& file, uint64_t offset) {
  const off_t d = ::lseek(FdOf(file), static_cast<off_t>(offset), SEEK_DATA);
  if (d >= 0) return static_cast<uint64_t>(d);
  if (errno == ENXIO) return FileSize(file);  // only a hole follows, or past the end
  return Status::FromErrno(errno, Quoted("lseek(SEEK_DATA)", file.path) + " offset " + std::to_string(offset));
}

StatusOr<uint64_t> PosixFileIo::NextHole(const FileHandle& file, uint64_t offset) {
  const off_t h = ::lseek(FdOf(file), static_cast<off_t>(offset), SEEK_HOLE);
  if (h >= 0) return static_cast<uint64_t>(h);
  if (errno == ENXIO) return FileSize(file);  // past the end
  return Status::FromErrno(errno, Quoted("lseek(SEEK_HOLE)", file.path) + " offset " + std::to_string(offset));
}

StatusOr<FileInfo> PosixFileIo::Stat(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::NotFound(Quoted("lstat", path) + ": no such file or directory");
    return Status::FromErrno(errno, Quoted("lstat", path));
  }
  FileInfo info;
  info.type = S_ISREG(st.st_mode)   ? FileInfo::Type::kRegular
              : S_ISDIR(st.st_mode) ? FileInfo::Type::kDirectory
              : S_ISLNK(st.st_mode) ? FileInfo::Type::kSymlink
                                    : FileInfo::Type::kOther;
  info.size = static_cast<uint64_t>(st.st_size);
  info.mode = st.st_mode & 07777;
  info.uid = st.st_uid;
  info.owned = st.st_uid == ::geteuid();
  return info;
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

namespace {

class PosixAppendFile final : public AppendFile {
 public:
  PosixAppendFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixAppendFile() override { (void)Close(); }
  Status Append(std::string_view data) override {
    size_t off = 0;
    while (off < data.size()) {
      const ssize_t n = ::write(fd_, data.data() + off, data.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::FromErrno(n < 0 ? errno : EIO, Quoted("write", path_));
      off += static_cast<size_t>(n);
    }
    return Status::OK();
  }
  Status Sync() override {
    while (::fdatasync(fd_) != 0) {
      if (errno != EINTR) return Status::FromErrno(errno, Quoted("fdatasync", path_));
    }
    return Status::OK();
  }
  Status Close() override {
    if (fd_ < 0) return Status::OK();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0 && errno != EINTR) return Status::FromErrno(errno, Quoted("close", path_));
    return Status::OK();
  }

 private:
  int fd_;
  const std::string path_;
};

}  // namespace

StatusOr<std::unique_ptr<AppendFile>> PosixFileIo::NewAppendFile(const std::string& path, const AppendOptions& opts) {
  // O_NONBLOCK so a FIFO planted at the path cannot hang the open; cleared below.
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  if (opts.exclusive) flags |= O_EXCL;
  if (opts.truncate) flags |= O_TRUNC;
  const int fd = ::open(path.c_str(), flags, opts.mode);
  if (fd < 0) {
    if (errno == ELOOP) return Status::IOError(path + " is a symbolic link; refusing to follow it");
    return Status::FromErrno(errno, Quoted("open", path));
  }
  auto file = std::make_unique<PosixAppendFile>(fd, path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return Status::InvalidArgument(path + " is not a regular file");
  }
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  if (opts.truncate || opts.exclusive) (void)::fchmod(fd, opts.mode);  // the umask must not narrow it
  return std::unique_ptr<AppendFile>(std::move(file));
}

Status PosixFileIo::Rename(const std::string& from, const std::string& to) {
  if (::rename(from.c_str(), to.c_str()) != 0) {
    return Status::FromErrno(errno, Quoted("rename", from) + " to '" + to + "'");
  }
  return Status::OK();
}

StatusOr<FileHandle> PosixFileIo::LockFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, 0600);
  if (fd < 0) {
    const int err = errno;
    std::string what = Quoted("open", path);
    if (err == ELOOP) what += " (a symlink: spillway does not follow symlinks)";
    return Status::FromErrno(err, what);
  }
  auto file = std::make_shared<PosixFile>(fd);  // closes fd on every early return
  // Truncating the file below must not reach anything but our own lock
  // file: a hard link (O_NOFOLLOW stops only symlinks) could name any file
  // of this user, and a file of another user was planted by someone else.
  struct stat st;
  SPILLWAY_RETURN_IF_ERROR(CheckRegular(fd, path, &st));
  if (st.st_nlink != 1) {
    return Status::InvalidArgument(Quoted("lock", path) + ": has " + std::to_string(st.st_nlink) +
                                   " hard links; a lock file must have exactly one (remove it: the "
                                   "engine makes a new one)");
  }
  if (st.st_uid != ::geteuid()) {
    return Status::InvalidArgument(Quoted("lock", path) + ": owned by uid " + std::to_string(st.st_uid) +
                                   ", not by this user (uid " + std::to_string(::geteuid()) +
                                   "); someone else made it: check the directory, then remove it");
  }
  SPILLWAY_RETURN_IF_ERROR(ClearNonBlock(fd, path));
  // flock, not fcntl: its lock belongs to this open file description, so a
  // second engine in the same process is refused too, and closing some other
  // fd of the file does not drop it.
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    std::string holder;
    char buf[64] = {};
    const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
    unsigned long pid = 0;
    if (n > 0 && std::sscanf(buf, "pid %lu", &pid) == 1) holder = " by pid " + std::to_string(pid);
    if (err == EWOULDBLOCK) return Status::Busy(Quoted("lock", path) + ": held" + holder);
    return Status::FromErrno(err, Quoted("flock", path));
  }
  file->locked = true;
  RegisterLocked(fd);
  const std::string text = "pid " + std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    return Status::FromErrno(errno, Quoted("write", path));
  }
  FileHandle h;
  h.object = std::move(file);  // closing it drops the lock
  h.path = path;
  return h;
}

}  // namespace spillway::io_internal

namespace spillway {

std::unique_ptr<FileIo> MakePosixFileIo(Logger* logger) { return std::make_unique<io_internal::PosixFileIo>(logger); }

}  // namespace spillway
