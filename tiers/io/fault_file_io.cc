// FaultFileIo: decides, per operation, whether to inject a fault (schedule
// first, then seeded probabilities) and acts it out against the real target,
// so torn and short writes leave real partial bytes on disk.
#include "tiers/io/fault_file_io.h"

#include <cerrno>
#include <chrono>
#include <thread>

#include "tiers/io/posix_file_io.h"

namespace spillway {

using io_internal::DescribeRequest;

FaultFileIo::FaultFileIo(FileIo* target, FaultSpec spec)
    : FileIoWrapper(target),
      name_(std::string("fault(") + target->name() + ")"),
      spec_(std::move(spec)),
      rng_(spec_.seed) {}

std::unique_ptr<FaultFileIo> FaultFileIo::Wrap(std::unique_ptr<FileIo> target, FaultSpec spec) {
  auto f = std::make_unique<FaultFileIo>(target.get(), std::move(spec));
  f->owned_ = std::move(target);
  return f;
}

void FaultFileIo::SetSpec(FaultSpec spec) {
  std::lock_guard<std::mutex> lock(mu_);
  spec_ = std::move(spec);
  rng_.seed(spec_.seed);
}

FaultSpec FaultFileIo::spec() const {
  std::lock_guard<std::mutex> lock(mu_);
  return spec_;
}

void FaultFileIo::FailWindow(FaultKind kind, uint64_t first, uint64_t last) {
  std::lock_guard<std::mutex> lock(mu_);
  spec_.schedule.push_back({kind, first, last});
}

FaultCounts FaultFileIo::counts() const {
  FaultCounts c;
  for (size_t k = 0; k < kFaultKindCount; ++k) c.injected[k] = injected_[k].load(std::memory_order_relaxed);
  c.reads = reads_.load(std::memory_order_relaxed);
  c.writes = writes_.load(std::memory_order_relaxed);
  c.syncs = syncs_.load(std::memory_order_relaxed);
  return c;
}

bool FaultFileIo::Draw(double p) {
  if (p <= 0) return false;  // no draw: adding a zero-probability kind keeps the sequence
  // Top 53 bits as a double in [0, 1): the same on every platform, unlike
  // std::uniform_real_distribution.
  return static_cast<double>(rng_() >> 11) * 0x1.0p-53 < p;
}

bool FaultFileIo::Decide(OpClass cls, uint64_t index, FaultKind* kind) {
  auto class_of = [](FaultKind k) {
    switch (k) {
      case FaultKind::kEioRead: return OpClass::kRead;
      case FaultKind::kEioSync: return OpClass::kSync;
      case FaultKind::kLatency: return OpClass::kCall;
      default: return OpClass::kWrite;
    }
  };
  for (const FaultWindow& w : spec_.schedule) {
    if (class_of(w.kind) == cls && index >= w.first && index <= w.last) {
      *kind = w.kind;
      return true;
    }
  }
  switch (cls) {
    case OpClass::kRead:
      *kind = FaultKind::kEioRead;
      return Draw(spec_.eio_read);
    case OpClass::kSync:
      *kind = FaultKind::kEioSync;
      return Draw(spec_.eio_sync);
    case OpClass::kCall:
      *kind = FaultKind::kLatency;
      return spec_.latency_us > 0 && Draw(spec_.latency);
    case OpClass::kWrite:
      for (auto [k, p] : {std::pair{FaultKind::kNoSpace, spec_.enospc},
                          std::pair{FaultKind::kEioWrite, spec_.eio_write},
                          std::pair{FaultKind::kTornWrite, spec_.torn_write},
                          std::pair{FaultKind::kShortWrite, spec_.short_write}}) {
        if (Draw(p)) {
          *kind = k;
          return true;
        }
      }
      return false;
  }
  return false;
}

void FaultFileIo::MaybeDelay() {
  uint64_t index = calls_.fetch_add(1, std::memory_order_relaxed);
  if (!enabled()) return;
  uint32_t us = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    FaultKind kind;
    if (!Decide(OpClass::kCall, index, &kind)) return;
    us = spec_.latency_us > 0 ? spec_.latency_us : 1000;  // a scheduled delay with no size: 1 ms
  }
  Count(FaultKind::kLatency);
  std::this_thread::sleep_for(std::chrono::microseconds(us));
}

Status FaultFileIo::SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) {
  MaybeDelay();
  size_t faulted = requests.size();  // index of the first faulted request
  FaultKind kind = FaultKind::kEioWrite;
  uint64_t prefix_draw = 0;
  {
    // Decided in request order under one lock, so a single thread replays
    // the same faults for the same seed. Requests after the first fault are
    // never issued (as after a real failure), so they are not counted.
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < requests.size(); ++i) {
      bool read = requests[i].op == IoRequest::Op::kRead;
      uint64_t index = (read ? reads_ : writes_).fetch_add(1, std::memory_order_relaxed);
      if (enabled() && Decide(read ? OpClass::kRead : OpClass::kWrite, index, &kind)) {
        faulted = i;
        if (kind == FaultKind::kShortWrite || kind == FaultKind::kTornWrite) prefix_draw = rng_();
        break;
      }
    }
  }
  if (faulted == requests.size()) return target()->SubmitAndWait(requests, queue_depth);

  Status s;
  if (faulted > 0) s = target()->SubmitAndWait(requests.first(faulted), queue_depth);
  IoRequest& r = requests[faulted];
  if (!s.ok()) {
    r.result = -ECANCELED;
  } else if (kind == FaultKind::kEioRead) {
    Count(kind);
    r.result = -EIO;
    s = Status::FromErrno(EIO, "injected fault: " + DescribeRequest("pread", r));
  } else {
    s = InjectWrite(r, kind, prefix_draw);
  }
  for (IoRequest& rest : requests.subspan(faulted + 1)) rest.result = -ECANCELED;
  return s;
}

Status FaultFileIo::InjectWrite(IoRequest& r, FaultKind kind, uint64_t prefix_draw) {
  Count(kind);
  std::string what = "injected fault: " + DescribeRequest("pwrite", r);
  if (kind == FaultKind::kEioWrite || kind == FaultKind::kNoSpace) {
    int err = kind == FaultKind::kNoSpace ? ENOSPC : EIO;
    r.result = -err;
    return Status::FromErrno(err, what);
  }
  // Short and torn writes put a real prefix on disk. An O_DIRECT file only
  // takes whole blocks, so the prefix is then a multiple of kIoAlign.
  size_t unit = r.file != nullptr && r.file->direct ? kIoAlign : 1;
  size_t units = r.len / unit;
  size_t prefix = units >= 2 ? (1 + prefix_draw % (units - 1)) * unit : 0;
  if (prefix > 0) {
    IoRequest part = r;
    part.len = prefix;
    Status ws = target()->SubmitAndWait(std::span<IoRequest>(&part, 1), 1);
    if (!ws.ok()) {
      r.result = part.result;
      return ws;
    }
  }
  std::string tail = std::to_string(prefix) + " of " + std::to_string(r.len) + " bytes";
  if (kind == FaultKind::kShortWrite) {
    r.result = static_cast<ssize_t>(prefix);
    return Status::IOError("short write: " + what + ": wrote " + tail);
  }
  r.result = -EIO;
  return Status::FromErrno(EIO, "torn write: " + what + " (" + tail + " reached the file)");
}

Status FaultFileIo::InjectSync(const std::string& what) {
  uint64_t index = syncs_.fetch_add(1, std::memory_order_relaxed);
  if (!enabled()) return Status::OK();
  FaultKind kind;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!Decide(OpClass::kSync, index, &kind)) return Status::OK();
  }
  Count(kind);
  return Status::FromErrno(EIO, "injected fault: " + what);
}

Status FaultFileIo::Sync(const FileHandle& file) {
  MaybeDelay();
  SPILLWAY_RETURN_IF_ERROR(InjectSync("fdatasync '" + file.path + "'"));
  return target()->Sync(file);
}

Status FaultFileIo::SyncDir(const std::string& path) {
  MaybeDelay();
  SPILLWAY_RETURN_IF_ERROR(InjectSync("fsync dir '" + path + "'"));
  return target()->SyncDir(path);
}

}  // namespace spillway
