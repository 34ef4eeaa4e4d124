// The pipelined mover stepped by hand: several batches queued per boundary,
// WaitIdle's contract, callers that wait only for the room they need (and
// past a second while a batch is in flight), reads
// that never demote, Acquire's one batch of reads, Prefetch: it waits
// for room to promote, and a Get waits for its read; RelieveMemory waits
// for the mover too.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>

#include "base/scheduler.h"
#include "engine/demotion_policy.h"
#include "engine/engine_core.h"
#include "engine/mover.h"
#include "engine_test_util.h"
#include "tiers/file_tier.h"
#include "tiers/host_tier.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

internal::EngineCore& Core(Engine& e) { return static_cast<internal::EngineCore&>(e); }

std::unique_ptr<Engine> OpenWith(const Config& c, Scheduler* s, FileIo* io = nullptr) {
  EngineOptions o;
  o.scheduler = s;
  o.file_io = io;
  return MustOpen(c, o);
}

// Background as far as the engine can tell (callers wait instead of
// demoting), but a task runs only when the test steps it.
class GatedScheduler final : public Scheduler {
 public:
  void Submit(std::function<void()> task) override {
    std::lock_guard<std::mutex> l(mu_);
    tasks_.push_back(std::move(task));
  }
  bool background() const override { return true; }
  bool RunOne() {
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (tasks_.empty()) return false;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
    return true;
  }
  size_t queued() {
    std::lock_guard<std::mutex> l(mu_);
    return tasks_.size();
  }
  // Declared after the engine it feeds, runs what is still queued before
  // the engine closes. The mover's Stop waits for the batches in flight and
  // never runs a background scheduler's queue itself, so a test that ended
  // early (a failed REQUIRE) hung until CTest's timeout instead of failing.
  struct RunQueuedAtExit {
    GatedScheduler& sched;
    ~RunQueuedAtExit() {
      while (sched.RunOne()) {
      }
    }
  };

 private:
  std::mutex mu_;
  std::deque<std::function<void()>> tasks_;
};

// Counts read submissions (SubmitAndWait calls whose requests are reads).
class CountingIo : public FileIoWrapper {
 public:
  explicit CountingIo(FileIo* t) : FileIoWrapper(t) {}
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    if (!r.empty() && r[0].op == IoRequest::Op::kRead) {
      read_batches.fetch_add(1);
      const int n = static_cast<int>(r.size());
      if (n > max_read_requests.load()) max_read_requests = n;
      read_depth = static_cast<int>(qd);
    }
    if (!r.empty() && r[0].op == IoRequest::Op::kWrite) write_batches.fetch_add(1);
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  std::atomic<int> read_batches{0}, write_batches{0}, max_read_requests{0}, read_depth{0};
};

// A file tier for the policy's arithmetic to demote into (nothing is written).
struct PolicyDestination {
  TempDir dir{"policy"};
  std::unique_ptr<FileIo> io = MakeFileIo();
  FileTier file{FileTierConfig("f", dir.path(), 1ull << 30), 1, io.get(), nullptr};
};

}  // namespace

TEST_CASE("DemotionPolicy: nothing below the high watermark, down to low above it, less what is in flight") {
  TierConfig tc = HostTierConfig("h", 100 << 20);
  tc.watermarks = {0.9, 0.75};
  HostTier tier(tc, 0, nullptr);
  internal::DemotionPolicy p;
  HostTier below_mem(HostTierConfig("m", 1 << 30), 1, nullptr);
  internal::BoundaryLoad none;
  tier.ForceReserve(80 << 20);
  CHECK(p.Want(tier, below_mem, none) == 0);
  internal::BoundaryLoad waiting;
  waiting.waiting_bytes = 30 << 20;  // projected 110 MiB: down to low (75), and the queue kept full
  CHECK(p.Want(tier, below_mem, waiting) == (35u << 20));
  waiting.waiting_bytes = 1 << 20;  // projected 81 MiB: below high, but a caller waits
  CHECK(p.Want(tier, below_mem, waiting) ==
        static_cast<uint64_t>(p.MaxInflight(below_mem)) * p.BatchBytes(tier, below_mem));
  tier.ForceReserve(15 << 20);  // 95 MiB: above high; 20 MiB to low, but at least capacity / 4
  CHECK(p.Want(tier, below_mem, none) == (25u << 20));
  internal::BoundaryLoad busy;
  busy.inflight_bytes = 16 << 20;
  CHECK(p.Want(tier, below_mem, busy) == (9u << 20));
  busy.inflight_bytes = 32 << 20;
  CHECK(p.Want(tier, below_mem, busy) == 0);
  CHECK(p.BatchBytes(tier, below_mem) > 0);
  CHECK(p.BatchBytes(tier, below_mem) <= tier.capacity_bytes() / 8);
  tier.Unreserve(95 << 20);
}

TEST_CASE("DemotionPolicy: a waiting caller keeps the disk queue full, but a small tier is not emptied for it") {
  PolicyDestination dest;
  FileTier& file = dest.file;
  REQUIRE(file.Open().ok());
  internal::DemotionPolicy p;
  internal::BoundaryLoad waiting;
  waiting.waiting_bytes = 1 << 20;
  // Large tier: MaxInflight batches (the queue kept full).
  HostTier big(HostTierConfig("big", 1ull << 30), 0, nullptr);
  big.ForceReserve(512 << 20);  // below high
  CHECK(p.Want(big, file, waiting) == static_cast<uint64_t>(p.MaxInflight(file)) * p.BatchBytes(big, file));
  big.Unreserve(512 << 20);
  // 16 MiB tier: MaxInflight batches of capacity / 8 would be all of it;
  // it gets WaitingBatchBytes (capacity / 2) instead.
  HostTier small(HostTierConfig("small", 16 << 20), 0, nullptr);
  small.ForceReserve(8 << 20);
  REQUIRE(static_cast<uint64_t>(p.MaxInflight(file)) * p.BatchBytes(small, file) >= (16u << 20));
  CHECK(p.Want(small, file, waiting) == (8u << 20));
  // A waiter needing more than that gets what it needs.
  waiting.waiting_bytes = 12 << 20;
  CHECK(p.Want(small, file, waiting) == (12u << 20));
  small.Unreserve(8 << 20);
}

TEST_CASE("DemotionPolicy: a sustained spill keeps whole batches moving down to the floor, below the watermarks") {
  PolicyDestination dest;
  FileTier& file = dest.file;
  REQUIRE(file.Open().ok());
  internal::DemotionPolicy p;
  HostTier host(HostTierConfig("h", 64 << 20), 0, nullptr);  // high 57.6 MiB, low 48
  REQUIRE(p.BatchBytes(host, file) == (8u << 20));
  REQUIRE(internal::DemotionPolicy::SustainedFloorBytes(host) == (16u << 20));  // low - capacity / 2
  host.ForceReserve(40 << 20);  // below low
  internal::BoundaryLoad load;
  CHECK(p.Want(host, file, load) == 0);
  CHECK(p.NudgeAbove(host, file, load) == UINT64_MAX);
  CHECK(p.MaxInflight(host, file, load) == 1);  // nobody asks: one batch at most
  load.sustained = true;
  CHECK(p.Want(host, file, load) == (24u << 20));  // 40 - 16, in whole batches
  CHECK(p.MaxInflight(host, file, load) == p.MaxInflight(file));
  load.inflight_bytes = 16 << 20;  // 24 MiB not moving: one more batch
  CHECK(p.Want(host, file, load) == (8u << 20));
  CHECK(p.NudgeAbove(host, file, load) == (40u << 20));  // in flight + floor + one batch
  load.inflight_bytes = 20 << 20;  // 20 MiB not moving: less than a batch above the floor
  CHECK(p.Want(host, file, load) == 0);
  host.Unreserve(40 << 20);
  host.ForceReserve(10 << 20);  // below the floor: nothing, sustained or not
  load.inflight_bytes = 0;
  CHECK(p.Want(host, file, load) == 0);
  host.Unreserve(10 << 20);
}

TEST_CASE("a manual scheduler: several batches queued per boundary, WaitIdle runs them and leaves the tier under high") {
  TempDir dir("mover");
  ManualScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 4 << 20, 64 << 20), &sched);
  for (int i = 0; i < 39; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  // Above high (3.6 MiB): the Puts woke the mover, which queued batches
  // without running any (nobody stepped the scheduler).
  auto st = Core(*e).mover().state(0);
  CHECK(st.inflight_batches >= 2);
  CHECK(sched.queued() == static_cast<size_t>(st.inflight_batches));
  CHECK(e->Stats().tiers[1].objects == 0);
  REQUIRE(sched.RunOne());
  CHECK(e->Stats().tiers[1].objects > 0);
  // WaitIdle (Flush) runs the rest on this thread and returns idle.
  REQUIRE(e->Flush().ok());
  st = Core(*e).mover().state(0);
  CHECK(st.inflight_batches == 0);
  CHECK(sched.queued() == 0);
  auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (4 << 20)));
  CHECK(s.tiers[0].objects + s.tiers[1].objects == 39);
  CHECK(s.sync_demotions == 0);
  for (int i = 0; i < 39; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(100 << 10, i)));
  }
}

TEST_CASE("a tier's demotion idle time grows while no batch out of it is queued or running, and only then") {
  // TierStats::demotion_idle_ns: what spillway bench section 1 reports as
  // the spill's time with no demotion batch in flight.
  TempDir dir("mover");
  ManualScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 4 << 20, 64 << 20), &sched);
  const auto idle = [&] { return e->Stats().tiers[0].demotion_idle_ns; };
  const uint64_t ms = 1000000;
  const uint64_t i0 = idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const uint64_t i1 = idle();
  CHECK(i1 >= i0 + 30 * ms);  // nothing queued: idle
  for (int i = 0; i < 39; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  REQUIRE(Core(*e).mover().state(0).inflight_batches >= 1);  // queued, not run
  const uint64_t i2 = idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const uint64_t i3 = idle();
  CHECK(i3 == i2);  // a batch is queued: not idle, however long it waits
  REQUIRE(e->Flush().ok());  // runs every batch; the boundary is idle again
  REQUIRE(Core(*e).mover().state(0).inflight_batches == 0);
  const uint64_t i4 = idle();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(idle() >= i4 + 30 * ms);
  CHECK(e->Stats().tiers[1].demotion_idle_ns == 0);  // the last tier demotes nothing
  CHECK(StatsToJson(e->Stats()).find("\"demotion_idle_seconds\"") != std::string::npos);
  CHECK(StatsToPrometheus(e->Stats()).find("spillway_tier_demotion_idle_seconds_total{") != std::string::npos);
}

TEST_CASE("a reservation that takes the tier past its high watermark queues a demotion before the object is in") {
  // The Put that reserves copies its object in afterwards (a long copy for a
  // large object in memory the process never touched); the demotion of what
  // the tier already holds runs meanwhile, not after the insert.
  TempDir dir("mover");
  ManualScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 4 << 20, 64 << 20), &sched);
  for (int i = 0; i < 30; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  // 3000 KiB of 4096: under high (3686 KiB), nothing queued.
  REQUIRE(sched.queued() == 0);
  internal::Mover& mover = Core(*e).mover();
  Tier& host = Core(*e).tier(0);
  // A reservation that stays under high queues nothing...
  REQUIRE(mover.MakeRoom(0, 500 << 10));
  CHECK(sched.queued() == 0);
  host.Unreserve(500 << 10);
  // ...one that crosses it queues a batch at once, with nothing inserted yet.
  REQUIRE(mover.MakeRoom(0, 900 << 10));
  CHECK(host.AboveHigh());
  CHECK(sched.queued() >= 1);
  CHECK(mover.state(0).inflight_batches >= 1);
  host.Unreserve(900 << 10);
  REQUIRE(e->Flush().ok());
  CHECK(sched.queued() == 0);
  CHECK(e->Stats().tiers[0].objects + e->Stats().tiers[1].objects == 30);
}

TEST_CASE("WaitIdle returns when the only movable objects are pinned") {
  TempDir dir("mover");
  ManualScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 1 << 20, 64 << 20), &sched);
  std::vector<Handle> pins;
  for (int i = 0; i < 10; ++i) {  // 1000 KiB: above the high watermark (921.6 KiB)
    REQUIRE(e->Put("p" + std::to_string(i), Bytes(100 << 10, i)).ok());
    auto h = e->Get("p" + std::to_string(i));
    REQUIRE(h.ok());
    pins.push_back(std::move(*h));
  }
  REQUIRE(e->Flush().ok());  // above high, nothing movable: returns
  CHECK(Core(*e).mover().state(0).stuck);
  CHECK(e->Stats().tiers[1].objects == 0);
  pins.clear();
  REQUIRE(e->Flush().ok());
  CHECK(e->Stats().tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (1 << 20)));
}

TEST_CASE("a Put that finds the tier full waits for one batch, not for every batch queued") {
  TempDir dir("mover");
  GatedScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 4 << 20, 64 << 20), &sched);
  GatedScheduler::RunQueuedAtExit drain{sched};
  // 40 x 100 KiB = 4000 KiB of 4096: the next Put does not fit.
  for (int i = 0; i < 40; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  const size_t queued = sched.queued();
  REQUIRE(queued >= 2);
  CHECK(e->Stats().backpressure_waits == 0);  // every Put so far found room
  const auto launched = std::chrono::steady_clock::now();
  auto put = std::async(std::launch::async, [&] { return e->Put("late", Bytes(200 << 10, 99)); });
  // Once the Put is seen waiting, the test holds it for at least 100 ms.
  for (int i = 0; i < 10000 && Core(*e).mover().state(0).waiting_bytes == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(Core(*e).mover().state(0).waiting_bytes > 0);
  CHECK(put.wait_for(std::chrono::milliseconds(100)) == std::future_status::timeout);  // waiting for room
  REQUIRE(sched.RunOne());  // one 512 KiB batch commits
  REQUIRE(put.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  const auto done = std::chrono::steady_clock::now();
  CHECK(put.get().ok());
  CHECK(sched.queued() >= 1);  // the other batches had not run
  const EngineStats s = e->Stats();
  CHECK(s.sync_demotions == 0);
  // The wait is counted once, with at least the 100 ms the test held it
  // and no more than the Put took.
  CHECK(s.backpressure_waits == 1);
  CHECK(s.backpressure_wait_ns >= 100'000'000u);
  CHECK(s.backpressure_wait_ns <=
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(done - launched).count()));
  while (sched.RunOne()) {
  }
  auto h = e->Get("late");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(200 << 10, 99)));
}

TEST_CASE("after a Put waited, batches start below the high watermark until the spill ends") {
  TempDir dir("mover");
  GatedScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 4 << 20, 256 << 20), &sched);
  GatedScheduler::RunQueuedAtExit drain{sched};
  const Tier& host = Core(*e).tier(0);
  const uint64_t floor = internal::DemotionPolicy::SustainedFloorBytes(host);  // 1 MiB
  const uint64_t batch = internal::DemotionPolicy().BatchBytes(host, Core(*e).tier(1));  // 512 KiB
  const auto run_all = [&] {
    while (sched.RunOne()) {
    }
  };
  int seed = 0;
  const auto put = [&] { REQUIRE(e->Put("k" + std::to_string(seed), Bytes(100 << 10, seed)).ok()); ++seed; };
  // Fills the tier to the brim, then a Put waits for room (one batch runs).
  const auto spill = [&] {
    while (host.used_bytes() + (100 << 10) <= host.capacity_bytes()) put();
    auto late = std::async(std::launch::async, [&] { return e->Put("late", Bytes(200 << 10, 99)); });
    for (int i = 0; i < 10000 && Core(*e).mover().state(0).waiting_bytes == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    REQUIRE(Core(*e).mover().state(0).waiting_bytes > 0);
    REQUIRE(sched.RunOne());
    REQUIRE(late.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    REQUIRE(late.get().ok());
  };
  // Puts that stay below the high watermark (3.6 MiB): do they queue a batch?
  const auto below_high_starts_batch = [&] {
    REQUIRE(sched.queued() == 0);
    for (int i = 0; i < 10; ++i) put();
    CHECK(host.used_bytes() < host.HighBytes());
    const bool started = sched.queued() > 0;
    run_all();
    return started;
  };
  spill();
  // Completions go on starting batches down to the floor, not to low (3 MiB).
  run_all();
  CHECK(host.used_bytes() < floor + batch);
  // Puts below the high watermark start batches once a whole one is above
  // the floor: the pipeline does not wait for the next crossing.
  CHECK(below_high_starts_batch());
  CHECK(below_high_starts_batch());
  // A Flush ends the spill: only the watermarks start batches.
  REQUIRE(e->Flush().ok());
  CHECK_FALSE(below_high_starts_batch());
  // So does kSustainFor without a wait.
  run_all();
  spill();
  run_all();
  CHECK(below_high_starts_batch());
  std::this_thread::sleep_for(internal::DemotionPolicy::kSustainFor + std::chrono::milliseconds(100));
  CHECK_FALSE(below_high_starts_batch());
  CHECK(e->Stats().sync_demotions == 0);
  for (const std::string& k : std::vector<std::string>{"k0", "late", "k" + std::to_string(seed - 1)}) {
    auto h = e->Get(k);
    REQUIRE_MESSAGE(h.ok(), k);
  }
}

TEST_CASE("a Put waits past a second for a batch still in flight instead of going to the tier below") {
  // On a loaded machine one batch can take longer than the second a caller
  // waits without progress; while it runs, room is on its way.
  TempDir dir("mover");
  GatedScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 4 << 20, 64 << 20), &sched);
  GatedScheduler::RunQueuedAtExit drain{sched};
  for (int i = 0; i < 40; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  REQUIRE(sched.queued() >= 1);  // batches in flight, held by the test
  const uint64_t host_before = e->Stats().tiers[0].raw_bytes_written;
  auto put = std::async(std::launch::async, [&] { return e->Put("late", Bytes(200 << 10, 99)); });
  CHECK(put.wait_for(std::chrono::milliseconds(1800)) == std::future_status::timeout);
  REQUIRE(sched.RunOne());
  REQUIRE(put.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(put.get().ok());
  CHECK(e->Stats().tiers[0].raw_bytes_written == host_before + (200 << 10));  // the host tier took it
  while (sched.RunOne()) {
  }
  auto h = e->Get("late");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(200 << 10, 99)));
}

TEST_CASE("RelieveMemory waits for the mover's batches and never demotes on the caller's thread") {
  TempDir dir("mover");
  GatedScheduler sched;
  auto e = OpenWith(HostFileChain(dir.path(), 512 << 20, 1024 << 20), &sched);
  GatedScheduler::RunQueuedAtExit drain{sched};
  CHECK(e->RelieveMemory(1ull << 40));  // no limit set: fits at once
  for (int i = 0; i < 32; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(1 << 20, i)).ok());
  while (sched.RunOne()) {
  }
  REQUIRE(e->Stats().tiers[0].used_bytes == 32u << 20);  // far below the watermarks: nothing queued
  e->SetProcessMemoryLimit(1);  // below any resident set: all 32 MiB must go
  // Without waiting: the batches are queued and the call returns at once.
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(e->RelieveMemory(0, /*wait=*/false));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(500));
  CHECK(sched.queued() >= 1);
  CHECK(e->Stats().tiers[0].used_bytes == 32u << 20);
  auto relieved = std::async(std::launch::async, [&] { return e->RelieveMemory(0); });
  CHECK(relieved.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
  CHECK(e->Stats().tiers[0].used_bytes == 32u << 20);  // it waited: nothing moved on its thread
  CHECK(sched.queued() >= 1);
  for (int i = 0; i < 1000 && relieved.wait_for(std::chrono::milliseconds(5)) != std::future_status::ready; ++i) {
    sched.RunOne();
  }
  REQUIRE(relieved.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK_FALSE(relieved.get());  // no process fits under 1 byte, but the tier gave up all it held
  CHECK(e->Stats().tiers[0].used_bytes == 0);
  CHECK(e->Stats().sync_demotions == 0);
  e->SetProcessMemoryLimit(0);
  for (int i = 0; i < 32; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(1 << 20, i)));
  }
}

TEST_CASE("batches whose every object was erased while in flight leave the boundary moving, not stuck") {
  // A Dask worker's keys churn: every object the mover had picked may be
  // released before its batch commits. Those batches move nothing, yet the
  // tier can still be above high with other objects to move; were the
  // boundary taken for stuck, Flush (which waits for idle) returned with the
  // tier full and nothing moving (seen on tmpfs, where writes are fast
  // enough for the race).
  TempDir dir("mover");
  GatedScheduler sched;
  Config c = HostFileChain(dir.path(), 4 << 20, 64 << 20);
  c.tiers[0].watermarks = {0.3, 0.2};
  auto e = OpenWith(c, &sched);
  GatedScheduler::RunQueuedAtExit drain{sched};
  internal::Mover& mover = Core(*e).mover();
  int put = 0;
  while (mover.state(0).inflight_batches < internal::DemotionPolicy().MaxInflight(Core(*e).tier(1)) && put < 36) {
    REQUIRE(e->Put("k" + std::to_string(put), Bytes(100 << 10, put)).ok());
    ++put;
  }
  const auto picked_state = mover.state(0);
  REQUIRE(picked_state.inflight_batches == internal::DemotionPolicy().MaxInflight(Core(*e).tier(1)));
  // Picks are oldest first: k0 .. k(n-1).
  const int picked = static_cast<int>(picked_state.inflight_bytes / (100 << 10));
  REQUIRE(picked < put);
  for (int i = 0; i < picked; ++i) REQUIRE(e->Erase("k" + std::to_string(i)).ok());
  // Enough new objects that the tier stays above high once the erased ones go.
  const uint64_t high = Core(*e).tier(0).HighBytes();
  int fresh = 0;
  while (static_cast<uint64_t>(put - picked + fresh) * (100 << 10) <= high + (200 << 10)) {
    REQUIRE(e->Put("n" + std::to_string(fresh), Bytes(100 << 10, 1000 + fresh)).ok());
    ++fresh;
  }
  CHECK(sched.queued() == static_cast<size_t>(picked_state.inflight_batches));  // no room for another batch
  for (int steps = 0; steps < 1000 && sched.RunOne(); ++steps) {
  }
  CHECK(sched.queued() == 0);
  CHECK(mover.state(0).inflight_batches == 0);
  CHECK(Core(*e).tier(0).used_bytes() <= high);  // moved on past the erased picks
  CHECK(e->Stats().tiers[0].demotions_out > 0);
  for (int i = picked; i < put; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(100 << 10, i)));
  }
  for (int i = 0; i < fresh; ++i) {
    auto h = e->Get("n" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(100 << 10, 1000 + i)));
  }
  for (int steps = 0; steps < 1000 && sched.RunOne(); ++steps) {
  }
}

TEST_CASE("a read that cannot promote asks the mover for room and never demotes on its thread") {
  TempDir dir("mover");
  ManualScheduler sched;
  auto io = MakeFileIo();
  CountingIo counting(io.get());
  auto e = OpenWith(HostFileChain(dir.path(), 1 << 20, 64 << 20), &sched, &counting);
  for (int i = 0; i < 20; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  REQUIRE(e->Flush().ok());
  // Fill the host tier to the brim with pinned objects.
  std::vector<Handle> pins;
  for (int i = 0; e->Stats().tiers[0].used_bytes + (100 << 10) <= (1 << 20); ++i) {
    REQUIRE(e->Put("fill" + std::to_string(i), Bytes(100 << 10, 1000 + i)).ok());
    auto h = e->Get("fill" + std::to_string(i));
    REQUIRE(h.ok());
    pins.push_back(std::move(*h));
  }
  const auto before = e->Stats();
  const int writes = counting.write_batches.load();
  auto h = e->Get("k0");  // in the file tier; the host tier has no room
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(100 << 10, 0)));
  const auto after = e->Stats();
  CHECK(after.sync_demotions == before.sync_demotions);
  CHECK(counting.write_batches.load() == writes);
  CHECK(after.tiers[0].promotions_in == before.tiers[0].promotions_in);
  h->Release();
  // The request for room is queued for the mover, not run by the reader.
  pins.clear();
  sched.RunPending();
  REQUIRE(e->Flush().ok());
  CHECK(ServingTier(*e, "k0") == 1);  // promoted on this read...
  CHECK(ServingTier(*e, "k0") == 0);  // ...so now served from memory
}

TEST_CASE("Acquire reads every file-resident key in one batch of requests") {
  TempDir dir("mover");
  auto io = MakeFileIo();
  CountingIo counting(io.get());
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  c.policy.promote_on_read = false;
  auto e = MustOpen(c, &counting);
  for (int i = 0; i < 40; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(64 << 10, i)).ok());
  REQUIRE(e->Flush().ok());
  std::vector<std::string> keys;
  for (int i = 0; i < 8; ++i) keys.push_back("k" + std::to_string(i));  // the oldest: spilled
  for (const auto& k : keys) REQUIRE(ServingTier(*e, k) == 1);
  const int reads = counting.read_batches.load();
  auto hs = e->Acquire(keys, Where::kHost);
  REQUIRE(hs.ok());
  CHECK(counting.read_batches.load() == reads + 1);
  REQUIRE(hs->size() == keys.size());
  for (int i = 0; i < 8; ++i) CHECK(HandleEquals((*hs)[i], Bytes(64 << 10, i)));
  std::vector<std::string> bad = {"k0", "missing"};
  auto none = e->Acquire(bad, Where::kHost);
  CHECK(none.status().IsNotFound());
  CHECK(none.status().message().find("missing") != std::string::npos);
  hs->clear();
  CHECK(e->Stats().tiers[1].pinned_bytes == 0);
}

namespace {

// Records which threads submit reads; fails those from any thread but
// `caller` while `fail_others` is set.
class ReadThreadsIo : public FileIoWrapper {
 public:
  explicit ReadThreadsIo(FileIo* t) : FileIoWrapper(t) {}
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    if (!r.empty() && r[0].op == IoRequest::Op::kRead) {
      const auto me = std::this_thread::get_id();
      {
        std::lock_guard<std::mutex> l(mu);
        if (me != caller) ++reads_elsewhere;
      }
      if (fail_others.load() && me != caller) return Status::IOError("injected read error");
    }
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  std::mutex mu;
  std::thread::id caller = std::this_thread::get_id();
  int reads_elsewhere = 0;
  std::atomic<bool> fail_others{false};
};

}  // namespace

TEST_CASE("Acquire reads its next run of keys on a helper thread while it serves the one before, and a failed run pins nothing") {
  TempDir dir("mover");
  auto io = MakeFileIo();
  ReadThreadsIo threads(io.get());
  Config c = HostFileChain(dir.path(), 1 << 20, 256 << 20);
  c.policy.promote_on_read = false;
  auto e = MustOpen(c, &threads);
  // 80 MiB of 64 KiB objects in the file tier: two runs of at most 64 MiB,
  // each read in windows (not streamed), so without a reader thread every
  // read is submitted from this one.
  constexpr int kKeys = 1280;
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back("k" + std::to_string(i));
    REQUIRE(e->Put(keys.back(), Bytes(64 << 10, i)).ok());
  }
  REQUIRE(e->Flush().ok());
  keys.resize(kKeys - 16);  // the newest may still be in the host tier
  for (const auto& k : keys) REQUIRE(ServingTier(*e, k) == 1);
  {
    auto hs = e->Acquire(keys, Where::kHost);
    REQUIRE(hs.ok());
    REQUIRE(hs->size() == keys.size());
    for (size_t i = 0; i < keys.size(); ++i) CHECK(HandleEquals((*hs)[i], Bytes(64 << 10, i)));
  }
  {
    std::lock_guard<std::mutex> l(threads.mu);
    CHECK(threads.reads_elsewhere > 0);  // the second run was read on the helper
  }
  CHECK(e->Stats().tiers[1].pinned_bytes == 0);
  // The second run's reads fail: the Acquire names a key, serves nothing,
  // leaves nothing pinned, and the data is still there.
  threads.fail_others = true;
  auto failed = e->Acquire(keys, Where::kHost);
  threads.fail_others = false;
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message().find("acquire 'k") != std::string::npos);
  CHECK(e->Stats().tiers[1].pinned_bytes == 0);
  CHECK(e->Stats().tiers[0].pinned_bytes == 0);
  auto again = e->Acquire(keys, Where::kHost);
  REQUIRE(again.ok());
  for (size_t i = 0; i < keys.size(); i += 97) CHECK(HandleEquals((*again)[i], Bytes(64 << 10, i)));
}

TEST_CASE("Acquire to the device reads its keys on several threads, and without a gpu tier names a key and pins nothing") {
  TempDir dir("mover");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) {
    keys.push_back("k" + std::to_string(i));
    REQUIRE(e->Put(keys.back(), Bytes(64 << 10, i)).ok());
  }
  REQUIRE(e->Flush().ok());
  const uint64_t gets = e->Stats().gets;
  auto hs = e->Acquire(keys, Where::kDevice);
  REQUIRE_FALSE(hs.ok());
  CHECK(hs.status().code() == StatusCode::kNotSupported);
  CHECK(hs.status().message().find("acquire 'k") != std::string::npos);
  CHECK(e->Stats().gets == gets + keys.size());  // every key was tried
  CHECK(e->Stats().tiers[0].pinned_bytes == 0);
  CHECK(e->Stats().tiers[1].pinned_bytes == 0);
  e->Prefetch(keys, Where::kDevice);  // a hint: fails quietly
  for (size_t i = 0; i < keys.size(); i += 7) {
    auto h = e->Get(keys[i]);
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(64 << 10, i)));
  }
}

TEST_CASE("a large object is read as several requests in flight at once") {
  TempDir dir("mover");
  auto io = MakeFileIo();
  CountingIo counting(io.get());
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  c.tiers[1].io.segment_bytes = 32 << 20;
  auto e = MustOpen(c, &counting);
  auto big = Bytes(16 << 20, 7);  // larger than the host tier: stored in the file tier
  REQUIRE(e->Put("big", big).ok());
  auto h = e->Get("big");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, big));
  CHECK(counting.max_read_requests.load() >= 16);  // 1 MiB requests (io.block_size)
  CHECK(counting.read_depth.load() >= 8);          // issued at the tier's queue depth
}

namespace {

// Holds every read submission until Open(); counts them.
class GateReadsIo : public FileIoWrapper {
 public:
  explicit GateReadsIo(FileIo* t) : FileIoWrapper(t) {}
  Status SubmitAndWait(std::span<IoRequest> r, uint32_t qd) override {
    if (!r.empty() && r[0].op == IoRequest::Op::kRead) {
      std::unique_lock<std::mutex> l(mu_);
      ++reads_;
      cv_.notify_all();
      cv_.wait(l, [this] { return open_; });
    }
    return FileIoWrapper::SubmitAndWait(r, qd);
  }
  void Close() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = false;
  }
  void Open() {
    std::lock_guard<std::mutex> l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Waits until `n` read submissions have arrived; false after 10 s.
  bool WaitReads(int n) {
    std::unique_lock<std::mutex> l(mu_);
    return cv_.wait_for(l, std::chrono::seconds(10), [&] { return reads_ >= n; });
  }
  int reads() {
    std::lock_guard<std::mutex> l(mu_);
    return reads_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  int reads_ = 0;
};

// Polls until every key is served from tier `t` (TierOf), or 10 s pass.
bool EventuallyInTier(Engine& e, const std::vector<std::string>& keys, int t) {
  for (int i = 0; i < 1000; ++i) {
    bool all = true;
    for (const auto& k : keys) all = all && e.TierOf(k) == t;
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

TEST_CASE("Prefetch into a full host tier waits for the mover, so every key it read is promoted") {
  TempDir dir("mover");
  Config c = HostFileChain(dir.path(), 16 << 20, 256 << 20);
  // High at capacity: a full tier is not above it, so the mover demotes
  // only when asked for room.
  c.tiers[0].watermarks = {1.0, 0.9};
  auto e = MustOpen(c, nullptr, /*background=*/true);
  for (int i = 0; i < 40; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(1 << 20, i)).ok());
  REQUIRE(e->Flush().ok());
  // Filled to the brim: none of the prefetched keys fits without a demotion.
  for (int i = 0; e->Stats().tiers[0].used_bytes + (1 << 20) <= (16u << 20); ++i) {
    REQUIRE(e->Put("fill" + std::to_string(i), Bytes(1 << 20, 1000 + i)).ok());
  }
  std::vector<std::string> keys = {"k0", "k1", "k2"};  // the oldest: spilled
  for (const auto& k : keys) REQUIRE(e->TierOf(k) == 1);
  const uint64_t file_hits = e->Stats().tiers[1].hits;
  e->Prefetch(keys, Where::kHost);
  CHECK(EventuallyInTier(*e, keys, 0));
  // Each record was read once, by the Prefetch; the Gets are memory hits.
  CHECK(e->Stats().tiers[1].hits == file_hits + keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    auto h = e->Get(keys[i]);
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(1 << 20, i)));
  }
  CHECK(e->Stats().tiers[1].hits == file_hits + keys.size());
}

// An engine over a FileIo whose reads can be held (GateReadsIo), holding
// k0..k39 of 256 KiB in an 8 MiB host tier, k0 spilled to the file tier.
struct GatedSpill {
  explicit GatedSpill(bool promote_on_read) : gate(io.get()) {
    Config c = HostFileChain(dir.path(), 8 << 20, 256 << 20);
    c.policy.promote_on_read = promote_on_read;
    e = OpenWith(c, /*s=*/nullptr, &gate);  // no scheduler: the engine's own background mover
    for (int i = 0; i < 40; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(256 << 10, i)).ok());
    REQUIRE(e->Flush().ok());
    REQUIRE(e->TierOf("k0") == 1);
  }
  // Prefetches k0 with reads held, starts a Get of it, and checks that the
  // Get waits for the Prefetch's read, submitting none of its own.
  std::future<StatusOr<Handle>> PrefetchThenGet() {
    file_hits = e->Stats().tiers[1].hits;
    reads = gate.reads();
    gate.Close();
    std::vector<std::string> keys = {"k0"};
    e->Prefetch(keys, Where::kHost);
    REQUIRE(gate.WaitReads(reads + 1));  // the Prefetch's read, held at the gate
    auto get = std::async(std::launch::async, [this] { return e->Get("k0"); });
    CHECK(get.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    CHECK(gate.reads() == reads + 1);
    gate.Open();
    return get;
  }
  TempDir dir{"mover"};
  std::unique_ptr<FileIo> io = MakeFileIo();
  GateReadsIo gate;
  std::unique_ptr<Engine> e;
  uint64_t file_hits = 0;
  int reads = 0;
};

TEST_CASE("a Get of a key a Prefetch is reading waits for that read instead of reading the record again") {
  GatedSpill s(/*promote_on_read=*/true);
  auto h = s.PrefetchThenGet().get();
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(256 << 10, 0)));
  CHECK(s.gate.reads() == s.reads + 1);
  CHECK(s.e->Stats().tiers[1].hits == s.file_hits + 1);  // one read of the record, the Prefetch's
  CHECK(s.e->TierOf("k0") == 0);
}

TEST_CASE("Prefetch promotes with policy.promote_on_read off, so the Get that waited for it reads nothing") {
  // promote_on_read governs Gets; a Prefetch exists to bring keys up. Before
  // this was so, the Prefetch's read was dropped and the Get that had waited
  // for it read the record a second time (seen from the Dask store's
  // read-ahead: every 64 MiB Get took twice as long).
  GatedSpill s(/*promote_on_read=*/false);
  auto h = s.PrefetchThenGet().get();
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(256 << 10, 0)));
  CHECK(s.gate.reads() == s.reads + 1);
  CHECK(s.e->Stats().tiers[1].hits == s.file_hits + 1);
  CHECK(s.e->TierOf("k0") == 0);
  // A plain Get still does not promote: k1 is read in place and stays below.
  auto h1 = s.e->Get("k1");
  REQUIRE(h1.ok());
  CHECK(HandleEquals(*h1, Bytes(256 << 10, 1)));
  CHECK(s.e->TierOf("k1") == 1);
}
