// Engine rules over a host -> file chain: placement, NoSpace, watermark
// demotion in LRU order, backpressure, pinning, verified promotion, erase and
// space reclamation.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engine_test_util.h"
#include "spillway/file_io.h"

using namespace spillway;
using namespace spillway::testing;


TEST_CASE("put and get round trip, multi-buffer, arbitrary key bytes") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  std::vector<std::byte> a = Bytes(100, 1), b = Bytes(0, 2), c = Bytes(5000, 3);
  std::span<const std::byte> parts[3] = {a, b, c};
  std::string key("k\0ey/../x", 9);
  REQUIRE(e->Put(key, parts).ok());
  CHECK(e->Contains(key));
  auto h = e->Get(key);
  REQUIRE(h.ok());
  REQUIRE(h->num_buffers() == 3);
  CHECK(h->buffer(1).size() == 0);
  CHECK(std::memcmp(h->buffer(0).data(), a.data(), a.size()) == 0);
  CHECK(std::memcmp(h->buffer(2).data(), c.data(), c.size()) == 0);
  CHECK(e->Get("missing").status().IsNotFound());
}

TEST_CASE("ListKeys reports every stored key with its tier and size, and none erased") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  CHECK(e->ListKeys().empty());
  std::vector<std::byte> small = Bytes(100, 1), large = Bytes(2 << 20, 2);
  std::string nul_key("a\0b", 3);
  REQUIRE(e->Put(nul_key, small).ok());
  REQUIRE(e->Put("large", large).ok());  // larger than the host tier: in the file tier
  REQUIRE(e->Put("gone", small).ok());
  REQUIRE(e->Erase("gone").ok());
  std::vector<KeyInfo> keys = e->ListKeys();
  std::sort(keys.begin(), keys.end(), [](const KeyInfo& a, const KeyInfo& b) { return a.key < b.key; });
  REQUIRE(keys.size() == 2);
  CHECK(keys[0].key == nul_key);
  CHECK(keys[0].tier == 0);
  CHECK(keys[0].raw_bytes == 100);
  CHECK(keys[1].key == "large");
  CHECK(keys[1].tier == 1);
  CHECK(keys[1].raw_bytes == large.size());
}

TEST_CASE("an object larger than the host tier goes to the file tier, too large for all is NoSpace") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 8 << 20));
  auto big = Bytes(2 << 20, 4);
  REQUIRE(e->Put("big", big).ok());
  CHECK(TierNamed(e->Stats(), "disk").objects == 1);
  CHECK(TierNamed(e->Stats(), "host").objects == 0);
  auto huge = Bytes(9 << 20, 5);
  Status st = e->Put("huge", huge);
  CHECK(st.IsNoSpace());
  CHECK_FALSE(e->Contains("huge"));
  CHECK(e->Stats().objects == 1);
  auto h = e->Get("big");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, big));
}

TEST_CASE("pressure demotes least recently used first and keeps the host tier bounded") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < 8; ++i) {
    data.push_back(Bytes(100 << 10, 10 + i));
    REQUIRE(e->Put("k" + std::to_string(i), data.back()).ok());
  }
  // Touch k0 so it becomes most recently used.
  { REQUIRE(e->Get("k0").ok()); }
  for (int i = 8; i < 12; ++i) {
    data.push_back(Bytes(100 << 10, 10 + i));
    REQUIRE(e->Put("k" + std::to_string(i), data.back()).ok());
    CHECK(e->Stats().tiers[0].used_bytes <= (1u << 20));
  }
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (1 << 20)));
  CHECK(s.tiers[1].objects > 0);
  CHECK(s.tiers[0].demotions_out == s.tiers[1].demotions_in);
  // k1 (least recently used) left the host tier before k0 (touched).
  CHECK(ServingTier(*e, "k0") == 0);
  CHECK(ServingTier(*e, "k1") == 1);
  for (int i = 0; i < 12; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, data[i]));
  }
}

TEST_CASE("the background mover brings a tier under its low watermark") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 4 << 20, 64 << 20), nullptr, /*background=*/true);
  for (int i = 0; i < 39; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes <= static_cast<uint64_t>(0.90 * (4 << 20)));
  CHECK(s.tiers[0].objects + s.tiers[1].objects == 39);
}

TEST_CASE("pinned objects are never moved, puts fall through when the host tier is all pinned") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  std::vector<Handle> pins;
  for (int i = 0; i < 9; ++i) {
    REQUIRE(e->Put("p" + std::to_string(i), Bytes(100 << 10, i)).ok());
    auto h = e->Get("p" + std::to_string(i));
    REQUIRE(h.ok());
    pins.push_back(std::move(*h));
  }
  for (int i = 0; i < 20; ++i) REQUIRE(e->Put("x" + std::to_string(i), Bytes(100 << 10, 100 + i)).ok());
  REQUIRE(e->Flush().ok());
  for (int i = 0; i < 9; ++i) CHECK(ServingTier(*e, "p" + std::to_string(i)) == 0);
  CHECK(e->Stats().tiers[0].pinned_bytes == 9u * (100 << 10));
  pins.clear();
  CHECK(e->Stats().tiers[0].pinned_bytes == 0);
}

TEST_CASE("a handle keeps bytes valid after erase and overwrite") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  auto v1 = Bytes(1000, 1);
  REQUIRE(e->Put("k", v1).ok());
  auto h = e->Get("k");
  REQUIRE(h.ok());
  REQUIRE(e->Put("k", Bytes(2000, 2)).ok());
  REQUIRE(e->Erase("k").ok());
  CHECK(HandleEquals(*h, v1));
  CHECK(e->Erase("k").IsNotFound());
  const uint64_t used_pinned = e->Stats().tiers[0].used_bytes;
  CHECK(used_pinned == 1000);
  h->Release();
  CHECK(e->Stats().tiers[0].used_bytes == 0);
}

TEST_CASE("get from the file tier verifies, decodes and promotes") {
  for (CodecKind codec : {CodecKind::kNone, CodecKind::kZstd, CodecKind::kLz4}) {
    CAPTURE(CodecKindName(codec));
    TempDir dir("eng");
    auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20, codec));
    std::vector<std::vector<std::byte>> data;
    for (int i = 0; i < 20; ++i) {
      data.push_back(i % 2 ? CompressibleBytes(200 << 10, i) : Bytes(200 << 10, i));
      REQUIRE(e->Put("k" + std::to_string(i), data.back()).ok());
    }
    REQUIRE(e->Flush().ok());
    auto before = e->Stats();
    CHECK(before.tiers[1].objects > 0);
    auto h = e->Get("k0");
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, data[0]));
    auto after = e->Stats();
    CHECK(after.tiers[0].promotions_in == before.tiers[0].promotions_in + 1);
    CHECK(ServingTier(*e, "k0") == 0);
    if (codec != CodecKind::kNone) CHECK(after.tiers[1].compression_ratio() < 0.9);
  }
}

TEST_CASE("a corrupt record returns Corruption naming tier, file and offset") {
  TempDir dir("eng");
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  c.policy.promote_on_read = false;
  auto e = MustOpen(c);
  REQUIRE(e->Put("big", Bytes(2 << 20, 7)).ok());  // goes straight to disk
  // Flip a byte in the middle of the only segment.
  std::string seg;
  for (auto& p : std::filesystem::directory_iterator(dir.path() + "/disk")) {
    if (p.path().filename().string().rfind("seg-", 0) == 0) seg = p.path();  // not LOCK
  }
  REQUIRE(!seg.empty());
  {
    std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1 << 20);
    char ch;
    f.seekg(1 << 20);
    f.get(ch);
    f.seekp(1 << 20);
    f.put(static_cast<char>(ch ^ 0x5a));
  }
  auto h = e->Get("big");
  REQUIRE_FALSE(h.ok());
  CHECK(h.status().IsCorruption());
  CHECK(h.status().message().find("disk") != std::string::npos);
  CHECK(h.status().message().find("seg-") != std::string::npos);
  CHECK(h.status().message().find("offset") != std::string::npos);
  CHECK(e->Stats().tiers[1].checksum_failures == 1);
}

TEST_CASE("churn 8x the host tier keeps the file tier within capacity and few files") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 16 << 20));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 800; ++i) {
    const std::string key = "c" + std::to_string(rng() % 50);
    REQUIRE(e->Put(key, Bytes(64 << 10 | (rng() % 1000), i)).ok());
    if (i % 7 == 0) (void)e->Erase("c" + std::to_string(rng() % 50));
  }
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.tiers[1].used_bytes <= 16u << 20);
  CHECK(s.tiers[1].disk_bytes <= 24u << 20);
  size_t files = 0;
  for (auto& p : std::filesystem::directory_iterator(dir.path() + "/disk")) (void)p, ++files;
  CHECK(files <= 4);
}

TEST_CASE("concurrent puts, gets and erases from several threads stay consistent") {
  TempDir dir("eng");
  auto e = MustOpen(HostFileChain(dir.path(), 2 << 20, 256 << 20), nullptr, /*background=*/true);
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 400; ++i) {
        const std::string key = "t" + std::to_string(t) + "/" + std::to_string(rng() % 40);
        const uint64_t seed = rng();
        auto v = Bytes(1000 + rng() % 60000, seed);
        if (!e->Put(key, v).ok()) bad++;
        auto h = e->Get(key);
        if (!h.ok() || !HandleEquals(*h, v)) bad++;
        if (rng() % 5 == 0 && !e->Erase(key).ok()) bad++;
        // Other threads' keys: any outcome but wrong sizes is fine.
        auto o = e->Get("t" + std::to_string((t + 1) % 4) + "/" + std::to_string(rng() % 40));
        if (!o.ok() && !o.status().IsNotFound()) bad++;
      }
    });
  }
  for (auto& t : ts) t.join();
  REQUIRE(e->Flush().ok());
  CHECK(bad.load() == 0);
  auto s = e->Stats();
  CHECK(s.tiers[0].objects + s.tiers[1].objects == s.objects);
}

TEST_CASE("a workload 8x the host tier completes with every byte verified and few files") {
  TempDir dir("eng");
  Config c = HostFileChain(dir.path(), 4 << 20, 256 << 20, CodecKind::kLz4);
  auto e = MustOpen(c, nullptr, /*background=*/true);
  const int n = 256;  // 256 x 128 KiB = 32 MiB = 8x the host tier
  for (int i = 0; i < n; ++i) {
    auto v = i % 3 ? Bytes(128 << 10, 1000 + i) : CompressibleBytes(128 << 10, 1000 + i);
    REQUIRE(e->Put("w" + std::to_string(i), v).ok());
  }
  REQUIRE(e->Flush().ok());
  CHECK(e->Stats().tiers[0].used_bytes <= 4u << 20);
  for (int i = 0; i < n; ++i) {
    auto want = i % 3 ? Bytes(128 << 10, 1000 + i) : CompressibleBytes(128 << 10, 1000 + i);
    auto h = e->Get("w" + std::to_string(i));
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(HandleEquals(*h, want));
  }
  size_t files = 0;
  for (auto& p : std::filesystem::directory_iterator(dir.path() + "/disk")) (void)p, ++files;
  CHECK(files <= 8);  // 8 MiB segments: packed, not one file per object
}

namespace {
// Counts hole punches; everything else goes to the real filesystem.
class PunchCounter : public FileIoWrapper {
 public:
  explicit PunchCounter(FileIo* target) : FileIoWrapper(target) {}
  Status PunchHole(const FileHandle& f, uint64_t o, uint64_t l) override {
    punches.fetch_add(1);
    return FileIoWrapper::PunchHole(f, o, l);
  }
  std::atomic<int> punches{0};
};

// An engine over host (256 KiB) -> disk (8 MiB segments) in `dir`, its file I/O counted.
struct CountedEngine {
  explicit CountedEngine(const std::string& dir) : posix(MakePosixFileIo()), io(posix.get()) {
    EngineOptions o;
    o.background_mover = false;
    o.file_io = &io;
    auto e = Engine::Open(HostFileChain(dir, 256 << 10, 64 << 20), o);
    REQUIRE_MESSAGE(e.ok(), e.status().ToString());
    engine = std::move(*e);
  }
  std::unique_ptr<FileIo> posix;
  PunchCounter io;
  std::unique_ptr<Engine> engine;  // declared last: closed before the FileIo goes
};

int SegmentFiles(const std::string& dir) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    n += entry.path().extension() == ".spw" ? 1 : 0;
  }
  return n;
}
}  // namespace

TEST_CASE("closing removes a scratch tier's segment files whole, the active one included, without a punch per record") {
  TempDir dir("eng");
  CountedEngine c(dir.path());
  // 20 MiB of 64 KiB objects: three segments, all but 256 KiB of it spilled.
  for (int i = 0; i < 320; ++i) REQUIRE(c.engine->Put("k" + std::to_string(i), Bytes(64 << 10, i)).ok());
  REQUIRE(c.engine->Flush().ok());
  CHECK(TierNamed(c.engine->Stats(), "disk").objects >= 300);
  CHECK(SegmentFiles(dir.path() + "/disk") >= 3);
  CHECK(c.io.punches.load() == 0);  // nothing freed yet
  c.engine.reset();
  CHECK(SegmentFiles(dir.path() + "/disk") == 0);
  CHECK(c.io.punches.load() == 0);
}

TEST_CASE("a scratch tier still punches a freed record while the engine is open") {
  TempDir dir("eng");
  CountedEngine c(dir.path());
  for (int i = 0; i < 16; ++i) REQUIRE(c.engine->Put("k" + std::to_string(i), Bytes(64 << 10, i)).ok());
  REQUIRE(c.engine->Flush().ok());
  REQUIRE(TierNamed(c.engine->Stats(), "disk").objects > 0);
  REQUIRE(c.engine->Erase("k0").ok());  // the oldest: demoted first
  REQUIRE(c.engine->Flush().ok());      // waits for queued punches
  CHECK(c.io.punches.load() >= 1);
}
