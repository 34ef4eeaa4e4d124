// Power loss, simulated (CrashFileIo, tiers/io/crash_file_io.h): a workload
// of Puts, overwrites, Erases and Gets whose handles are held across later
// operations and Flushes runs on a chain of two persistent file tiers (the
// upper one small, so overwrites land in either tier and objects are demoted
// between them), over two sessions (a clean close and a reopen in between).
// CrashFileIo crashes it before one chosen step; the files are then put back
// as the last syncs left them (every fourth point: as SIGKILL leaves them,
// page cache kept), the chain is reopened, and every key must be in its state
// at the last Flush that returned OK or in a state it took (or a Put tried to
// give it) after that Flush:
//   - nothing acknowledged by a returned Flush is lost,
//   - nothing erased before a returned Flush is served,
//   - no bytes are served but a value put for that key.
// SPILLWAY_POWERLOSS_POINTS crash points (default 200) are spread over the
// steps of a run without a crash; SPILLWAY_POWERLOSS_SEED picks another workload.
#include <doctest/doctest.h>

#include <deque>
#include <optional>
#include <random>

#include "reliability_util.h"
#include "tiers/io/crash_file_io.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

constexpr int kKeys = 10;
constexpr int kOpsPerSession = 70;
constexpr size_t kMaxHeld = 3;

using State = std::optional<uint64_t>;  // a value id, or absent

std::vector<std::byte> Value(uint64_t v) { return RandomBytes(64 + (v * 7919) % 30000, v * 31 + 7); }

std::string Key(int k) { return "pl/" + std::to_string(k); }

uint64_t EnvOr(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 10) : dflt;
}

Config Chain(const std::string& root) {
  Config c;
  c.source = "<power loss test>";
  TierConfig up = RelFileTier("upper", root + "/upper", 96 << 10, /*persistent=*/true);
  TierConfig low = RelFileTier("lower", root + "/lower", 64 << 20, /*persistent=*/true, CodecKind::kLz4);
  up.io.segment_bytes = low.io.segment_bytes = 1 << 20;  // several segments: sealing and deletion
  c.tiers = {up, low};
  return c;
}

struct KeyModel {
  State durable;             // at the last Flush (or clean close) that returned OK
  State current;             // as acknowledged
  std::vector<State> since;  // every state taken or attempted after that Flush
};

// One run of the workload against `io`; the model of what may be on disk.
class Workload {
 public:
  explicit Workload(uint64_t seed) : rng_(seed), keys_(kKeys) {}

  // Both sessions; stops at the crash. False when the engine misbehaved
  // before it (reported with CHECKs).
  void Run(const Config& c, CrashFileIo& io) {
    for (int session = 0; session < 2 && !io.crashed(); ++session) {
      EngineOptions o;
      o.file_io = &io;
      o.background_mover = false;
      auto e = Engine::Open(c, o);
      if (!e.ok()) {
        CHECK_MESSAGE(io.crashed(), "open failed without a crash: " << e.status().ToString());
        return;
      }
      Session(**e, io);
      // A Flush with the handles still held, then a clean close (itself a
      // last Flush) once they are released.
      if (!io.crashed()) {
        Status st = (*e)->Flush();
        if (st.ok()) Flushed();
        else CHECK_MESSAGE(io.crashed(), "Flush failed without a crash: " << st.ToString());
      }
      held_.clear();
      e->reset();
      if (!io.crashed()) Flushed();
    }
  }

  const std::vector<KeyModel>& keys() const { return keys_; }

 private:
  void Flushed() {
    for (KeyModel& k : keys_) {
      k.durable = k.current;
      k.since.clear();
    }
  }

  void Session(Engine& e, CrashFileIo& io) {
    for (int op = 0; op < kOpsPerSession && !io.crashed(); ++op) {
      const int k = static_cast<int>(rng_() % kKeys);
      const int dice = static_cast<int>(rng_() % 100);
      KeyModel& m = keys_[k];
      if (dice < 40) {
        const uint64_t v = ++next_value_;
        const bool ok = e.Put(Key(k), Value(v)).ok();
        m.since.push_back(v);  // a failed Put may still have reached the disk
        if (ok) m.current = v;
        else CHECK_MESSAGE(io.crashed(), "Put failed without a crash");
      } else if (dice < 55) {
        Status st = e.Erase(Key(k));
        if (st.ok()) {
          m.current.reset();
          m.since.push_back(std::nullopt);
        } else {
          CHECK_MESSAGE((st.IsNotFound() && !m.current), Key(k) << ": " << st.ToString());
        }
      } else if (dice < 75) {
        auto h = e.Get(Key(k));
        if (io.crashed()) return;
        if (!m.current) {
          CHECK_MESSAGE(!h.ok(), Key(k) << " erased but served");
          continue;
        }
        REQUIRE_MESSAGE(h.ok(), Key(k) << ": " << h.status().ToString());
        CHECK_MESSAGE(SameBytes(*h, Value(*m.current)), Key(k) << ": wrong bytes before the crash");
        held_.emplace_back(*m.current, std::move(*h));
        if (held_.size() > kMaxHeld) Release();
      } else if (dice < 85) {
        if (!held_.empty()) Release();
      } else {
        Status st = e.Flush();
        if (st.ok()) Flushed();
        else CHECK_MESSAGE(io.crashed(), "Flush failed without a crash: " << st.ToString());
      }
    }
  }

  void Release() {
    CHECK_MESSAGE(SameBytes(held_.front().second, Value(held_.front().first)), "a held handle's bytes changed");
    held_.pop_front();
  }

  std::mt19937_64 rng_;
  std::vector<KeyModel> keys_;
  std::deque<std::pair<uint64_t, Handle>> held_;
  uint64_t next_value_ = 0;
};

// Reopens `c` after the crash and checks every key; "" when all is well.
std::string Verify(const Config& c, const Workload& w) {
  EngineOptions o;
  o.background_mover = false;
  auto e = Engine::Open(c, o);
  if (!e.ok()) return "reopen failed: " + e.status().ToString();
  std::string bad;
  for (int k = 0; k < kKeys; ++k) {
    const KeyModel& m = w.keys()[k];
    std::vector<State> allowed = m.since;
    allowed.push_back(m.durable);
    auto h = (*e)->Get(Key(k));
    auto describe = [&] {
      std::string s = " (durable " + (m.durable ? std::to_string(*m.durable) : "absent") + ", since:";
      for (const State& a : m.since) s += " " + (a ? std::to_string(*a) : "erased");
      return s + ")";
    };
    if (!h.ok()) {
      const bool may_be_absent = std::find(allowed.begin(), allowed.end(), State{}) != allowed.end();
      if (!h.status().IsNotFound()) bad += Key(k) + ": " + h.status().ToString() + "\n";
      else if (!may_be_absent) bad += Key(k) + ": lost" + describe() + "\n";
      continue;
    }
    bool known = false;
    for (const State& a : allowed) known |= a && SameBytes(*h, Value(*a));
    if (!known) {
      bool older = false;
      for (uint64_t v = 1; v <= 1000 && !older; ++v) older = SameBytes(*h, Value(v));
      bad += Key(k) + (m.durable || !m.since.empty() ? std::string(older ? ": stale or resurrected value" : ": wrong bytes")
                                                      : std::string(": resurrected")) + describe() + "\n";
    }
  }
  return bad;
}

}  // namespace

TEST_CASE("power loss at any step: nothing a returned Flush acknowledged is lost, nothing erased comes back") {
  const uint64_t seed = EnvOr("SPILLWAY_POWERLOSS_SEED", 1);
  const uint64_t want_points = EnvOr("SPILLWAY_POWERLOSS_POINTS", 200);
  auto base = MakePosixFileIo();
  uint64_t total_steps = 0;
  {
    TempDir dir("powerloss-dry");
    Config c = Chain(dir.path());
    CrashFileIo io(base.get());
    Workload w(seed);
    w.Run(c, io);
    total_steps = io.steps();
    io.CrashNow();
    REQUIRE(io.LosePower().ok());
    const std::string bad = Verify(c, w);
    CHECK_MESSAGE(bad.empty(), "power loss after the last clean close (no crash before it):\n" << bad);
  }
  REQUIRE(total_steps > 50);
  const uint64_t points = std::min(want_points, total_steps);
  MESSAGE("power loss: seed " << seed << ", " << total_steps << " steps, " << points << " crash points");
  uint64_t failed = 0, killed = 0;
  for (uint64_t p = 0; p < points; ++p) {
    const uint64_t step = p * total_steps / points + (p * 7) % std::max<uint64_t>(1, total_steps / points);
    const bool sigkill = p % 4 == 3;
    TempDir dir("powerloss");
    Config c = Chain(dir.path());
    CrashFileIo io(base.get());
    io.CrashAt(step);
    Workload w(seed);
    std::string log;
    {
      StderrCapture quiet(dir.path() + "/stderr.log");  // failed closes and recovery reports
      w.Run(c, io);
      io.CrashNow();
      REQUIRE((sigkill ? io.KeepPageCache() : io.LosePower()).ok());
      const std::string bad = Verify(c, w);
      log = quiet.Stop();
      if (!bad.empty()) {
        ++failed;
        if (failed <= 5) {
          FAIL_CHECK("crash before step " << step << " of " << total_steps << std::string(sigkill ? " (SIGKILL)" : " (power loss)")
                                          << ", seed " << seed << ":\n" << bad << "stderr:\n" << log.substr(0, 2000));
        }
      }
    }
    killed += sigkill;
  }
  MESSAGE(points << " crash points (" << killed << " as SIGKILL), " << failed << " failed");
  CHECK(failed == 0);
}
