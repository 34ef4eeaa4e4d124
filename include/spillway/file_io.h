// FileIo: every OS call spillway makes on files goes through this interface
// (the Env of leveldb). Implementations: io_uring (uring_file_io.cc), POSIX
// pread/pwrite (posix_file_io.cc), memory (tiers/io/mem_file_io.h: tests run
// without a disk), and FaultFileIo (fault_file_io.h), a forwarding wrapper
// that injects failures for tests and `spillway stress`, over any of them.
//
// Open files are opaque: a FileHandle holds an object owned by the FileIo
// that opened it, and only that FileIo (or a wrapper forwarding to it) may be
// given the handle back.
//
// Thread-safety: all methods may be called from any number of threads at once.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spillway/config.h"
#include "spillway/status.h"

namespace spillway {

// Alignment of buffers, offsets and lengths used with O_DIRECT files.
inline constexpr size_t kIoAlign = 4096;

// The implementation's state for one open file (a POSIX fd, a memory file).
// Callers never look inside; implementations downcast their own.
class FileObject {
 public:
  virtual ~FileObject() = default;
};

// An open file. Copies share the file; Close (through any copy) closes it for
// all, and a file whose last copy goes away without Close is closed then.
struct FileHandle {
  std::shared_ptr<FileObject> object;  // null once closed
  bool direct = false;  // opened with O_DIRECT: offsets, lengths, buffers aligned to kIoAlign
  // Reads of an O_DIRECT file may use offsets and lengths aligned to this
  // (the filesystem's statx dio_offset_align, 512 on a disk of 512-byte
  // logical blocks; kIoAlign when unknown). Buffers stay kIoAlign-aligned and
  // writes kIoAlign-sized. A 4 KiB object's record, a little over 4 KiB,
  // then reads 4.5 KiB instead of 8.
  uint32_t read_align = kIoAlign;
  std::string path;
  bool is_open() const { return object != nullptr; }
};

// One read or write in a batch. `result` is set to bytes transferred; on
// failure the batch's Status says why and `result` is negative errno.
// `file` must stay valid until SubmitAndWait returns.
struct IoRequest {
  enum class Op : unsigned char { kRead, kWrite };
  Op op = Op::kRead;
  const FileHandle* file = nullptr;
  uint64_t offset = 0;
  void* buf = nullptr;
  size_t len = 0;
  ssize_t result = 0;
};

// What Stat reports about a path (lstat: a symlink is reported, not followed).
struct FileInfo {
  enum class Type : unsigned char { kRegular, kDirectory, kSymlink, kOther };
  Type type = Type::kOther;
  uint64_t size = 0;
  uint32_t mode = 0;       // permission bits (07777)
  uint32_t uid = 0;
  bool owned = false;      // owned by this process's effective user
};

// A filesystem's size and the space this process may still write (statvfs).
struct FsSpace {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;
};

// Where library code reports what no Status carries: a fallback taken,
// records skipped at open, a diagnostic file failing (leveldb's Logger).
enum class LogLevel : unsigned char { kInfo, kWarning, kError };
class Logger {
 public:
  virtual ~Logger() = default;
  // `message` has no "spillway: " prefix and no newline. Thread-safe.
  virtual void Log(LogLevel level, std::string_view message) = 0;
};
// "spillway: <message>" lines on stderr: the default everywhere.
Logger* StderrLogger();

// A file written only at its end (leveldb's WritableFile): the event log, the
// metrics dump. Not tier data: FaultFileIo does not inject faults into it.
// REQUIRES: external synchronization.
class AppendFile {
 public:
  virtual ~AppendFile() = default;  // closes, dropping any error
  // Appends all of `data` (continuing short writes) or fails naming the file.
  virtual Status Append(std::string_view data) = 0;
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
};

struct AppendOptions {
  bool truncate = false;  // start empty, with exactly `mode` whatever the umask
  // Create the file, failing (AlreadyExists-like IOError "File exists") when
  // anything is at the path: a temporary nobody else can have prepared.
  bool exclusive = false;
  uint32_t mode = 0600;   // permission bits on create
};

struct OpenOptions {
  bool create = false;     // O_CREAT (with O_EXCL when exclusive)
  bool exclusive = false;
  bool write = false;
  bool try_direct = true;  // O_DIRECT, silently falling back when refused
  // An exclusive advisory lock (flock) on the opened file, held while it
  // stays open. The lock belongs to the open file, and a write in flight
  // keeps the file open: an io_uring write submitted by a process that was
  // then killed still lands, tens of milliseconds after the process is gone
  // (measured: 64 MiB of O_DIRECT writes, none on disk when waitpid
  // returned, all of it 300 ms later). Open waits up to `lock_wait_ms` for
  // such a holder to finish, so what the caller reads next no longer
  // changes under it; Busy, naming the file, when it is still held then.
  // A second lock on the same file fails even from this process. FileIo
  // implementations without other processes (MemFileIo) ignore it.
  bool lock = false;
  uint32_t lock_wait_ms = 10000;
};

class FileIo {
 public:
  virtual ~FileIo() = default;
  virtual const char* name() const = 0;  // "io_uring", "posix", "fault(...)"

  // Opens `path` with O_NOFOLLOW|O_CLOEXEC, mode 0600 on create. NotFound when
  // the file does not exist (and !create); a symlink is refused (IOError).
  virtual StatusOr<FileHandle> Open(const std::string& path, const OpenOptions& opts) = 0;
  virtual Status Close(FileHandle& file) = 0;
  // Runs every request, keeping up to `queue_depth` in flight; short
  // transfers are continued. Returns the first failure (all requests are still
  // waited for before returning, so buffers may be freed afterwards).
  // After a failure, requests not yet started are not issued (result =
  // -ECANCELED). A read that reaches end of file ends there and is not a
  // failure: `result` is the bytes read (< len, 0 past the end), so a caller
  // may read an aligned window over an unaligned file tail. Callers must check
  // `result`; Read() does and fails on it. Error messages name the operation,
  // file path and offset.
  virtual Status SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) = 0;
  // SubmitAndWait that reports each request as it completes, so the caller
  // can work on what has arrived (verify it, copy it out) while the rest is
  // still in flight. `done(i)` runs on the calling thread once request i has
  // completed in full (a read also when it ended at end of file: check
  // `result`); never for a failed or cancelled request, and after a failure
  // not necessarily for every request that had completed. `max_ahead` (0: no
  // limit) bounds how far issuing runs ahead of the caller: request i is
  // issued only after every request before i - max_ahead + 1 has completed
  // and its done() has returned, so request i may reuse the buffer of request
  // i - max_ahead (a ring of max_ahead buffers).
  // The default runs SubmitAndWait over groups of max_ahead requests and
  // calls done() for each after its group, in order: correct for any FileIo
  // (a wrapper that overrides SubmitAndWait, such as FaultFileIo, keeps its
  // behaviour) but without overlap; io_uring overrides it. FileIoWrapper
  // does not forward it, so a wrapper's SubmitAndWait is never bypassed.
  virtual Status SubmitAndWaitEach(std::span<IoRequest> requests, uint32_t queue_depth, size_t max_ahead,
                                   const std::function<void(size_t)>& done);
  virtual Status Sync(const FileHandle& file) = 0;  // fdatasync
  // Frees [offset, offset+len) inside the file (FALLOC_FL_PUNCH_HOLE); NotSupported if the fs cannot.
  virtual Status PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) = 0;
  // Reserves disk blocks for [offset, offset+len) (fallocate mode 0: the file
  // grows to at least offset+len). O_DIRECT writes into reserved blocks skip
  // block allocation and run markedly faster on ext4/xfs (fio: ~1.7 vs ~1.1
  // GiB/s here). NotSupported where the filesystem cannot.
  virtual Status Allocate(const FileHandle& file, uint64_t offset, uint64_t len) {
    (void)file, (void)offset, (void)len;
    return Status::NotSupported("Allocate not implemented by this FileIo");
  }
  virtual Status Truncate(const FileHandle& file, uint64_t size) = 0;
  virtual StatusOr<uint64_t> FileSize(const FileHandle& file) = 0;
  // Blocks allocated on disk, in bytes (st_blocks * 512).
  virtual StatusOr<uint64_t> AllocatedBytes(const FileHandle& file) = 0;
  // Hole queries (lseek SEEK_DATA / SEEK_HOLE). Punched, never written and
  // preallocated-but-unwritten ranges count as holes where the filesystem
  // says so. NextData: the first data at or after `offset`, the file size
  // when none follows. NextHole: the first hole at or after `offset` (the end
  // of the file is one). Where the filesystem cannot tell, all is data.
  virtual StatusOr<uint64_t> NextData(const FileHandle& file, uint64_t offset) = 0;
  virtual StatusOr<uint64_t> NextHole(const FileHandle& file, uint64_t offset) = 0;
  // lstat: NotFound when nothing is at `path`.
  virtual StatusOr<FileInfo> Stat(const std::string& path) = 0;
  virtual Status Remove(const std::string& path) = 0;
  virtual Status CreateDir(const std::string& path) = 0;  // mkdir -p, 0700
  virtual StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;  // names only
  virtual Status SyncDir(const std::string& path) = 0;
  // Opens `path` for appending, creating it; never follows a symlink ("is a
  // symbolic link" in the error) and never blocks on a FIFO; InvalidArgument
  // when it is not a regular file.
  virtual StatusOr<std::unique_ptr<AppendFile>> NewAppendFile(const std::string& path,
                                                              const AppendOptions& opts) = 0;
  // The Logger for messages about this FileIo's files (and its users').
  virtual Logger* logger() { return StderrLogger(); }
  // rename(2): replaces `to` atomically (both in one directory).
  virtual Status Rename(const std::string& from, const std::string& to) {
    (void)from, (void)to;
    return Status::NotSupported("Rename not implemented by this FileIo");
  }
  // Takes an exclusive advisory lock on `path` (created 0600 when missing,
  // never through a symlink) for as long as the returned handle stays open
  // (Close releases it; so does the process ending), and writes "pid N" into
  // the file. Busy when someone else holds it, naming the pid the file
  // records. A second lock on the same file fails even from this process.
  virtual StatusOr<FileHandle> LockFile(const std::string& path) {
    (void)path;
    return Status::NotSupported("LockFile not implemented by this FileIo");
  }
  // Size and free space of the filesystem holding `path` (a file tier's
  // min_free). NotSupported where the FileIo cannot tell.
  virtual StatusOr<FsSpace> SpaceOf(const std::string& path) {
    (void)path;
    return Status::NotSupported("SpaceOf not implemented by this FileIo");
  }

  // Convenience over SubmitAndWait for one request; fails on a short transfer.
  Status Read(const FileHandle& f, uint64_t offset, void* buf, size_t len);
  Status Write(const FileHandle& f, uint64_t offset, const void* buf, size_t len);
};

// io_uring when the kernel allows it (else POSIX, logged once to stderr), or
// as `engine` asks. kUring when io_uring is unavailable also falls back to
// POSIX (logged): use MakeUringFileIo to treat that as an error. Never null.
// `logger` (null: stderr) gets the fallback notice and becomes the FileIo's logger().
std::unique_ptr<FileIo> MakeFileIo(IoEngine engine = IoEngine::kAuto, Logger* logger = nullptr);
std::unique_ptr<FileIo> MakePosixFileIo(Logger* logger = nullptr);
// Null with a reason when io_uring is unavailable (kernel, seccomp, rlimit).
StatusOr<std::unique_ptr<FileIo>> MakeUringFileIo(Logger* logger = nullptr);

// Replaces `path` with `data` atomically: written to `tmp_path` (same
// directory), then renamed over `path`; `tmp_path` is removed on failure.
// Not synced: for diagnostic files a reader polls, not for data.
Status WriteFileAtomic(FileIo& io, const std::string& path, const std::string& tmp_path, std::string_view data,
                       const AppendOptions& opts);

// Forwards every call to a target; override one call to change it (tests).
class FileIoWrapper : public FileIo {
 public:
  explicit FileIoWrapper(FileIo* target) : target_(target) {}
  const char* name() const override { return target_->name(); }
  StatusOr<FileHandle> Open(const std::string& p, const OpenOptions& o) override { return target_->Open(p, o); }
  Status Close(FileHandle& f) override { return target_->Close(f); }
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override { return target_->SubmitAndWait(r, qd); }
  Status Sync(const FileHandle& f) override { return target_->Sync(f); }
  Status PunchHole(const FileHandle& f, uint64_t o, uint64_t l) override { return target_->PunchHole(f, o, l); }
  Status Allocate(const FileHandle& f, uint64_t o, uint64_t l) override { return target_->Allocate(f, o, l); }
  Status Truncate(const FileHandle& f, uint64_t s) override { return target_->Truncate(f, s); }
  StatusOr<uint64_t> FileSize(const FileHandle& f) override { return target_->FileSize(f); }
  StatusOr<uint64_t> AllocatedBytes(const FileHandle& f) override { return target_->AllocatedBytes(f); }
  StatusOr<uint64_t> NextData(const FileHandle& f, uint64_t o) override { return target_->NextData(f, o); }
  StatusOr<uint64_t> NextHole(const FileHandle& f, uint64_t o) override { return target_->NextHole(f, o); }
  StatusOr<FileInfo> Stat(const std::string& p) override { return target_->Stat(p); }
  Status Remove(const std::string& p) override { return target_->Remove(p); }
  Status CreateDir(const std::string& p) override { return target_->CreateDir(p); }
  StatusOr<std::vector<std::string>> ListDir(const std::string& p) override { return target_->ListDir(p); }
  Status SyncDir(const std::string& p) override { return target_->SyncDir(p); }
  Status Rename(const std::string& f, const std::string& t) override { return target_->Rename(f, t); }
  StatusOr<FileHandle> LockFile(const std::string& p) override { return target_->LockFile(p); }
  StatusOr<FsSpace> SpaceOf(const std::string& p) override { return target_->SpaceOf(p); }
  StatusOr<std::unique_ptr<AppendFile>> NewAppendFile(const std::string& p, const AppendOptions& o) override {
    return target_->NewAppendFile(p, o);
  }
  Logger* logger() override { return target_->logger(); }

 protected:
  FileIo* target() const { return target_; }

 private:
  FileIo* target_;
};

}  // namespace spillway
