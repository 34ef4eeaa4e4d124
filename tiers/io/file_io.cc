// FileIo's conveniences (Read, Write), the default SubmitAndWaitEach (no
// overlap: group by group over SubmitAndWait), and the factory that picks
// an implementation: io_uring where the kernel allows it, POSIX otherwise.
#include "spillway/file_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <mutex>
#include <string>


namespace spillway {

namespace {

Status RunOne(FileIo& io, IoRequest::Op op, const FileHandle& f, uint64_t offset, void* buf, size_t len) {
  IoRequest r;
  r.op = op;
  r.file = &f;
  r.offset = offset;
  r.buf = buf;
  r.len = len;
  Status s = io.SubmitAndWait(std::span<IoRequest>(&r, 1), 1);
  if (!s.ok()) return s;
  // SubmitAndWait ends a read at end of file without failing (see
  // file_io.h); here the caller asked for exactly `len` bytes, so a partly
  // filled buffer is an error, never a success.
  if (r.result != static_cast<ssize_t>(len)) {
    std::string what = op == IoRequest::Op::kRead ? "short read" : "short write";
    what += ": '" + f.path + "' offset " + std::to_string(offset) + " len " + std::to_string(len);
    if (op == IoRequest::Op::kRead) {
      return Status::IOError(what + ": end of file after " + std::to_string(r.result) + " bytes");
    }
    return Status::IOError(what + ": transferred " + std::to_string(r.result));
  }
  return Status::OK();
}

// io_uring is unavailable for the whole process when it is for one thread
// (kernel, seccomp, sysctl), so say so once, not once per tier.
void LogFallbackOnce(const Status& why, Logger* logger) {
  static std::once_flag once;
  std::call_once(once, [&] { logger->Log(LogLevel::kWarning, why.message() + "; using POSIX pread/pwrite"); });
}

class StderrLoggerImpl final : public Logger {
 public:
  void Log(LogLevel, std::string_view message) override {
    // One write per line, so lines from several threads never interleave.
    std::string line = "spillway: ";
    line += message;
    line += '\n';
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
};

}  // namespace

Logger* StderrLogger() {
  static StderrLoggerImpl* logger = new StderrLoggerImpl;  // never destroyed: usable from exit handlers
  return logger;
}

Status WriteFileAtomic(FileIo& io, const std::string& path, const std::string& tmp_path, std::string_view data,
                       const AppendOptions& opts) {
  AppendOptions o = opts;
  o.truncate = true;
  auto f = io.NewAppendFile(tmp_path, o);
  if (!f.ok()) return f.status();  // nothing of ours at tmp_path to remove
  Status st = (*f)->Append(data);
  Status closed = (*f)->Close();
  if (st.ok()) st = closed;
  if (st.ok()) st = io.Rename(tmp_path, path);
  if (!st.ok()) (void)io.Remove(tmp_path);
  return st;
}

Status FileIo::Read(const FileHandle& f, uint64_t offset, void* buf, size_t len) {
  return RunOne(*this, IoRequest::Op::kRead, f, offset, buf, len);
}

Status FileIo::Write(const FileHandle& f, uint64_t offset, const void* buf, size_t len) {
  // SubmitAndWait takes a mutable buffer because reads fill it; a write only
  // reads from it.
  return RunOne(*this, IoRequest::Op::kWrite, f, offset, const_cast<void*>(buf), len);
}

Status FileIo::SubmitAndWaitEach(std::span<IoRequest> requests, uint32_t queue_depth, size_t max_ahead,
                                 const std::function<void(size_t)>& done) {
  // Group by group: a group is issued only after done() returned for every
  // request of the one before, which is what max_ahead promises.
  const size_t group = max_ahead == 0 ? requests.size() : max_ahead;
  for (size_t i = 0; i < requests.size(); i += group) {
    std::span<IoRequest> part = requests.subspan(i, std::min(group, requests.size() - i));
    Status st = SubmitAndWait(part, queue_depth);
    if (!st.ok()) {
      for (IoRequest& r : requests.subspan(i + part.size())) r.result = -ECANCELED;
      return st;
    }
    for (size_t j = 0; j < part.size(); ++j) done(i + j);
  }
  return Status::OK();
}

std::unique_ptr<FileIo> MakeFileIo(IoEngine engine, Logger* logger) {
  if (engine == IoEngine::kPosix) return MakePosixFileIo(logger);
  StatusOr<std::unique_ptr<FileIo>> uring = MakeUringFileIo(logger);
  if (uring.ok()) return std::move(uring).value();
  LogFallbackOnce(uring.status(), logger != nullptr ? logger : StderrLogger());
  return MakePosixFileIo(logger);
}

}  // namespace spillway
