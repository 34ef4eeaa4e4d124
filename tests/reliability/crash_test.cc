// Crash test: a child (spillway_crash_child) writes to a persistent tier and
// records what each Flush made durable; the parent SIGKILLs it at a random
// moment, reopens the same directory in-process and checks that
//   - every object made durable before the kill comes back byte-identical
//     (or as a newer version the child was writing when it died),
//   - nothing torn or wrong is served: any key that returns holds the exact
//     bytes of a version that was written to it,
// then lets the next child continue on the same directory, so recovery of
// recovered data (sequence numbers, freed stale records) is exercised too.
//
// Two modes: a fresh directory per kill point (the crash alone), and one
// directory across all restarts (recovery of recovered data too).
// SPILLWAY_CRASH_ITERATIONS sets the number of kill points of each (default
// 20; the long mode uses 200), SPILLWAY_CRASH_SEED the first run seed.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "crash_workload.h"
#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : fallback;
}

// The last complete line of ROOT/durable, or 0.
uint64_t DurableOps(const std::string& root) {
  std::ifstream in(root + "/durable", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (all.empty()) return 0;
  size_t end = all.rfind('\n');
  if (end == std::string::npos) return 0;
  size_t start = all.rfind('\n', end == 0 ? 0 : end - 1);
  start = (start == std::string::npos || start >= end) ? 0 : start + 1;
  return std::strtoull(all.substr(start, end - start).c_str(), nullptr, 10);
}

// Index of the op the child was running when it died (or the last started).
std::optional<uint64_t> StartedOp(const std::string& root) {
  std::ifstream in(root + "/started", std::ios::binary);
  uint64_t i = 0;
  if (!in.read(reinterpret_cast<char*>(&i), sizeof(i))) return std::nullopt;
  return i;
}

// One version of a key: which op wrote it (run seed and index), or absent.
struct Version {
  bool present = false;
  crash::Op op;
  uint64_t run_seed = 0;  // the run that wrote it
  uint64_t index = 0;     // its op index in that run
};

bool Matches(const Handle& h, const crash::Op& op) {
  if (h.size() != op.size || h.num_buffers() != op.buffers) return false;
  uint64_t off = 0;
  for (size_t i = 0; i < h.num_buffers(); ++i) {
    auto b = h.buffer(i);
    if (!CheckPattern(op.content, off, b)) return false;
    off += b.size();
  }
  return true;
}

std::string Describe(const Version& v) {
  if (!v.present) return "absent";
  return "op " + std::to_string(v.index) + " of run " + std::to_string(v.run_seed) + " (content " +
         std::to_string(v.op.content) + ", " + std::to_string(v.op.size) + " bytes)";
}

// Runs the kill/reopen/verify loop. `fresh`: a new directory per kill point,
// so a failure cannot come from an earlier session (the crash alone);
// otherwise every child continues on the parent's verified directory.
void RunCrashTest(bool fresh) {
#ifndef SPILLWAY_CRASH_CHILD
  MESSAGE("spillway_crash_child not built");
  return;
#else
  const uint64_t iterations = EnvU64("SPILLWAY_CRASH_ITERATIONS", 20);
  const uint64_t first_seed = EnvU64("SPILLWAY_CRASH_SEED", 1) + (fresh ? 500 : 0);
  auto dir = std::make_unique<TempDir>("rel-crash");
  std::string root = dir->path();
  std::mt19937_64 rng(first_seed);
  // What the parent last verified on disk, per key.
  std::map<std::string, Version> baseline;
  uint64_t durable_checked = 0, newer_seen = 0, killed = 0, finished = 0;
  for (uint64_t it = 0; it < iterations; ++it) {
    const uint64_t run_seed = first_seed * 1000 + it;
    const std::string codec = (it % 3 == 0) ? "none" : (it % 3 == 1 ? "zstd" : "lz4");
    if (fresh && it > 0) {
      dir = std::make_unique<TempDir>("rel-crash");
      root = dir->path();
      baseline.clear();
    }
    CAPTURE(run_seed);
    CAPTURE(codec);
    std::filesystem::remove(root + "/durable");
    std::filesystem::remove(root + "/started");
    const std::string seed_arg = std::to_string(run_seed);
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      execl(SPILLWAY_CRASH_CHILD, SPILLWAY_CRASH_CHILD, root.c_str(), seed_arg.c_str(), codec.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    const int delay_ms = 20 + static_cast<int>(rng() % 281);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGKILL);
    int wstatus = 0;
    REQUIRE(waitpid(pid, &wstatus, 0) == pid);
    if (WIFEXITED(wstatus)) {
      // It finished or failed before the kill.
      REQUIRE_MESSAGE(WEXITSTATUS(wstatus) == 0, "crash child exited with " << WEXITSTATUS(wstatus));
      ++finished;
    } else {
      REQUIRE(WIFSIGNALED(wstatus));
      ++killed;
    }
    const uint64_t durable = DurableOps(root);
    const std::optional<uint64_t> started = StartedOp(root);

    // Acceptable versions per key: the last durable one, plus any written
    // after the last Flush (those may or may not have reached the disk).
    std::map<std::string, Version> must = baseline;
    std::map<std::string, std::vector<Version>> maybe;
    if (started) {
      for (uint64_t i = 0; i <= *started; ++i) {
        crash::Op op = crash::OpAt(run_seed, i);
        if (i < durable) {
          must[op.key] = Version{true, op, run_seed, i};
        } else {
          maybe[op.key].push_back(Version{true, op, run_seed, i});
        }
      }
    }
    StderrCapture quiet(root + "/recovery.log");  // skipped torn records are expected
    auto e = MustOpen(crash::CrashConfig(root));
    quiet.Stop();
    for (uint64_t k = 0; k < crash::kKeys; ++k) {
      const std::string key = "crash/" + std::to_string(k);
      CAPTURE(key);
      const Version want = must.count(key) ? must[key] : Version{};
      auto h = e->Get(key);
      if (!h.ok()) {
        REQUIRE_MESSAGE(h.status().IsNotFound(), "run seed " << run_seed << " (" << delay_ms
                                                              << " ms): " << h.status().ToString());
        // Absent is right only when no version was ever durable.
        CHECK_MESSAGE(!want.present, "durable object lost: " << key << " wanted " << Describe(want)
                                                             << " (run seed " << run_seed << ", durable ops "
                                                             << durable << ")");
        baseline[key] = Version{};
        continue;
      }
      Version got;
      if (want.present && Matches(*h, want.op)) {
        got = want;
        ++durable_checked;
      } else {
        for (const Version& v : maybe[key]) {
          if (Matches(*h, v.op)) {
            got = v;
            ++newer_seen;
          }
        }
      }
      CHECK_MESSAGE(got.present, "wrong bytes for " << key << ": " << h->size() << " bytes match neither the durable "
                                                    << Describe(want) << " nor a newer version (run seed " << run_seed
                                                    << ", durable ops " << durable << ")");
      baseline[key] = got.present ? got : want;
    }
    // Nothing but the workload's keys.
    CHECK(e->Stats().objects <= crash::kKeys);
  }
  MESSAGE(iterations << " kill points: " << killed << " killed, " << finished << " finished; " << durable_checked
                     << " durable objects verified, " << newer_seen << " newer versions seen");
  CHECK(killed > 0);
#endif
}

}  // namespace

TEST_CASE("SIGKILL at random moments, a fresh directory each time: durable objects survive, nothing torn is served") {
  RunCrashTest(/*fresh=*/true);
}

TEST_CASE("SIGKILL at random moments, one directory across restarts: durable objects survive, nothing torn is served") {
  RunCrashTest(/*fresh=*/false);
}
