// MemFileIo: a FileIo that keeps files and directories in memory (leveldb's
// memenv), so tier and engine tests run without a disk and a test can stage
// states a real filesystem makes hard to reach (a full device, a symlink, a
// directory owned by someone else).
//
// It models what spillway relies on from ext4/xfs:
//   - files are sparse, in 4 KiB blocks (kIoAlign): a block is a hole, or
//     allocated but unwritten (Allocate: counts in AllocatedBytes, reads as
//     zeros, a hole to NextData/NextHole, as ext4 reports unwritten extents),
//     or written;
//   - PunchHole frees whole blocks and zeroes the partial edges (KEEP_SIZE);
//   - handles opened with try_direct are O_DIRECT: a request whose buffer,
//     offset or length is not a multiple of kIoAlign fails with EINVAL, with
//     the same hint as the real implementations;
//   - capacity_bytes (0: unlimited) bounds the blocks of all files together:
//     past it, writes and Allocate fail with ENOSPC (Status NoSpace);
//   - open/remove follow POSIX: a removed file stays readable through handles
//     open on it; symlinks are never followed; mkdir -p gives 0700, files 0600.
// Paths are absolute; "/" always exists.
//
// Thread-safety: every method may be called from any number of threads.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "spillway/file_io.h"

namespace spillway {

class MemFileIo : public FileIo {
 public:
  struct Options {
    uint64_t capacity_bytes = 0;  // 0: unlimited
    bool direct = true;           // false: refuse O_DIRECT like tmpfs before Linux 6.6
    Logger* logger = nullptr;     // null: stderr
  };
  MemFileIo() : MemFileIo(Options{}) {}
  explicit MemFileIo(Options options);
  ~MemFileIo() override;

  const char* name() const override { return "memory"; }
  StatusOr<FileHandle> Open(const std::string& path, const OpenOptions& opts) override;
  Status Close(FileHandle& file) override;
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
  // The lock is held while the returned handle's file is open (Close or the
  // last copy going away releases it).
  StatusOr<FileHandle> LockFile(const std::string& path) override;
  StatusOr<std::unique_ptr<AppendFile>> NewAppendFile(const std::string& path, const AppendOptions& opts) override;
  Logger* logger() override { return options_.logger != nullptr ? options_.logger : StderrLogger(); }

  // Test staging: a symlink at `link` (to `target`, never followed), and a
  // path that Stat reports as owned by another user.
  Status Symlink(const std::string& target, const std::string& link);
  Status SetForeignOwner(const std::string& path);
  // Blocks allocated by all files, in bytes (removed files included while open).
  uint64_t total_allocated_bytes() const;

  struct File;       // one file's blocks (mem_file_io.cc)
  struct Accounting;  // blocks in use against capacity_bytes

 private:
  struct Node {
    FileInfo::Type type = FileInfo::Type::kRegular;
    std::shared_ptr<File> file;  // regular files
    uint32_t mode = 0600;
    bool foreign = false;
  };
  // The parent directory of `path` must exist. REQUIRES: mu_ held.
  Status CheckParentLocked(const std::string& path, const char* op) const;

  const Options options_;
  std::shared_ptr<Accounting> accounting_;
  mutable std::mutex mu_;  // guards nodes_ (the namespace); file contents have their own locks
  std::map<std::string, Node> nodes_;
  std::map<std::string, std::weak_ptr<FileObject>> locks_;  // guarded by mu_
};

}  // namespace spillway
