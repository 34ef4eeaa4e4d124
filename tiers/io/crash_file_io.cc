// CrashFileIo: step counting, pre-images of unsynced changes, and putting
// files back at a simulated power loss. See crash_file_io.h.
#include "tiers/io/crash_file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spillway {
namespace {

constexpr const char* kAsideSuffix = ".crashio-removed";

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

uint64_t SizeOf(int fd) {
  struct stat st;
  return ::fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

Status PwriteAll(int fd, const std::string& bytes, uint64_t offset, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::FromErrno(errno, "crash io: restoring " + path);
    done += static_cast<size_t>(n);
  }
  return Status::OK();
}

}  // namespace

CrashFileIo::CrashFileIo(FileIo* target) : FileIoWrapper(target) {}

CrashFileIo::~CrashFileIo() {
  std::lock_guard<std::mutex> l(mu_);
  Finish();
}

void CrashFileIo::CrashAt(uint64_t step) {
  std::lock_guard<std::mutex> l(mu_);
  crash_at_ = step;
  if (steps_ >= crash_at_) crashed_ = true;
}

void CrashFileIo::CrashNow() {
  std::lock_guard<std::mutex> l(mu_);
  crashed_ = true;
}

bool CrashFileIo::crashed() const {
  std::lock_guard<std::mutex> l(mu_);
  return crashed_;
}

uint64_t CrashFileIo::steps() const {
  std::lock_guard<std::mutex> l(mu_);
  return steps_;
}

bool CrashFileIo::Step() {
  if (crashed_) return false;
  if (steps_ >= crash_at_) {
    crashed_ = true;
    return false;
  }
  ++steps_;
  return true;
}

Status CrashFileIo::Crashed(const std::string& what) const {
  return Status::IOError(what + ": simulated crash (the process is gone)");
}

CrashFileIo::StatePtr CrashFileIo::Track(const std::string& path, bool created) {
  auto it = files_.find(path);
  if (it != files_.end() && !created) return it->second;
  auto s = std::make_shared<FileState>();
  s->path = s->origin = path;
  s->dir = DirOf(path);
  s->shadow = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (s->shadow < 0) return nullptr;  // not ours to restore (read-only): left untracked
  s->name_durable = !created;
  s->synced_size = created ? 0 : SizeOf(s->shadow);
  if (it != files_.end() && it->second->shadow >= 0) ::close(it->second->shadow);
  files_[path] = s;
  return s;
}

CrashFileIo::StatePtr CrashFileIo::ForFile(const FileHandle& file) const {
  auto it = by_file_.find(file.object.get());
  return it == by_file_.end() ? nullptr : it->second;
}

void CrashFileIo::KeepPreImage(FileState& s, uint64_t offset, uint64_t len) {
  const uint64_t size = SizeOf(s.shadow);
  if (offset >= size || len == 0) return;  // beyond the end: the final cut to synced_size undoes it
  Undo u;
  u.offset = offset;
  u.bytes.resize(static_cast<size_t>(std::min(len, size - offset)));
  size_t done = 0;
  while (done < u.bytes.size()) {
    const ssize_t n = ::pread(s.shadow, u.bytes.data() + done, u.bytes.size() - done,
                              static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  u.bytes.resize(done);
  s.undo.push_back(std::move(u));
}

StatusOr<FileHandle> CrashFileIo::Open(const std::string& path, const OpenOptions& opts) {
  std::lock_guard<std::mutex> l(mu_);
  if (crashed_) return Crashed("open " + path);
  bool existed = true;
  if (opts.create) {
    if (!Step()) return Crashed("create " + path);
    struct stat st;
    existed = ::lstat(path.c_str(), &st) == 0;
  }
  auto f = target()->Open(path, opts);
  if (!f.ok()) return f;
  if (StatePtr s = Track(path, !existed)) by_file_[f->object.get()] = std::move(s);
  return f;
}

Status CrashFileIo::Close(FileHandle& file) {
  {
    std::lock_guard<std::mutex> l(mu_);
    by_file_.erase(file.object.get());
  }
  return target()->Close(file);  // closing changes nothing on disk: allowed after the crash
}

Status CrashFileIo::SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) {
  (void)queue_depth;
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < requests.size(); ++i) {
    IoRequest& r = requests[i];
    const bool write = r.op == IoRequest::Op::kWrite;
    if (crashed_ || (write && !Step())) {
      for (size_t j = i; j < requests.size(); ++j) requests[j].result = j == i ? -EIO : -ECANCELED;
      return Crashed(write ? "write" : "read");
    }
    if (write) {
      if (StatePtr s = ForFile(*r.file)) KeepPreImage(*s, r.offset, r.len);
    }
    Status st = target()->SubmitAndWait(std::span<IoRequest>(&r, 1), 1);
    if (!st.ok()) {
      for (size_t j = i + 1; j < requests.size(); ++j) requests[j].result = -ECANCELED;
      return st;
    }
  }
  return Status::OK();
}

Status CrashFileIo::Sync(const FileHandle& file) {
  std::lock_guard<std::mutex> l(mu_);
  if (!Step()) return Crashed("fdatasync " + file.path);
  if (StatePtr s = ForFile(file)) {
    s->undo.clear();
    s->synced_size = SizeOf(s->shadow);
  }
  return Status::OK();
}

Status CrashFileIo::PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) {
  std::lock_guard<std::mutex> l(mu_);
  if (!Step()) return Crashed("punch hole " + file.path);
  if (StatePtr s = ForFile(file)) KeepPreImage(*s, offset, len);
  return target()->PunchHole(file, offset, len);
}

Status CrashFileIo::Allocate(const FileHandle& file, uint64_t offset, uint64_t len) {
  std::lock_guard<std::mutex> l(mu_);
  if (!Step()) return Crashed("fallocate " + file.path);
  return target()->Allocate(file, offset, len);  // contents unchanged; the size is cut back at a power loss
}

Status CrashFileIo::Truncate(const FileHandle& file, uint64_t size) {
  std::lock_guard<std::mutex> l(mu_);
  if (!Step()) return Crashed("truncate " + file.path);
  if (StatePtr s = ForFile(file)) {
    const uint64_t cur = SizeOf(s->shadow);
    if (size < cur) KeepPreImage(*s, size, cur - size);
  }
  return target()->Truncate(file, size);
}

StatusOr<uint64_t> CrashFileIo::FileSize(const FileHandle& file) {
  std::lock_guard<std::mutex> l(mu_);
  if (crashed_) return Crashed("stat " + file.path);
  return target()->FileSize(file);
}

StatusOr<uint64_t> CrashFileIo::AllocatedBytes(const FileHandle& file) {
  std::lock_guard<std::mutex> l(mu_);
  if (crashed_) return Crashed("stat " + file.path);
  return target()->AllocatedBytes(file);
}

Status CrashFileIo::Remove(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (!Step()) return Crashed("unlink " + path);
  StatePtr s = Track(path, false);
  if (!s || !s->name_durable) {
    // Created since the directory was synced: it would vanish anyway.
    if (s) {
      ::close(s->shadow);
      files_.erase(path);
    }
    return target()->Remove(path);
  }
  const std::string aside = path + "." + std::to_string(aside_counter_++) + kAsideSuffix;
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound("unlink '" + path + "': no such file");
    return Status::FromErrno(err, "unlink '" + path + "'");
  }
  s->path = aside;
  files_.erase(path);
  removed_.push_back(std::move(s));
  return Status::OK();
}

Status CrashFileIo::CreateDir(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (crashed_) return Crashed("mkdir " + path);
  return target()->CreateDir(path);
}

StatusOr<std::vector<std::string>> CrashFileIo::ListDir(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (crashed_) return Crashed("opendir " + path);
  auto names = target()->ListDir(path);
  if (!names.ok()) return names;
  std::vector<std::string> out;
  for (std::string& n : *names) {
    if (!EndsWith(n, kAsideSuffix)) out.push_back(std::move(n));
  }
  return out;
}

Status CrashFileIo::SyncDir(const std::string& path) {
  std::lock_guard<std::mutex> l(mu_);
  if (!Step()) return Crashed("fsync dir " + path);
  for (auto& [name, s] : files_) {
    if (s->dir == path) s->name_durable = true;
  }
  for (size_t i = 0; i < removed_.size();) {
    if (removed_[i]->dir != path) {
      ++i;
      continue;
    }
    ::unlink(removed_[i]->path.c_str());
    ::close(removed_[i]->shadow);
    removed_.erase(removed_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return Status::OK();
}

Status CrashFileIo::LosePower() {
  std::lock_guard<std::mutex> l(mu_);
  crashed_ = true;
  Status first;
  auto note = [&](Status st) {
    if (!st.ok() && first.ok()) first = std::move(st);
  };
  auto restore = [&](FileState& s) {
    for (auto it = s.undo.rbegin(); it != s.undo.rend(); ++it) note(PwriteAll(s.shadow, it->bytes, it->offset, s.path));
    if (::ftruncate(s.shadow, static_cast<off_t>(s.synced_size)) != 0) {
      note(Status::FromErrno(errno, "crash io: truncating " + s.path));
    }
  };
  for (auto& [name, s] : files_) {
    if (!s->name_durable) {
      ::unlink(s->path.c_str());  // its directory entry never reached the disk
      continue;
    }
    restore(*s);
  }
  for (StatePtr& s : removed_) {
    if (::rename(s->path.c_str(), s->origin.c_str()) != 0) {
      note(Status::FromErrno(errno, "crash io: bringing back " + s->origin));
      continue;
    }
    s->path = s->origin;
    restore(*s);
  }
  Finish();
  return first;
}

Status CrashFileIo::KeepPageCache() {
  std::lock_guard<std::mutex> l(mu_);
  crashed_ = true;
  for (StatePtr& s : removed_) ::unlink(s->path.c_str());
  Finish();
  return Status::OK();
}

void CrashFileIo::Finish() {
  for (auto& [name, s] : files_) {
    if (s->shadow >= 0) ::close(s->shadow);
  }
  for (StatePtr& s : removed_) {
    if (s->shadow >= 0) ::close(s->shadow);
  }
  files_.clear();
  removed_.clear();
  by_file_.clear();
}

}  // namespace spillway
