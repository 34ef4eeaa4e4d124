// CrashFileIo: a FileIoWrapper that remembers what was made durable and acts
// out a crash: leveldb's FaultInjectionTestEnv, for spillway's write pattern
// (records written at offsets into preallocated segments, headers rewritten
// in place for erase marks, holes punched, segment files created and
// deleted).
//
// What it models:
//  - every mutating call is one step: a write request, PunchHole, Allocate,
//    Truncate, a create (Open with create), Remove, Sync, SyncDir. After
//    CrashAt(n), step n and every call after it (reads too) fail with
//    IOError "simulated crash" and change nothing: the process is gone.
//  - until a file is synced (Sync), each write, punch or truncate keeps the
//    pre-image of the bytes it changes, read from the file just before, so
//    LosePower() can put the file back as its last Sync left it: pre-images
//    restored newest first, then the size cut back to the synced size.
//  - a file created since its directory's last SyncDir vanishes at
//    LosePower(), even if its data was synced; a file removed since then comes
//    back (Remove renames it aside until SyncDir) with its synced contents.
//  - KeepPageCache() ends a crash the way SIGKILL does: every write stays.
// Syncs are not passed to the disk (durability is simulated, so runs are
// fast); directory creation counts as durable at once.
//
// Thread-safety: every method may be called concurrently (one mutex; calls
// are serialized, so I/O runs one request at a time).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "spillway/file_io.h"

namespace spillway {

class CrashFileIo : public FileIoWrapper {
 public:
  // `target` must outlive this wrapper.
  explicit CrashFileIo(FileIo* target);
  ~CrashFileIo() override;

  const char* name() const override { return "crash"; }
  StatusOr<FileHandle> Open(const std::string& path, const OpenOptions& opts) override;
  Status Close(FileHandle& file) override;
  Status SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) override;
  Status Sync(const FileHandle& file) override;
  Status PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) override;
  Status Allocate(const FileHandle& file, uint64_t offset, uint64_t len) override;
  Status Truncate(const FileHandle& file, uint64_t size) override;
  StatusOr<uint64_t> FileSize(const FileHandle& file) override;
  StatusOr<uint64_t> AllocatedBytes(const FileHandle& file) override;
  Status Remove(const std::string& path) override;
  Status CreateDir(const std::string& path) override;
  StatusOr<std::vector<std::string>> ListDir(const std::string& path) override;
  Status SyncDir(const std::string& path) override;

  // The crash happens before step `step` (counted from 0); UINT64_MAX: never.
  void CrashAt(uint64_t step);
  void CrashNow();
  bool crashed() const;
  // Steps seen so far (a run without a crash gives the range of crash points).
  uint64_t steps() const;

  // REQUIRES: crashed(), and nothing uses this wrapper any more (the engine
  // is destroyed). Puts every tracked file back as its last Sync left it, as
  // described above. Errors name the file.
  Status LosePower();
  // REQUIRES: as LosePower. Keeps every write (SIGKILL: the page cache
  // survives); files removed are removed for good.
  Status KeepPageCache();

 private:
  struct Undo {
    uint64_t offset;
    std::string bytes;
  };
  struct FileState {
    std::string path;     // where the file is now (aside name once removed)
    std::string origin;   // the name the engine gave it
    std::string dir;
    int shadow = -1;      // buffered fd: pre-images and restores (the engine's may be O_DIRECT)
    uint64_t synced_size = 0;
    bool name_durable = false;
    std::vector<Undo> undo;  // since the last Sync, oldest first
  };
  using StatePtr = std::shared_ptr<FileState>;

  // REQUIRES: mu_. False once crashed (this step is the crash or after it).
  bool Step();
  Status Crashed(const std::string& what) const;
  // REQUIRES: mu_. The state of `path`, made (durable, current size as
  // synced) when the file existed before this wrapper saw it.
  StatePtr Track(const std::string& path, bool created);
  StatePtr ForFile(const FileHandle& file) const;
  // REQUIRES: mu_. Keeps the bytes [offset, offset+len) of `s` as they are now.
  void KeepPreImage(FileState& s, uint64_t offset, uint64_t len);
  void Finish();

  mutable std::mutex mu_;  // guards everything below
  uint64_t steps_ = 0;
  uint64_t crash_at_ = UINT64_MAX;
  bool crashed_ = false;
  std::map<std::string, StatePtr> files_;   // by the engine's name, live files
  std::map<const FileObject*, StatePtr> by_file_;  // keyed by the open file object
  std::vector<StatePtr> removed_;           // renamed aside, directory not synced since
  uint64_t aside_counter_ = 0;
};

}  // namespace spillway
