// The files of a tier directory that are not records: a FIFO,
// a directory or a link where the engine expects its LOCK or MANIFEST, a
// directory others may write in, segments planted by another user, and the
// LOCK kept by a fork()ed child. Each is refused or skipped by name; none
// blocks, follows or truncates anything.
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "reliability_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

Config Persistent(const std::string& dir) {
  Config c;
  c.source = "<tier dir files test>";
  c.tiers.push_back(RelFileTier("f0", dir, 64 << 20, true));
  return c;
}

// A tier directory of this user, mode 0700, under a fresh TempDir.
std::string MakeTierDir(const TempDir& root) {
  const std::string tier = root.sub("f0");
  REQUIRE(std::filesystem::create_directory(tier));
  REQUIRE(::chmod(tier.c_str(), 0700) == 0);
  return tier;
}

// Runs `fn` in a child process and returns its exit status, or -1 when it
// had not finished after `limit`: the child is then killed (a call that
// blocks forever fails the test instead of hanging it).
template <typename Fn>
int InChild(Fn fn, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(fn());
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int st = 0;
  while (::waitpid(pid, &st, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -2;
}

// The CLI under `timeout`, stdout and stderr together.
CliResult RunCliBounded(const std::string& args) {
  CliResult r;
  const std::string cmd = std::string("timeout -s KILL 20 ") + SPILLWAY_CLI + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace

TEST_CASE("a FIFO named MANIFEST or LOCK fails Open and inspect at once, naming it") {
  for (const std::string name : {"MANIFEST", "LOCK"}) {
    CAPTURE(name);
    TempDir root("rel-fifo-manifest");
    const std::string tier = MakeTierDir(root);
    const std::string fifo = tier + "/" + name;
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    const int rc = InChild([&] {
      auto e = Engine::Open(Persistent(tier));
      if (e.ok()) return 3;
      const std::string msg = e.status().ToString();
      const bool named = msg.find(fifo) != std::string::npos && msg.find("FIFO") != std::string::npos &&
                         msg.find("in use by another spillway engine") == std::string::npos;
      if (!named) std::fprintf(stderr, "%s\n", msg.c_str());
      return named ? 0 : 4;
    });
    CHECK_MESSAGE(rc != -1, "Engine::Open blocked on a FIFO named " << name);
    CHECK_MESSAGE(rc == 0, "Open with a FIFO named " << name << ": child exit " << rc);
  }
  TempDir root("rel-fifo-inspect");
  const std::string tier = MakeTierDir(root);
  REQUIRE(::mkfifo((tier + "/MANIFEST").c_str(), 0600) == 0);
  const CliResult r = RunCliBounded("inspect " + tier);
  CHECK_MESSAGE(r.rc == 2, "inspect exit " << r.rc << ": " << r.out);
  CHECK_MESSAGE(r.out.find("FIFO") != std::string::npos, r.out);
}

TEST_CASE("a LOCK that is a hard link, someone else's file or a directory is refused, touching nothing") {
  TempDir root("rel-lock-link");
  const std::string tier = MakeTierDir(root);
  const std::string victim = root.sub("victim");
  { std::ofstream(victim) << "bytes outside the tier"; }
  REQUIRE(::link(victim.c_str(), (tier + "/LOCK").c_str()) == 0);
  {
    auto e = Engine::Open(Persistent(tier));
    REQUIRE_FALSE(e.ok());
    const std::string msg = e.status().ToString();
    CHECK_MESSAGE(msg.find("hard links") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("in use by another spillway engine") == std::string::npos, msg);
  }
  CHECK(ReadFile(victim) == "bytes outside the tier");
  REQUIRE(::unlink((tier + "/LOCK").c_str()) == 0);

  REQUIRE(std::filesystem::create_directory(tier + "/LOCK"));
  {
    auto e = Engine::Open(Persistent(tier));
    REQUIRE_FALSE(e.ok());
    const std::string msg = e.status().ToString();
    CHECK_MESSAGE(msg.find(tier + "/LOCK") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("in use by another spillway engine") == std::string::npos, msg);
  }
  REQUIRE(::rmdir((tier + "/LOCK").c_str()) == 0);

  REQUIRE(::symlink(victim.c_str(), (tier + "/LOCK").c_str()) == 0);
  {
    auto e = Engine::Open(Persistent(tier));
    REQUIRE_FALSE(e.ok());
    const std::string msg = e.status().ToString();
    CHECK_MESSAGE(msg.find("symlink") != std::string::npos, msg);
    CHECK_MESSAGE(msg.find("in use by another spillway engine") == std::string::npos, msg);
  }
  CHECK(ReadFile(victim) == "bytes outside the tier");
  REQUIRE(::unlink((tier + "/LOCK").c_str()) == 0);

  if (::geteuid() != 0) {
    MESSAGE("not root: the LOCK owned by another user is not staged");
    return;
  }
  { std::ofstream(tier + "/LOCK") << "pid 1\n"; }
  REQUIRE(::chown((tier + "/LOCK").c_str(), 65534, 65534) == 0);
  auto e = Engine::Open(Persistent(tier));
  REQUIRE_FALSE(e.ok());
  const std::string msg = e.status().ToString();
  CHECK_MESSAGE(msg.find("owned by uid 65534") != std::string::npos, msg);
  CHECK_MESSAGE(msg.find("in use by another spillway engine") == std::string::npos, msg);
}

TEST_CASE("a tier directory others can write is refused at Open, with the sticky bit or without") {
  for (mode_t mode : {01777, 0777, 0770, 01730}) {
    CAPTURE(mode);
    TempDir root("rel-open-dir");
    const std::string tier = MakeTierDir(root);
    REQUIRE(::chmod(tier.c_str(), mode) == 0);
    for (bool persistent : {true, false}) {
      CAPTURE(persistent);
      Config c = Persistent(tier);
      c.tiers[0].persistent = persistent;
      auto e = Engine::Open(c);
      REQUIRE_FALSE(e.ok());
      CHECK(e.status().code() == StatusCode::kInvalidArgument);
      CHECK_MESSAGE(e.status().message().find("-writable") != std::string::npos, e.status().ToString());
    }
    REQUIRE(::chmod(tier.c_str(), 0755) == 0);
    CHECK(Engine::Open(Persistent(tier)).ok());
  }
}

TEST_CASE("recovery skips and reports segment files another user owns") {
  if (::geteuid() != 0) SPILLWAY_SKIP_TEST("needs root to make files owned by another user");
  TempDir root("rel-planted");
  const std::string theirs = root.sub("theirs");
  const std::string tier = MakeTierDir(root);
  {
    // The planted records: the same key written many times (a higher
    // sequence than ours), and one key this engine never wrote.
    // Past the first segment, so the planted file keeps the name its
    // records were written for (records are valid only at their position)
    // and ours has no file of that name.
    auto e = MustOpen(Persistent(theirs));
    for (int i = 0; i < 1000; ++i) REQUIRE(e->Put("filler" + std::to_string(i), RandomBytes(5000, i)).ok());
    for (int i = 0; i < 20; ++i) REQUIRE(e->Put("k", RandomBytes(5000, 666)).ok());
    REQUIRE(e->Put("planted", RandomBytes(5000, 667)).ok());
    REQUIRE(e->Flush().ok());
  }
  {
    auto e = MustOpen(Persistent(tier));
    REQUIRE(e->Put("k", RandomBytes(5000, 1)).ok());
    REQUIRE(e->Flush().ok());
  }
  const std::vector<std::string> planted_segs = SegmentFiles(theirs);
  REQUIRE(planted_segs.size() >= 2);
  REQUIRE(SegmentFiles(tier).size() == 1);
  const std::string planted = tier + "/" + std::filesystem::path(planted_segs.back()).filename().string();
  std::filesystem::copy_file(planted_segs.back(), planted);
  REQUIRE(::chown(planted.c_str(), 65534, 65534) == 0);
  std::string log;
  {
    StderrCapture cap(root.sub("recovery.log"));
    auto e = MustOpen(Persistent(tier));
    log = cap.Stop();
    auto h = e->Get("k");
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK_MESSAGE(SameBytes(*h, RandomBytes(5000, 1)), "recovery served a planted record");
    CHECK(e->Get("planted").status().IsNotFound());
  }
  CHECK_MESSAGE(log.find(planted) != std::string::npos, log);
  CHECK_MESSAGE(log.find("owned by uid 65534") != std::string::npos, log);
  CHECK(std::filesystem::exists(planted));  // reported and left alone, not deleted
}

TEST_CASE("closing an engine releases its LOCK even while a forked child lives") {
  TempDir root("rel-fork-lock");
  const std::string tier = root.sub("f0");
  const Config c = Persistent(tier);
  auto e = MustOpen(c);
  REQUIRE(e->Put("k", RandomBytes(5000, 1)).ok());
  int go[2];
  REQUIRE(::pipe(go) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // multiprocessing's fork start method: a child that outlives the engine.
    ::close(go[1]);
    char b;
    (void)::read(go[0], &b, 1);
    ::_exit(0);
  }
  ::close(go[0]);
  REQUIRE(e->Flush().ok());
  e.reset();
  {
    auto again = Engine::Open(c);
    CHECK_MESSAGE(again.ok(), again.status().ToString());
  }
  ::close(go[1]);
  int st = 0;
  ::waitpid(child, &st, 0);
}

TEST_CASE("a forked child does not keep the LOCK of an engine whose process died") {
  TempDir root("rel-fork-orphan");
  const std::string tier = root.sub("f0");
  const Config c = Persistent(tier);
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t opener = ::fork();
  REQUIRE(opener >= 0);
  if (opener == 0) {
    // Opens the engine, forks a long-lived child, and dies without closing.
    ::close(ready[0]);
    auto e = Engine::Open(c);
    if (!e.ok()) ::_exit(3);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      ::sleep(30);
      ::_exit(0);
    }
    const std::string pid = std::to_string(grandchild) + "\n";
    (void)::write(ready[1], pid.data(), pid.size());
    ::_exit(0);
  }
  ::close(ready[1]);
  char buf[32] = {};
  const ssize_t n = ::read(ready[0], buf, sizeof buf - 1);
  ::close(ready[0]);
  int st = 0;
  ::waitpid(opener, &st, 0);
  REQUIRE_MESSAGE(n > 0, "the opener failed: exit " << WEXITSTATUS(st));
  const pid_t grandchild = static_cast<pid_t>(std::atol(buf));
  auto e = Engine::Open(c);
  CHECK_MESSAGE(e.ok(), e.status().ToString());
  if (grandchild > 0) ::kill(grandchild, SIGKILL);
}

TEST_CASE("inspect of a persistent tier emptied by erases reports an empty, clean tier") {
  TempDir root("rel-empty-inspect");
  const std::string tier = root.sub("f0");
  const Config c = Persistent(tier);
  {
    auto e = MustOpen(c);
    for (int i = 0; i < 5; ++i) REQUIRE(e->Put("k" + std::to_string(i), RandomBytes(5000, i)).ok());
    REQUIRE(e->Flush().ok());
    for (int i = 0; i < 5; ++i) REQUIRE(e->Erase("k" + std::to_string(i)).ok());
    REQUIRE(e->Flush().ok());
  }
  MustOpen(c).reset();  // recovery deletes the emptied segments
  REQUIRE(SegmentFiles(tier).empty());
  REQUIRE(std::filesystem::exists(tier + "/MANIFEST"));
  const CliResult r = RunCliBounded("inspect " + tier);
  CHECK_MESSAGE(r.rc == 0, "inspect exit " << r.rc << ": " << r.out);
  CHECK_MESSAGE(r.out.find("clean (empty tier)") != std::string::npos, r.out);
  // A directory with no tier files at all is still no tier.
  const CliResult none = RunCliBounded("inspect " + root.path());
  CHECK(none.rc == 2);
}
