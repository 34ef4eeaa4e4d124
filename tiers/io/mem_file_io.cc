// MemFileIo: sparse in-memory files in kIoAlign blocks, a path map for the
// namespace, and the error wording of the POSIX implementation, so tests
// written against one read the same against the other.
#include "tiers/io/mem_file_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tiers/io/posix_file_io.h"

namespace spillway {

using io_internal::DescribeRequest;
using io_internal::RequestError;

namespace {

constexpr uint64_t kBlock = kIoAlign;

std::string Quoted(std::string_view op, const std::string& path) {
  return std::string(op) + " '" + path + "'";
}

// "/a//b/" -> "/a/b"; empty for a relative path.
std::string Normalize(const std::string& path) {
  if (path.empty() || path[0] != '/') return "";
  std::string out;
  for (char c : path) {
    if (c == '/' && !out.empty() && out.back() == '/') continue;
    out += c;
  }
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

struct MemFileIo::Accounting {
  explicit Accounting(uint64_t cap) : capacity(cap) {}
  const uint64_t capacity;
  std::atomic<uint64_t> used{0};
  bool TryAdd(uint64_t bytes) {
    uint64_t cur = used.load(std::memory_order_relaxed);
    do {
      if (capacity != 0 && cur + bytes > capacity) return false;
    } while (!used.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
    return true;
  }
  void Sub(uint64_t bytes) { used.fetch_sub(bytes, std::memory_order_relaxed); }
};

struct MemFileIo::File {
  explicit File(std::shared_ptr<Accounting> a) : acct(std::move(a)) {}
  ~File() { acct->Sub(blocks.size() * kBlock); }

  // Blocks in [first, last] not yet allocated. REQUIRES: mu held.
  uint64_t MissingBlocks(uint64_t first, uint64_t last) const {
    uint64_t present = 0;
    for (auto it = blocks.lower_bound(first); it != blocks.end() && it->first <= last; ++it) ++present;
    return last - first + 1 - present;
  }
  // Zeroes [from, to) inside block `b` when it holds data. REQUIRES: mu held.
  void ZeroInBlock(uint64_t b, uint64_t from, uint64_t to) {
    auto it = blocks.find(b);
    if (it != blocks.end() && it->second && to > from) std::memset(it->second.get() + from, 0, to - from);
  }
  // Drops blocks [first, end). REQUIRES: mu held.
  void DropBlocks(uint64_t first, uint64_t end) {
    auto it = blocks.lower_bound(first);
    uint64_t n = 0;
    while (it != blocks.end() && it->first < end) it = blocks.erase(it), ++n;
    acct->Sub(n * kBlock);
  }

  std::shared_ptr<Accounting> acct;
  std::mutex mu;  // guards size and blocks
  uint64_t size = 0;
  // Allocated blocks by index; null: allocated but unwritten (reads as zeros).
  std::map<uint64_t, std::unique_ptr<std::byte[]>> blocks;
};

namespace {

struct MemHandle final : FileObject {
  MemHandle(std::shared_ptr<MemFileIo::File> f, bool w) : file(std::move(f)), writable(w) {}
  std::shared_ptr<MemFileIo::File> file;  // null once closed
  bool writable;
};

MemFileIo::File* FileOf(const FileHandle& h) {
  auto* m = dynamic_cast<MemHandle*>(h.object.get());
  return m != nullptr ? m->file.get() : nullptr;
}

Status BadHandle(std::string_view op, const FileHandle& h) {
  return Status::FromErrno(EBADF, Quoted(op, h.path));
}

}  // namespace

MemFileIo::MemFileIo(Options options)
    : options_(options), accounting_(std::make_shared<Accounting>(options.capacity_bytes)) {
  Node root;
  root.type = FileInfo::Type::kDirectory;
  root.mode = 0700;
  nodes_.emplace("/", std::move(root));
}

MemFileIo::~MemFileIo() = default;

uint64_t MemFileIo::total_allocated_bytes() const { return accounting_->used.load(std::memory_order_relaxed); }

Status MemFileIo::CheckParentLocked(const std::string& path, const char* op) const {
  auto it = nodes_.find(Parent(path));
  if (it == nodes_.end()) return Status::NotFound(Quoted(op, path) + ": no such file or directory");
  if (it->second.type != FileInfo::Type::kDirectory) return Status::FromErrno(ENOTDIR, Quoted(op, path));
  return Status::OK();
}

StatusOr<FileHandle> MemFileIo::Open(const std::string& raw, const OpenOptions& opts) {
  const std::string path = Normalize(raw);
  if (path.empty()) return Status::InvalidArgument(Quoted("open", raw) + ": not an absolute path");
  std::shared_ptr<File> file;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = nodes_.find(path);
    if (it != nodes_.end()) {
      const Node& n = it->second;
      if (n.type == FileInfo::Type::kSymlink) {
        return Status::FromErrno(ELOOP, Quoted("open", raw) + " (a symlink: spillway does not follow symlinks)");
      }
      if (n.type == FileInfo::Type::kDirectory) return Status::FromErrno(EISDIR, Quoted("open", raw));
      if (opts.create && opts.exclusive) return Status::FromErrno(EEXIST, Quoted("open", raw));
      file = n.file;
    } else {
      if (!opts.create) return Status::NotFound(Quoted("open", raw) + ": no such file");
      SPILLWAY_RETURN_IF_ERROR(CheckParentLocked(path, "open"));
      Node n;
      n.file = file = std::make_shared<File>(accounting_);
      nodes_.emplace(path, std::move(n));
    }
  }
  FileHandle h;
  h.object = std::make_shared<MemHandle>(std::move(file), opts.write);
  h.direct = opts.try_direct && options_.direct;
  h.path = raw;
  return h;
}

Status MemFileIo::Close(FileHandle& file) {
  std::shared_ptr<FileObject> obj = std::move(file.object);
  if (auto* m = dynamic_cast<MemHandle*>(obj.get())) m->file.reset();  // closed for every copy
  return Status::OK();
}

Status MemFileIo::SubmitAndWait(std::span<IoRequest> requests, uint32_t /*queue_depth*/) {
  Status first;
  for (IoRequest& r : requests) {
    if (!first.ok()) {
      r.result = -ECANCELED;
      continue;
    }
    auto* m = r.file != nullptr ? dynamic_cast<MemHandle*>(r.file->object.get()) : nullptr;
    const bool write = r.op == IoRequest::Op::kWrite;
    int err = 0;
    if (m == nullptr || !m->file || (write && !m->writable)) {
      err = EBADF;
    } else if (r.len > 0 && r.file->direct &&
               (reinterpret_cast<uintptr_t>(r.buf) % kIoAlign != 0 || r.offset % kIoAlign != 0 ||
                r.len % kIoAlign != 0)) {
      err = EINVAL;  // what the kernel answers a misaligned O_DIRECT request
    }
    if (err != 0 || r.len == 0) {
      r.result = -err;
      if (err != 0) first = RequestError(r, err);
      continue;
    }
    File& f = *m->file;
    auto* p = static_cast<std::byte*>(r.buf);
    std::lock_guard<std::mutex> l(f.mu);
    if (!write) {
      const uint64_t n = r.offset >= f.size ? 0 : std::min<uint64_t>(r.len, f.size - r.offset);
      for (uint64_t done = 0; done < n;) {
        const uint64_t pos = r.offset + done, b = pos / kBlock, in = pos % kBlock;
        const uint64_t k = std::min(n - done, kBlock - in);
        auto it = f.blocks.find(b);
        if (it != f.blocks.end() && it->second) {
          std::memcpy(p + done, it->second.get() + in, k);
        } else {
          std::memset(p + done, 0, k);
        }
        done += k;
      }
      r.result = static_cast<ssize_t>(n);
      continue;
    }
    const uint64_t b0 = r.offset / kBlock, b1 = (r.offset + r.len - 1) / kBlock;
    if (!f.acct->TryAdd(f.MissingBlocks(b0, b1) * kBlock)) {
      r.result = -ENOSPC;
      first = RequestError(r, ENOSPC);
      continue;
    }
    for (uint64_t done = 0; done < r.len;) {
      const uint64_t pos = r.offset + done, b = pos / kBlock, in = pos % kBlock;
      const uint64_t k = std::min<uint64_t>(r.len - done, kBlock - in);
      std::unique_ptr<std::byte[]>& blk = f.blocks[b];
      if (!blk) blk.reset(new std::byte[kBlock]());
      std::memcpy(blk.get() + in, p + done, k);
      done += k;
    }
    f.size = std::max<uint64_t>(f.size, r.offset + r.len);
    r.result = static_cast<ssize_t>(r.len);
  }
  return first;
}

Status MemFileIo::Sync(const FileHandle& file) {
  return FileOf(file) != nullptr ? Status::OK() : BadHandle("fdatasync", file);
}

Status MemFileIo::PunchHole(const FileHandle& file, uint64_t offset, uint64_t len) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("punch hole", file);
  if (len == 0) return Status::FromErrno(EINVAL, Quoted("punch hole", file.path));
  std::lock_guard<std::mutex> l(f->mu);
  const uint64_t end = offset + len;
  const uint64_t first_whole = (offset + kBlock - 1) / kBlock, end_whole = end / kBlock;
  if (first_whole > end_whole) {  // inside one block
    f->ZeroInBlock(offset / kBlock, offset % kBlock, end % kBlock == 0 ? kBlock : end % kBlock);
    return Status::OK();
  }
  if (offset % kBlock != 0) f->ZeroInBlock(offset / kBlock, offset % kBlock, kBlock);
  if (end % kBlock != 0) f->ZeroInBlock(end / kBlock, 0, end % kBlock);
  f->DropBlocks(first_whole, end_whole);
  return Status::OK();
}

Status MemFileIo::Allocate(const FileHandle& file, uint64_t offset, uint64_t len) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("fallocate", file);
  if (len == 0) return Status::FromErrno(EINVAL, Quoted("fallocate", file.path));
  std::lock_guard<std::mutex> l(f->mu);
  const uint64_t b0 = offset / kBlock, b1 = (offset + len - 1) / kBlock;
  if (!f->acct->TryAdd(f->MissingBlocks(b0, b1) * kBlock)) {
    return Status::FromErrno(ENOSPC, Quoted("fallocate", file.path) + " offset " + std::to_string(offset) +
                                         " len " + std::to_string(len));
  }
  for (uint64_t b = b0; b <= b1; ++b) f->blocks.try_emplace(b);
  f->size = std::max(f->size, offset + len);
  return Status::OK();
}

Status MemFileIo::Truncate(const FileHandle& file, uint64_t size) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("ftruncate", file);
  std::lock_guard<std::mutex> l(f->mu);
  if (size % kBlock != 0) f->ZeroInBlock(size / kBlock, size % kBlock, kBlock);
  f->DropBlocks((size + kBlock - 1) / kBlock, UINT64_MAX);
  f->size = size;
  return Status::OK();
}

StatusOr<uint64_t> MemFileIo::FileSize(const FileHandle& file) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("fstat", file);
  std::lock_guard<std::mutex> l(f->mu);
  return f->size;
}

StatusOr<uint64_t> MemFileIo::AllocatedBytes(const FileHandle& file) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("fstat", file);
  std::lock_guard<std::mutex> l(f->mu);
  return static_cast<uint64_t>(f->blocks.size()) * kBlock;
}

StatusOr<uint64_t> MemFileIo::NextData(const FileHandle& file, uint64_t offset) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("lseek(SEEK_DATA)", file);
  std::lock_guard<std::mutex> l(f->mu);
  if (offset >= f->size) return f->size;
  for (auto it = f->blocks.lower_bound(offset / kBlock); it != f->blocks.end(); ++it) {
    if (it->second) return std::min(f->size, std::max(offset, it->first * kBlock));
  }
  return f->size;
}

StatusOr<uint64_t> MemFileIo::NextHole(const FileHandle& file, uint64_t offset) {
  File* f = FileOf(file);
  if (f == nullptr) return BadHandle("lseek(SEEK_HOLE)", file);
  std::lock_guard<std::mutex> l(f->mu);
  if (offset >= f->size) return f->size;
  uint64_t b = offset / kBlock;
  for (auto it = f->blocks.lower_bound(b); it != f->blocks.end() && it->first == b && it->second; ++it) ++b;
  return std::min(f->size, std::max(offset, b * kBlock));
}

StatusOr<FileInfo> MemFileIo::Stat(const std::string& raw) {
  const std::string path = Normalize(raw);
  std::shared_ptr<File> file;
  FileInfo info;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = nodes_.find(path);
    if (it == nodes_.end()) return Status::NotFound(Quoted("lstat", raw) + ": no such file or directory");
    info.type = it->second.type;
    info.mode = it->second.mode;
    info.owned = !it->second.foreign;
    info.uid = it->second.foreign ? 65534 : static_cast<uint32_t>(::geteuid());
    file = it->second.file;
  }
  if (file) {
    std::lock_guard<std::mutex> l(file->mu);
    info.size = file->size;
  }
  return info;
}

Status MemFileIo::Remove(const std::string& raw) {
  const std::string path = Normalize(raw);
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(path);
  if (it == nodes_.end()) return Status::NotFound(Quoted("unlink", raw) + ": no such file");
  if (it->second.type == FileInfo::Type::kDirectory) return Status::FromErrno(EISDIR, Quoted("unlink", raw));
  nodes_.erase(it);  // handles still open keep the File
  return Status::OK();
}

StatusOr<FileHandle> MemFileIo::LockFile(const std::string& raw) {
  OpenOptions opts;
  opts.create = true;
  opts.write = true;
  opts.try_direct = false;
  auto f = Open(raw, opts);
  if (!f.ok()) return f.status();
  const std::string path = Normalize(raw);
  std::lock_guard<std::mutex> l(mu_);
  std::weak_ptr<FileObject>& holder = locks_[path];
  if (!holder.expired()) {
    return Status::Busy(Quoted("lock", raw) + ": held by pid " + std::to_string(::getpid()));
  }
  holder = f->object;
  return f;
}

Status MemFileIo::CreateDir(const std::string& raw) {
  if (raw.empty()) return Status::InvalidArgument("mkdir: empty path");
  const std::string path = Normalize(raw);
  if (path.empty()) return Status::InvalidArgument(Quoted("mkdir", raw) + ": not an absolute path");
  std::lock_guard<std::mutex> l(mu_);
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string prefix = path.substr(0, pos);
    auto it = nodes_.find(prefix);
    if (it == nodes_.end()) {
      Node n;
      n.type = FileInfo::Type::kDirectory;
      n.mode = 0700;
      nodes_.emplace(prefix, std::move(n));
    } else if (it->second.type != FileInfo::Type::kDirectory) {
      return Status::IOError(Quoted("mkdir", prefix) + ": exists and is not a directory");
    }
    if (pos == std::string::npos) break;
  }
  return Status::OK();
}

StatusOr<std::vector<std::string>> MemFileIo::ListDir(const std::string& raw) {
  const std::string path = Normalize(raw);
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(path);
  if (it == nodes_.end()) return Status::NotFound(Quoted("opendir", raw) + ": no such directory");
  if (it->second.type != FileInfo::Type::kDirectory) return Status::FromErrno(ENOTDIR, Quoted("opendir", raw));
  const std::string prefix = path == "/" ? "/" : path + "/";
  std::vector<std::string> names;
  for (auto c = nodes_.lower_bound(prefix); c != nodes_.end() && c->first.compare(0, prefix.size(), prefix) == 0;
       ++c) {
    std::string rest = c->first.substr(prefix.size());
    if (!rest.empty() && rest.find('/') == std::string::npos) names.push_back(std::move(rest));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Status MemFileIo::SyncDir(const std::string& raw) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(Normalize(raw));
  if (it == nodes_.end()) return Status::FromErrno(ENOENT, Quoted("open dir", raw));
  if (it->second.type != FileInfo::Type::kDirectory) return Status::FromErrno(ENOTDIR, Quoted("open dir", raw));
  return Status::OK();
}

namespace {

class MemAppendFile final : public AppendFile {
 public:
  MemAppendFile(FileHandle h, MemFileIo* io) : h_(std::move(h)), io_(io) {}
  // The end is read, then written: AppendFile's callers synchronize, so it
  // stays the end in between.
  Status Append(std::string_view data) override {
    if (!h_.is_open()) return Status::FromErrno(EBADF, Quoted("write", h_.path));
    if (data.empty()) return Status::OK();
    auto end = io_->FileSize(h_);
    if (!end.ok()) return end.status();
    return io_->Write(h_, *end, data.data(), data.size());
  }
  Status Sync() override { return Status::OK(); }
  Status Close() override { return io_->Close(h_); }

 private:
  FileHandle h_;
  MemFileIo* io_;
};

}  // namespace

StatusOr<std::unique_ptr<AppendFile>> MemFileIo::NewAppendFile(const std::string& raw, const AppendOptions& opts) {
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = nodes_.find(Normalize(raw));
    if (it != nodes_.end() && it->second.type == FileInfo::Type::kSymlink) {
      return Status::IOError(raw + " is a symbolic link; refusing to follow it");
    }
    if (it != nodes_.end() && it->second.type != FileInfo::Type::kRegular) {
      return Status::InvalidArgument(raw + " is not a regular file");
    }
  }
  OpenOptions o;
  o.create = o.write = true;
  o.exclusive = opts.exclusive;
  o.try_direct = false;
  auto h = Open(raw, o);
  if (!h.ok()) return h.status();
  if (opts.truncate || opts.exclusive) {
    SPILLWAY_RETURN_IF_ERROR(Truncate(*h, 0));
    std::lock_guard<std::mutex> l(mu_);
    if (auto it = nodes_.find(Normalize(raw)); it != nodes_.end()) it->second.mode = opts.mode & 07777;
  }
  return std::unique_ptr<AppendFile>(std::make_unique<MemAppendFile>(std::move(*h), this));
}

Status MemFileIo::Rename(const std::string& raw_from, const std::string& raw_to) {
  const std::string from = Normalize(raw_from), to = Normalize(raw_to);
  const std::string what = "rename '" + raw_from + "' to '" + raw_to + "'";
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(from);
  if (it == nodes_.end()) return Status::FromErrno(ENOENT, what);
  if (it->second.type == FileInfo::Type::kDirectory) return Status::NotSupported(what + ": directories stay put");
  if (Status p = CheckParentLocked(to, "rename"); !p.ok()) return Status::FromErrno(ENOENT, what);
  if (auto dst = nodes_.find(to); dst != nodes_.end()) {
    if (dst->second.type == FileInfo::Type::kDirectory) return Status::FromErrno(EISDIR, what);
    nodes_.erase(dst);
  }
  Node n = std::move(it->second);
  nodes_.erase(it);
  nodes_.emplace(to, std::move(n));
  return Status::OK();
}

Status MemFileIo::Symlink(const std::string& target, const std::string& raw) {
  (void)target;  // never followed, so only its existence as a link matters
  const std::string path = Normalize(raw);
  if (path.empty()) return Status::InvalidArgument(Quoted("symlink", raw) + ": not an absolute path");
  std::lock_guard<std::mutex> l(mu_);
  SPILLWAY_RETURN_IF_ERROR(CheckParentLocked(path, "symlink"));
  Node n;
  n.type = FileInfo::Type::kSymlink;
  n.mode = 0777;
  if (!nodes_.emplace(path, std::move(n)).second) return Status::FromErrno(EEXIST, Quoted("symlink", raw));
  return Status::OK();
}

Status MemFileIo::SetForeignOwner(const std::string& raw) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(Normalize(raw));
  if (it == nodes_.end()) return Status::NotFound(Quoted("chown", raw) + ": no such file or directory");
  it->second.foreign = true;
  return Status::OK();
}

}  // namespace spillway
