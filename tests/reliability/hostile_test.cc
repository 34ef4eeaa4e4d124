// Hostile input and the filesystem: keys never become file names, files are
// 0600, symlinked or foreign-owned tier directories are refused unless the
// config allows them, crafted record headers cannot make recovery allocate
// unbounded memory, and object bytes that look like records are never
// mistaken for records.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <map>
#include <set>

#include "codecs/codec.h"
#include "reliability_util.h"
#include "tiers/record.h"

using namespace spillway;
using namespace spillway::testing;

// Sanitizers reserve terabytes of address space for shadow memory, so an
// RLIMIT_AS child cannot even start under them (SPILLWAY_SANITIZED, test_util.h).

namespace {

std::vector<std::string> HostileKeys() {
  std::vector<std::string> keys = {
      "/", "..", "../..", "../../escape", "/etc/passwd", "a/b/c", "./seg-00000001.spw", "seg-00000002.spw",
      std::string("nul\0in/the\0middle", 17), std::string(1, '\0'), std::string(300, '/'), "", " ", "\n",
      "\xff\xfe\x80 not utf-8", "con", "*?[]{}$(rm -rf x)"};
  auto junk = RandomBytes(kMaxKeyLen, 64);  // 64 KiB of junk: the longest key allowed
  keys.emplace_back(reinterpret_cast<const char*>(junk.data()), junk.size());
  return keys;
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> s;
  std::error_code ec;
  for (auto& e : std::filesystem::directory_iterator(dir, ec)) s.insert(e.path().filename().string());
  return s;
}

// Record header bytes with a valid header checksum (docs/format.md offsets)
// for the position `seed` stands for (RecordSeed(segment, offset)).
[[maybe_unused]] std::vector<std::byte> CraftHeader(uint32_t key_len, uint32_t num_buffers, uint64_t raw, uint64_t stored,
                                   uint64_t sequence, uint64_t seed) {
  std::vector<std::byte> h(kRecordHeaderSize);
  auto put = [&](size_t off, uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) h[off + i] = std::byte(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(0, kRecordMagic, 4);
  put(4, kRecordVersion, 2);
  put(6, 0, 1);  // codec none
  put(7, 0, 1);
  put(8, key_len, 4);
  put(12, num_buffers, 4);
  put(16, raw, 8);
  put(24, stored, 8);
  put(32, 0, 4);
  put(36, 0, 4);
  put(40, sequence, 8);
  put(48, 0x1234567890abcdefull, 8);
  put(56, Checksum64(h.data(), 56, seed), 8);
  return h;
}

// A complete record for `key` holding `value`, valid at the position `seed`
// stands for (RecordSeed(segment, offset)).
std::vector<std::byte> EncodeOne(const std::string& key, const std::vector<std::byte>& value, uint64_t sequence,
                                 uint64_t seed) {
  CodecConfig cc;
  auto codec = MakeCodec(cc);
  std::span<const std::byte> parts[1] = {value};
  ObjectView v{key, parts};
  std::vector<std::byte> out(MaxRecordSize(key.size(), 1, value.size(), *codec, cc));
  auto n = EncodeRecord(v, sequence, *codec, cc, out, seed);
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

void WriteAt(const std::string& path, uint64_t off, const std::vector<std::byte>& bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(off)) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

struct LimitedRun {
  int status = -1;  // exit code, or 128 + signal
  double seconds = 0;
  std::string output;
};

// Runs `argv` in a child under RLIMIT_AS = `as_bytes`, killed after `seconds`.
[[maybe_unused]] LimitedRun RunLimited(std::vector<std::string> argv, uint64_t as_bytes, unsigned seconds, const std::string& log) {
  LimitedRun r;
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct rlimit rl = {as_bytes, as_bytes};
    setrlimit(RLIMIT_AS, &rl);
    alarm(seconds);
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.output = ReadFile(log);
  return r;
}

}  // namespace

TEST_CASE("hostile keys never become file names and files are created 0600") {
  TempDir dir("rel-keys");
  const std::string root = dir.path() + "/a/b";
  const mode_t old_mask = ::umask(0);  // modes must not depend on the caller's umask
  Config c = RelChain(root, 1024, {1 << 20, 64 << 20});
  c.tiers[2].persistent = true;
  const auto keys = HostileKeys();
  {
    auto e = MustOpen(c);
    for (size_t i = 0; i < keys.size(); ++i) {
      Status st = e->Put(keys[i], RandomBytes(2000 + 300 * i, i));  // larger than the host tier
      REQUIRE_MESSAGE(st.ok(), i << ": " << st.ToString());
    }
    CHECK(e->Put(std::string(kMaxKeyLen + 1, 'k'), RandomBytes(10, 1)).code() == StatusCode::kInvalidArgument);
    for (size_t i = 0; i < keys.size(); ++i) {
      auto h = e->Get(keys[i]);
      REQUIRE_MESSAGE(h.ok(), i << ": " << h.status().ToString());
      CHECK(SameBytes(*h, RandomBytes(2000 + 300 * i, i)));
    }
    REQUIRE(e->Flush().ok());
    CHECK(TierNamed(e->Stats(), "f0").objects + TierNamed(e->Stats(), "f1").objects == keys.size());
  }
  ::umask(old_mask);
  // Only the tier directories, only segment files in them.
  CHECK(Entries(dir.path()) == std::set<std::string>{"a"});
  CHECK(Entries(dir.path() + "/a") == std::set<std::string>{"b"});
  CHECK(Entries(root) == std::set<std::string>{"f0", "f1"});
  uint64_t files = 0;
  for (const std::string& f : AllFiles(root)) {
    struct stat st;
    REQUIRE(::lstat(f.c_str(), &st) == 0);
    const std::string name = f.substr(f.rfind('/') + 1);
    if (S_ISDIR(st.st_mode)) {
      CHECK_MESSAGE((st.st_mode & 022) == 0, f << " is group or world writable");
      continue;
    }
    ++files;
    CHECK_MESSAGE(S_ISREG(st.st_mode), f);
    CHECK_MESSAGE((st.st_mode & 0777) == 0600, f << " has mode " << std::oct << (st.st_mode & 0777));
    if (name == "LOCK" || name == "MANIFEST") continue;  // every tier directory's lock; a persistent tier's manifest
    CHECK_MESSAGE(SegmentFiles(f.substr(0, f.rfind('/'))).size() > 0, f);
    CHECK_MESSAGE((name.size() == 16 && name.rfind("seg-", 0) == 0), "unexpected file " << f);
  }
  CHECK(files > 0);
  // The persistent tier brings every key back, byte for byte.
  auto e = MustOpen(c);
  uint64_t back = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto h = e->Get(keys[i]);
    if (!h.ok()) continue;  // it was on the scratch tier
    ++back;
    CHECK(SameBytes(*h, RandomBytes(2000 + 300 * i, i)));
  }
  CHECK(back == TierNamed(e->Stats(), "f1").objects);
}

TEST_CASE("a symlinked or foreign-owned tier directory is refused unless allow_symlink") {
  TempDir dir("rel-symlink");
  for (bool persistent : {false, true}) {
    CAPTURE(persistent);
    const std::string real = dir.path() + "/real" + std::to_string(persistent);
    const std::string link = dir.path() + "/link" + std::to_string(persistent);
    REQUIRE(std::filesystem::create_directory(real));
    REQUIRE(::chmod(real.c_str(), 0700) == 0);
    REQUIRE(::symlink(real.c_str(), link.c_str()) == 0);
    Config c;
    c.source = "<test>";
    c.tiers.push_back(HostTierConfig("host", 1024));
    c.tiers.push_back(RelFileTier("f0", link, 64 << 20, persistent));
    auto e = Engine::Open(c);
    REQUIRE_FALSE(e.ok());
    CHECK(e.status().code() == StatusCode::kInvalidArgument);
    CHECK_MESSAGE(e.status().message().find("symlink") != std::string::npos, e.status().ToString());
    CHECK(SegmentFiles(real).empty());
    c.tiers[1].allow_symlink = true;
    auto ok = Engine::Open(c);
    REQUIRE_MESSAGE(ok.ok(), ok.status().ToString());
    REQUIRE((*ok)->Put("k", RandomBytes(5000, 1)).ok());
    REQUIRE((*ok)->Flush().ok());
    CHECK_FALSE(SegmentFiles(real).empty());
  }
  if (::geteuid() == 0) {
    const std::string foreign = dir.path() + "/foreign";
    REQUIRE(std::filesystem::create_directory(foreign));
    REQUIRE(::chmod(foreign.c_str(), 0700) == 0);
    REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);
    Config c = RelChain(dir.path(), 1024, {});
    c.tiers.push_back(RelFileTier("f0", foreign, 64 << 20));
    auto e = Engine::Open(c);
    REQUIRE_FALSE(e.ok());
    CHECK_MESSAGE(e.status().message().find("owned") != std::string::npos, e.status().ToString());
    c.tiers[1].allow_symlink = true;
    CHECK(Engine::Open(c).ok());
  } else {
    MESSAGE("not root: foreign-owned directory case skipped");
  }
}

TEST_CASE("a segment name that is a symlink is never followed") {
  for (bool persistent : {false, true}) {
    CAPTURE(persistent);
    TempDir dir("rel-seglink");
    const std::string target = dir.path() + "/precious";
    { std::ofstream(target) << "precious bytes that are not a segment"; }
    const std::string tier = dir.path() + "/f0";
    REQUIRE(std::filesystem::create_directory(tier));
    REQUIRE(::chmod(tier.c_str(), 0700) == 0);
    REQUIRE(::symlink(target.c_str(), (tier + "/seg-00000001.spw").c_str()) == 0);
    Config c = RelChain(dir.path(), 1024, {64 << 20}, persistent);
    // A segment that is not a plain file cannot be verified.
    CHECK(RunCli("inspect " + tier).rc == 2);
    {
      auto e = Engine::Open(c);  // refusing is fine; following is not
      if (e.ok()) {
        REQUIRE((*e)->Put("k", RandomBytes(50000, 2)).ok());
        REQUIRE((*e)->Flush().ok());
      } else {
        MESSAGE("Open refused: " << e.status().ToString());
      }
    }
    CHECK(ReadFile(target) == "precious bytes that are not a segment");
  }
}

TEST_CASE("crafted record sizes: recovery skips them quickly without unbounded allocation") {
#if !defined(SPILLWAY_CRASH_CHILD) || defined(SPILLWAY_SANITIZED)
  SPILLWAY_SKIP_TEST("needs spillway_crash_child and a build without sanitizers (RLIMIT_AS)");
#else
  TempDir dir("rel-crafted");
  const std::string tier = dir.path() + "/t";
  REQUIRE(std::filesystem::create_directory(tier));
  REQUIRE(::chmod(tier.c_str(), 0700) == 0);
  const auto good = RandomBytes(3000, 5);
  SUBCASE("a 1 TiB record in a 64 KiB segment") {
    const std::string seg = tier + "/seg-00000001.spw";
    auto hdr = CraftHeader(5, 1, kMaxObjectBytes, kMaxObjectBytes, 99, RecordSeed(1, 0));
    REQUIRE(ParseRecordHeader(hdr, RecordSeed(1, 0)).ok());
    WriteAt(seg, 0, hdr);
    WriteAt(seg, 4096, EncodeOne("good", good, 1, RecordSeed(1, 4096)));
    WriteAt(seg, (64 << 10) - 1, std::vector<std::byte>(1));
    // Key length, buffer count and chunk fields beyond the limits, checksummed.
    WriteAt(seg, 8192, CraftHeader(kMaxKeyLen + 1, 1, 10, 10, 5, RecordSeed(1, 8192)));
    WriteAt(seg, 8192 + 128, CraftHeader(5, kMaxBuffers + 1, 10, 10, 5, RecordSeed(1, 8192 + 128)));
    WriteAt(seg, 8192 + 256, CraftHeader(5, 1, kMaxObjectBytes + 1, kMaxObjectBytes + 1, 5, RecordSeed(1, 8192 + 256)));
  }
  SUBCASE("a 1.5 GiB record in a sparse 2 GiB segment") {
    const std::string seg = tier + "/seg-00000001.spw";
    WriteAt(seg, 0, CraftHeader(5, 1, 3ull << 29, 3ull << 29, 99, RecordSeed(1, 0)));
    WriteAt(seg, 4096, EncodeOne("good", good, 1, RecordSeed(1, 4096)));
    REQUIRE(::truncate(seg.c_str(), 2ll << 30) == 0);
  }
  SUBCASE("a 100 GiB record in a sparse 200 GiB segment") {
    const std::string seg = tier + "/seg-00000001.spw";
    WriteAt(seg, 0, CraftHeader(5, 1, 100ull << 30, 100ull << 30, 99, RecordSeed(1, 0)));
    WriteAt(seg, 4096, EncodeOne("good", good, 1, RecordSeed(1, 4096)));
    if (::truncate(seg.c_str(), 200ll << 30) != 0) {
      MESSAGE("filesystem refuses a 200 GiB sparse file; case skipped");
      return;
    }
  }
#ifdef SPILLWAY_CLI
  auto i = RunLimited({SPILLWAY_CLI, "inspect", "--summary", tier}, 2ull << 30, 60, dir.path() + "/inspect.log");
  MESSAGE("inspect: status " << i.status << " in " << i.seconds << " s: " << i.output.substr(0, 2000));
  CHECK((i.status == 0 || i.status == 1));
  CHECK(i.output.find("1 records (1 live") != std::string::npos);
  CHECK(i.seconds < 30);
#endif
  auto r = RunLimited({SPILLWAY_CRASH_CHILD, "--open", tier}, 2ull << 30, 60, dir.path() + "/open.log");
  MESSAGE("recovery: status " << r.status << " in " << r.seconds << " s: " << r.output.substr(0, 2000));
  CHECK_MESSAGE(r.status == 0, "recovery under a 2 GiB address-space limit failed (status " << r.status << ")");
  CHECK(r.output.find("objects 1") != std::string::npos);
  CHECK(r.output.find("skipped") != std::string::npos);
  CHECK(r.seconds < 30);
#endif
}

TEST_CASE("a segment packed with crafted headers: recovery finishes and its report stays bounded") {
#if !defined(SPILLWAY_CRASH_CHILD) || defined(SPILLWAY_SANITIZED)
  SPILLWAY_SKIP_TEST("needs spillway_crash_child and a build without sanitizers (RLIMIT_AS)");
#else
  TempDir dir("rel-crafted-many");
  const std::string tier = dir.path() + "/t";
  REQUIRE(std::filesystem::create_directory(tier));
  REQUIRE(::chmod(tier.c_str(), 0700) == 0);
  // 32 MiB of back-to-back headers, each claiming 1 GiB, sealed without a
  // position (seed 0) as a file crafted elsewhere would be: 512 Ki bad records.
  std::vector<std::byte> seg;
  const auto hdr = CraftHeader(5, 1, 1ull << 30, 1ull << 30, 7, 0);
  while (seg.size() < (32u << 20)) seg.insert(seg.end(), hdr.begin(), hdr.end());
  WriteAt(tier + "/seg-00000001.spw", 0, seg);
  auto r = RunLimited({SPILLWAY_CRASH_CHILD, "--open", tier}, 2ull << 30, 120, dir.path() + "/open.log");
  MESSAGE("recovery: status " << r.status << " in " << r.seconds << " s, " << r.output.size() << " bytes of report");
  CHECK(r.status == 0);
  CHECK(r.seconds < 60);
  CHECK_MESSAGE(r.output.size() < (1u << 20), "the skip report grows with the number of bad records ("
                                                   << r.output.size() << " bytes for one segment)");
#endif
}

TEST_CASE("object bytes that contain records are never served as records") {
  // An object's payload may hold anything, including well-formed records of
  // other keys (say, a backup of a segment file). When the object's own
  // record is freed or damaged, recovery must not start reading records in
  // the middle of it.
  for (bool erase : {true, false}) {
    CAPTURE(erase);
    TempDir dir("rel-embedded");
    Config c = RelChain(dir.path(), 1024, {64 << 20}, /*persistent=*/true);
    const std::string snap = dir.path() + "/snap";
    const auto v1 = RandomBytes(8000, 1);
    // The carrier's record starts a slab (4 KiB aligned): header 64 + key 7 +
    // one buffer size 8 = payload at +79. Embedded records go in its last
    // partial block, at 8-byte aligned file offsets, so punching the freed
    // carrier leaves them in place.
    std::vector<std::byte> carrier(3 * 4096 + 1000, std::byte{0x5a});
    // Sealed as records at segment 1 offset 0, as in a backup of a segment.
    const auto evil = EncodeOne("victim", RandomBytes(200, 666), 1ull << 60, RecordSeed(1, 0));
    const auto ghost = EncodeOne("ghost", RandomBytes(100, 667), 1ull << 60, RecordSeed(1, 0));
    const size_t at = 12296 - 79;
    REQUIRE(at + evil.size() + ghost.size() <= carrier.size());
    std::copy(evil.begin(), evil.end(), carrier.begin() + at);
    std::copy(ghost.begin(), ghost.end(), carrier.begin() + at + evil.size());
    {
      auto e = MustOpen(c);
      REQUIRE(e->Put("victim", v1).ok());
      REQUIRE(e->Put("carrier", carrier).ok());
      REQUIRE(e->Flush().ok());
      if (erase) {
        REQUIRE(e->Erase("carrier").ok());
        REQUIRE(e->Flush().ok());
      }
      CopySegments(dir.path() + "/f0", snap);  // as a crash would leave it
    }
    c.tiers.back().paths = {snap};
    if (!erase) {
      // Damage one byte of the carrier's header checksum, as a bad disk would.
      auto recs = ScanRecords(snap);
      REQUIRE(recs.count("carrier"));
      const std::string seg = recs["carrier"].file;
      const uint64_t carrier_at = recs["carrier"].offset;
      auto hdr = ReadFile(seg).substr(carrier_at, 64);
      REQUIRE(hdr.substr(0, 4) == "SPWR");
      std::vector<std::byte> b(1, std::byte(static_cast<uint8_t>(hdr[60]) ^ 0x40));
      WriteAt(seg, carrier_at + 60, b);
    }
    auto e = MustOpen(c);
    auto h = e->Get("victim");
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK_MESSAGE(SameBytes(*h, v1), "victim served with bytes from inside another object");
    CHECK_MESSAGE(!e->Contains("ghost"), "a key that was never put appeared");
  }
}
