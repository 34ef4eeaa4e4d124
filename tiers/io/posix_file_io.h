// PosixFileIo: the FileIo built from plain syscalls (open, pread/pwrite,
// fdatasync, fallocate, ...), and the helpers every implementation shares to
// word its errors. Internal to tiers/io: the rest of spillway sees only
// file_io.h. UringFileIo derives from PosixFileIo and replaces SubmitAndWait;
// every other operation is one syscall either way.
#pragma once

#include <string>
#include <string_view>

#include "spillway/file_io.h"

namespace spillway::io_internal {

// The fd of a handle PosixFileIo (or UringFileIo) opened; -1 for a closed
// handle or one another FileIo opened, so the syscall fails with EBADF.
int FdOf(const FileHandle& file);

// "pwrite '/x/seg-1' offset 4096 len 1048576". `op` names the syscall.
std::string DescribeRequest(std::string_view op, const IoRequest& r);

// Status for a request that failed with `err`: IOError, or NoSpace for
// ENOSPC/EDQUOT/EFBIG. Adds a hint when EINVAL is likely an O_DIRECT
// alignment mistake.
Status RequestError(const IoRequest& r, int err);

// Runs one request to completion with pread/pwrite: continues short
// transfers, retries EINTR/EAGAIN, stops a read at end of file. Sets
// r.result; returns the failure.
Status TransferBlocking(IoRequest& r);

class PosixFileIo : public FileIo {
 public:
  explicit PosixFileIo(Logger* logger = nullptr) : logger_(logger != nullptr ? logger : StderrLogger()) {}
  const char* name() const override { return "posix"; }
  Logger* logger() override { return logger_; }
  StatusOr<FileHandle> Open(const std::string& path, const OpenOptions& opts) override;
  Status Close(FileHandle& file) override;
  // Synchronous: runs requests one after another; `queue_depth` is ignored.
  Status SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) override;
  Status Sync(const FileHandle& file) override;
  Status PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) override;
  Status Allocate(const FileHandle& file, uint64_t offset, uint64_t len) override;
  Status Truncate(const FileHandle& file, uint64_t size) override;
  StatusOr<uint64_t> FileSize(const FileHandle& file) override;
  StatusOr<uint64_t> AllocatedBytes(const FileHandle& file) override;
  StatusOr<uint64_t> NextData(const FileHandle& file, uint64_t offset) override;
  StatusOr<uint64_t> NextHole(const FileHandle& file, uint64_t offset) override;
  StatusOr<FileInfo> Stat(const std::string& path) override;
  Status Remove(const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  Status SyncDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  StatusOr<FileHandle> LockFile(const std::string& path) override;
  StatusOr<FsSpace> SpaceOf(const std::string& path) override;
  StatusOr<std::unique_ptr<AppendFile>> NewAppendFile(const std::string& path, const AppendOptions& opts) override;

 private:
  Logger* const logger_;
};

}  // namespace spillway::io_internal
