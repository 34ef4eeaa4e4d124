// UringFileIo: FileIo whose reads and writes go through io_uring. The only
// file in spillway that includes liburing.h.
//
// One ring per thread (thread_local, created on first use, torn down at
// thread exit): rings are cheap, and a ring used by a single thread needs no
// lock and may be set up IORING_SETUP_SINGLE_ISSUER. Data requests keep up to
// `queue_depth` operations in flight (SubmitAndWaitEach: reporting each one
// as it completes, after the window is refilled, so the caller's work on it
// overlaps the rest); everything else (open, fsync,
// fallocate, ...) is a plain syscall inherited from PosixFileIo, because those
// calls are rare and gain nothing from a ring.
#include <liburing.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "tiers/io/posix_file_io.h"

namespace spillway::io_internal {

namespace {

// Ring size: at least the deepest queue a tier config asks for in practice
// (the default is 32). Deeper requests are capped to this many in flight.
constexpr unsigned kRingEntries = 128;
// One SQE moves at most this much; longer requests continue like short ones.
constexpr size_t kMaxChunk = 1u << 30;

std::string RingInitReason(int err) {
  std::string s = "io_uring_queue_init: ";
  s += std::strerror(err);
  switch (err) {
    case ENOSYS: s += " (kernel built without io_uring)"; break;
    case EPERM: s += " (blocked by seccomp or the kernel.io_uring_disabled sysctl)"; break;
    case ENOMEM: s += " (RLIMIT_MEMLOCK too low for the ring: raise `ulimit -l`)"; break;
    default: break;
  }
  return s;
}

// Bumped in the child after fork(). A ring's mappings and fd are shared
// with the parent across fork, and a SINGLE_ISSUER ring refuses the child's
// submissions (-EEXIST), so a child (the crash-test harness forks writers)
// must build its own ring rather than use the inherited one.
std::atomic<uint64_t> g_fork_generation{0};

// Held while a ring is set up or torn down. liburing maps rings with raw
// syscalls, so ThreadSanitizer cannot see that a thread's ring is unmapped
// before a new thread's ring reuses its addresses, and reports the reuse as
// a race. Ordering setup and teardown through a mutex states that real
// ordering; it costs one uncontended lock per thread lifetime.
std::mutex g_ring_lifecycle_mu;

void OnForkChild() {
  g_fork_generation.fetch_add(1, std::memory_order_relaxed);
  // Another parent thread may have held the mutex at fork(); it does not
  // exist in the child, so start the child with a fresh, unlocked one.
  new (&g_ring_lifecycle_mu) std::mutex();
}

// This thread's ring. `err` is the (positive) errno of the last failed
// setup; setup is retried on the next use, so a transient ENOMEM heals.
struct ThreadRing {
  io_uring ring;
  bool ready = false;
  int err = 0;
  uint64_t generation = 0;  // g_fork_generation when the ring was made

  ~ThreadRing() { Reset(); }

  bool Init() {
    static std::once_flag at_fork;
    std::call_once(at_fork, [] { pthread_atfork(nullptr, nullptr, OnForkChild); });
    uint64_t gen = g_fork_generation.load(std::memory_order_relaxed);
    if (ready && generation == gen) return true;
    if (ready) Reset();  // inherited from the parent: unmap and close our copy only
    generation = gen;
    io_uring_params p;
    std::memset(&p, 0, sizeof(p));
    // Only this thread submits, and completions are reaped only while it
    // waits: tell the kernel so it can skip cross-thread wakeups.
    p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
    std::lock_guard<std::mutex> lock(g_ring_lifecycle_mu);
    int rc = io_uring_queue_init_params(kRingEntries, &ring, &p);
    if (rc == -EINVAL) {  // kernel older than 6.0 does not know these flags
      std::memset(&p, 0, sizeof(p));
      rc = io_uring_queue_init_params(kRingEntries, &ring, &p);
    }
    if (rc < 0) {
      err = -rc;
      return false;
    }
    ready = true;
    err = 0;
    return true;
  }

  // Drops the ring after an unrecoverable submit error, discarding any SQEs
  // that never reached the kernel; the next use builds a fresh one.
  void Reset() {
    if (!ready) return;
    std::lock_guard<std::mutex> lock(g_ring_lifecycle_mu);
    io_uring_queue_exit(&ring);
    ready = false;
  }
};

thread_local ThreadRing t_ring;

class UringFileIo final : public PosixFileIo {
 public:
  using PosixFileIo::PosixFileIo;
  const char* name() const override { return "io_uring"; }
  Status SubmitAndWait(std::span<IoRequest> requests, uint32_t queue_depth) override {
    return Run(requests, queue_depth, 0, nullptr);
  }
  Status SubmitAndWaitEach(std::span<IoRequest> requests, uint32_t queue_depth, size_t max_ahead,
                           const std::function<void(size_t)>& done) override {
    return Run(requests, queue_depth, max_ahead, &done);
  }

 private:
  // Both entry points; `done` may be null.
  Status Run(std::span<IoRequest> requests, uint32_t queue_depth, size_t max_ahead,
             const std::function<void(size_t)>* done);
};

// Per-request progress, indexed like the caller's span. user_data of each
// SQE is the request index.
struct Progress {
  std::vector<size_t> done;     // bytes transferred so far
  std::vector<size_t> pending;  // indices whose remainder must be (re)submitted
};

void PrepChunk(io_uring_sqe* sqe, const IoRequest& r, size_t done) {
  size_t n = std::min(r.len - done, kMaxChunk);
  char* p = static_cast<char*>(r.buf) + done;
  const int fd = r.file != nullptr ? FdOf(*r.file) : -1;
  if (r.op == IoRequest::Op::kRead) {
    io_uring_prep_read(sqe, fd, p, static_cast<unsigned>(n), r.offset + done);
  } else {
    io_uring_prep_write(sqe, fd, p, static_cast<unsigned>(n), r.offset + done);
  }
}

Status UringFileIo::Run(std::span<IoRequest> requests, uint32_t queue_depth, size_t max_ahead,
                        const std::function<void(size_t)>* done) {
  if (requests.empty()) return Status::OK();
  ThreadRing& tr = t_ring;
  if (!tr.Init()) {
    // The ring worked when this FileIo was made (MakeUringFileIo checked) but
    // not on this thread now: serve the batch synchronously rather than fail.
    static std::once_flag logged;
    std::call_once(logged, [&] {
      logger()->Log(LogLevel::kWarning, "io_uring ring setup failed on a thread (" + RingInitReason(tr.err) +
                                            "); using pread/pwrite there");
    });
    return done == nullptr ? PosixFileIo::SubmitAndWait(requests, queue_depth)
                           : FileIo::SubmitAndWaitEach(requests, queue_depth, max_ahead, *done);
  }
  io_uring* ring = &tr.ring;
  const size_t max_inflight = std::clamp<size_t>(queue_depth, 1, kRingEntries);

  Progress pr;
  pr.done.assign(requests.size(), 0);
  Status first;
  size_t next = 0;      // next request never submitted
  size_t inflight = 0;  // SQEs prepared (queued or in the kernel), not yet completed
  size_t queued = 0;    // SQEs prepared but not yet accepted by io_uring_submit
  // With `done`: which requests completed, and how many leading ones did
  // (request `next` is issued only while next < prefix + max_ahead).
  std::vector<char> complete(done != nullptr ? requests.size() : 0, 0);
  size_t prefix = 0;
  const size_t ahead = done != nullptr && max_ahead > 0 ? max_ahead : requests.size();
  auto completed = [&](size_t i) {
    if (done == nullptr) return;
    complete[i] = 1;
    (*done)(i);
    while (prefix < requests.size() && complete[prefix]) ++prefix;
  };
  auto fail = [&](Status s) {
    if (first.ok()) first = std::move(s);
  };

  // Fills the window: continuations of short transfers first (their
  // buffers are the oldest), then new requests unless a failure stopped us.
  auto fill = [&] {
    while (inflight < max_inflight &&
           (!pr.pending.empty() || (next < requests.size() && next < prefix + ahead && first.ok()))) {
      if (pr.pending.empty() && requests[next].len == 0) {  // nothing to move
        requests[next].result = 0;
        completed(next++);
        continue;
      }
      io_uring_sqe* sqe = io_uring_get_sqe(ring);
      if (sqe == nullptr) break;  // cannot happen while max_inflight <= SQ size
      size_t i;
      if (!pr.pending.empty()) {
        i = pr.pending.back();
        pr.pending.pop_back();
      } else {
        i = next++;
      }
      PrepChunk(sqe, requests[i], pr.done[i]);
      io_uring_sqe_set_data64(sqe, i);
      ++inflight, ++queued;
    }
  };
  // The kernel refused the ring itself. Waits out what it accepted, then
  // drops the ring so unsubmitted SQEs never run against freed buffers.
  auto abandon = [&](int rc) {
    fail(Status::FromErrno(-rc, "io_uring_enter"));
    size_t accepted = inflight - queued;
    while (accepted > 0) {
      io_uring_cqe* cqe;
      if (io_uring_wait_cqe(ring, &cqe) != 0) break;
      io_uring_cqe_seen(ring, cqe);
      --accepted;
    }
    tr.Reset();
    for (IoRequest& r : requests.subspan(next)) r.result = -ECANCELED;
    return first;
  };
  auto fatal = [](int rc) { return rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY && rc != -ETIME; };
  std::vector<size_t> arrived;  // requests completed in this round, for done()

  while (true) {
    fill();
    if (inflight == 0) break;

    // Submit the queued SQEs and wait for at least one completion in one
    // syscall.
    io_uring_cqe* ready;
    int rc = queued > 0 ? io_uring_submit_and_wait(ring, 1) : io_uring_wait_cqe(ring, &ready);
    if (fatal(rc)) return abandon(rc);
    if (queued > 0 && rc > 0) queued -= std::min(queued, static_cast<size_t>(rc));

    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      --inflight;
      uint64_t i = io_uring_cqe_get_data64(cqe);
      IoRequest& r = requests[i];
      int res = cqe->res;
      if (res == -EAGAIN || res == -EINTR) {
        pr.pending.push_back(i);
      } else if (res < 0) {
        r.result = res;
        fail(RequestError(r, -res));
      } else if (res == 0 && r.op == IoRequest::Op::kRead) {
        r.result = static_cast<ssize_t>(pr.done[i]);  // end of file: the read ends here
        if (done != nullptr) arrived.push_back(i);
      } else if (res == 0) {
        r.result = -EIO;
        fail(Status::IOError(DescribeRequest("pwrite", r) + ": wrote 0 bytes after " +
                             std::to_string(pr.done[i])));
      } else {
        pr.done[i] += static_cast<size_t>(res);
        if (pr.done[i] < r.len) {
          pr.pending.push_back(i);  // short transfer: continue from where it stopped
        } else {
          r.result = static_cast<ssize_t>(pr.done[i]);
          if (done != nullptr) arrived.push_back(i);
        }
      }
    }
    io_uring_cq_advance(ring, seen);
    if (!arrived.empty()) {
      // Issues what the window allows now and submits it without waiting;
      // the io_uring_submit result (fatal: the ring must be abandoned).
      auto refill = [&] {
        fill();
        if (queued == 0) return 0;
        const int r = io_uring_submit(ring);
        if (r > 0) queued -= std::min(queued, static_cast<size_t>(r));
        return r;
      };
      // Keep the device busy while the caller works on what arrived: issue
      // what the window allows now, then report.
      rc = refill();
      if (fatal(rc)) return abandon(rc);
      for (size_t k = 0; k < arrived.size(); ++k) {
        if (first.ok()) completed(arrived[k]);
        // What that report freed (a slot of the caller's ring: max_ahead)
        // goes out now, not after the round's last report: completions
        // often land several at a time, and their reports take longer than
        // the disk needs for the next request. (`arrived` is only filled
        // when there is a `done` to report to.)
        if (k + 1 < arrived.size() && max_ahead > 0) {
          rc = refill();
          if (fatal(rc)) return abandon(rc);
        }
      }
      arrived.clear();
    }
  }
  for (IoRequest& r : requests.subspan(next)) r.result = -ECANCELED;
  return first;
}

}  // namespace

}  // namespace spillway::io_internal

namespace spillway {

StatusOr<std::unique_ptr<FileIo>> MakeUringFileIo(Logger* logger) {
  // Setting up this thread's ring is the probe: it fails exactly the way a
  // later use would (ENOSYS, EPERM from seccomp, ENOMEM from RLIMIT_MEMLOCK).
  io_internal::ThreadRing& tr = io_internal::t_ring;
  if (!tr.Init()) return Status::NotSupported("io_uring unavailable: " + io_internal::RingInitReason(tr.err));
  return std::unique_ptr<FileIo>(std::make_unique<io_internal::UringFileIo>(logger));
}

}  // namespace spillway
