// Placement's admission rules through the engine: a tier's max_object_size
// sends larger objects further down (Put, demotion, promotion alike), and a
// file tier's min_free keeps each path's reserved free space; both keys in
// the schema and the validator.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "../config/config_test_util.h"
#include "engine_test_util.h"
#include "spillway/external.h"
#include "spillway/file_io.h"
#include "tiers/file_tier.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

// Reports a filesystem of `total` bytes with `free` bytes free.
class FakeSpaceIo : public FileIoWrapper {
 public:
  explicit FakeSpaceIo(FileIo* t) : FileIoWrapper(t) {}
  StatusOr<FsSpace> SpaceOf(const std::string&) override {
    FsSpace s;
    s.total_bytes = total.load();
    s.free_bytes = free.load();
    return s;
  }
  std::atomic<uint64_t> total{100ull << 30}, free{100ull << 30};
};

}  // namespace

TEST_CASE("max_object_size and min_free are read, checked and documented in messages") {
  LoadResult r = LoadYaml(HostChain("    max_object_size: 1MiB\n"));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.tiers[0].max_object_bytes == (1u << 20));
  CHECK(FindWarning(LoadYaml(HostChain("    max_object_size: 2GiB\n")), "tiers[0].max_object_size", "larger than the capacity"));
  CHECK(FindError(LoadYaml(HostChain("    max_object_size: lots\n")), "tiers[0].max_object_size", ""));
  TempDir dir("placement");
  LoadResult f = LoadYaml(FileChain(dir.path(), "    min_free: 10GiB\n"));
  REQUIRE_MESSAGE(f.ok(), f.Summary());
  CHECK(f.config.tiers[1].min_free_bytes == (10ull << 30));
  LoadResult pct = LoadYaml(FileChain(dir.path(), "    min_free: 5%\n"));
  REQUIRE_MESSAGE(pct.ok(), pct.Summary());
  CHECK(pct.config.tiers[1].min_free_fraction == doctest::Approx(0.05));
  CHECK(FindError(LoadYaml(FileChain(dir.path(), "    min_free: 100%\n")), "tiers[1].min_free", "no room"));
  CHECK(FindWarning(LoadYaml(HostChain("    min_free: 1GiB\n")), "tiers[0].min_free", "file tiers"));
}

TEST_CASE("min_free beyond any filesystem is an error naming it, and the space check does not wrap") {
  TempDir dir("placement");
  CHECK(FindError(LoadYaml(FileChain(dir.path(), "    min_free: 18446744073709551615\n")), "tiers[1].min_free",
                  "18446744073709551615 bytes"));
  CHECK(FindError(LoadYaml(FileChain(dir.path(), "    min_free: 9223372036854775808\n")), "tiers[1].min_free",
                  "more than any filesystem"));
  LoadOptions measured = NoMachine();
  measured.check_filesystem = true;  // the filesystem's size is what the warning compares with
  LoadResult largest = LoadYaml(FileChain(dir.path(), "    min_free: 9223372036854775807\n"), measured);
  CHECK_FALSE(FindError(largest, "tiers[1].min_free", ""));
  CHECK(FindWarning(largest, "tiers[1].min_free", "never write there"));

  // Past the validator (a Config built in code): reserve + bytes must not
  // wrap to a small need that 100 GiB free would seem to meet.
  auto base = MakeFileIo();
  FakeSpaceIo io(base.get());
  for (uint64_t reserve : {UINT64_MAX, UINT64_MAX - 4095, uint64_t{INT64_MAX} + 1}) {
    CAPTURE(reserve);
    TierConfig t = FileTierConfig("disk", dir.path() + "/disk", 64 << 20);
    t.min_free_bytes = reserve;
    FileTier tier(t, 0, &io, nullptr);
    REQUIRE(tier.Open().ok());
    CHECK_FALSE(tier.HasDeviceRoom(4096));
    CHECK_FALSE(tier.HasDeviceRoom(1));
  }
  TierConfig t = FileTierConfig("disk", dir.path() + "/disk", 64 << 20);
  t.min_free_bytes = 1ull << 30;
  FileTier tier(t, 0, &io, nullptr);
  REQUIRE(tier.Open().ok());
  CHECK(tier.HasDeviceRoom(4096));
  CHECK_FALSE(tier.HasDeviceRoom(UINT64_MAX));
}

TEST_CASE("an object over a tier's max_object_size skips it on Put and is not promoted into it") {
  TempDir dir("placement");
  Config c = HostFileChain(dir.path(), 4 << 20, 64 << 20);
  c.tiers[0].max_object_bytes = 64 << 10;
  auto e = MustOpen(c);
  REQUIRE(e->Put("small", Bytes(32 << 10, 1)).ok());
  REQUIRE(e->Put("large", Bytes(100 << 10, 2)).ok());
  CHECK(ServingTier(*e, "small") == 0);
  CHECK(ServingTier(*e, "large") == 1);
  CHECK(ServingTier(*e, "large") == 1);  // read, but never promoted into the host tier
  auto h = e->Get("large");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(100 << 10, 2)));
}

// A live object that is never demoted in these tests.
class InertExternal final : public ExternalObject {
 public:
  StatusOr<MaterializedObject> Materialize() override { return Status::InvalidArgument("not in this test"); }
};

TEST_CASE("an adopted or external object over a host tier's max_object_size is not held there") {
  TempDir dir("placement");
  Config c = HostFileChain(dir.path(), 4 << 20, 64 << 20);
  c.tiers[0].max_object_bytes = 64 << 10;
  auto e = MustOpen(c);
  // PutHostAllocation: admitted in place when small, copied down the chain
  // (and released at once) when over the limit.
  std::vector<std::byte> small = Bytes(32 << 10, 3), large = Bytes(100 << 10, 4);
  std::atomic<int> released{0};
  auto release = [&released](const std::byte*) { released.fetch_add(1); };
  REQUIRE(e->PutHostAllocation("small", small.data(), {small.size()}, release).ok());
  REQUIRE(e->PutHostAllocation("large", large.data(), {large.size()}, release).ok());
  CHECK(released == 1);  // the large one: copied, not adopted
  CHECK(ServingTier(*e, "small") == 0);
  CHECK(ServingTier(*e, "large") == 1);
  auto h = e->Get("large");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, large));
  // PutExternal: an external object lives only in a host tier; over the
  // limit of the only one, it is refused and nothing is stored.
  CHECK(e->PutExternal("x-small", 32 << 10, std::make_shared<InertExternal>()).ok());
  CHECK(e->PutExternal("x-large", 100 << 10, std::make_shared<InertExternal>()).IsNoSpace());
  CHECK(e->Contains("x-small"));
  CHECK_FALSE(e->Contains("x-large"));
}

TEST_CASE("a read promotes past a host tier whose max_object_size it exceeds, into the next host tier") {
  TempDir dir("placement");
  Config c = HostFileChain(dir.path(), 4 << 20, 64 << 20);
  c.tiers[0].max_object_bytes = 64 << 10;
  c.tiers.insert(c.tiers.begin() + 1, HostTierConfig("host2", 1 << 20));
  auto e = MustOpen(c);
  // 20 x 100 KiB: past host (over its limit), through host2 (1 MiB) into the file tier.
  for (int i = 0; i < 20; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  REQUIRE(e->Flush().ok());
  CHECK(e->Stats().tiers[0].objects == 0);
  // k0, the oldest, was demoted first. Keep only it (reading the others
  // would promote them), so host2 has room for it.
  for (int i = 1; i < 20; ++i) REQUIRE(e->Erase("k" + std::to_string(i)).ok());
  REQUIRE(e->Flush().ok());
  REQUIRE(e->Stats().tiers[1].objects == 0);
  CHECK(ServingTier(*e, "k0") == 2);  // read from the file tier, promoted ...
  CHECK(ServingTier(*e, "k0") == 1);  // ... into host2, not refused at host
  auto h = e->Get("k0");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(100 << 10, 0)));
}

TEST_CASE("a demotion skips a tier below whose max_object_size the object exceeds") {
  TempDir dir("placement");
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  TierConfig second = HostTierConfig("host2", 8 << 20);
  second.max_object_bytes = 64 << 10;
  c.tiers.insert(c.tiers.begin() + 1, second);
  auto e = MustOpen(c);
  for (int i = 0; i < 20; ++i) REQUIRE(e->Put("k" + std::to_string(i), Bytes(100 << 10, i)).ok());
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.tiers[1].objects == 0);  // every object is over host2's limit
  CHECK(s.tiers[2].objects > 0);
  for (int i = 0; i < 20; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(100 << 10, i)));
  }
}

TEST_CASE("min_free: a file tier whose path is at its reserve takes no more, and takes again when space returns") {
  TempDir dir("placement");
  auto base = MakeFileIo();
  FakeSpaceIo io(base.get());
  Config c;
  c.source = "<test>";
  c.tiers.push_back(FileTierConfig("disk", dir.path() + "/disk", 64 << 20));
  c.tiers[0].min_free_bytes = 1ull << 30;
  EngineOptions o;
  o.file_io = &io;
  o.background_mover = false;
  auto opened = Engine::Open(c, o);
  REQUIRE(opened.ok());
  auto& e = *opened;
  REQUIRE(e->Put("a", Bytes(100 << 10, 1)).ok());
  io.free = (1ull << 30) + (50 << 10);  // less than the reserve plus one more object
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the measurement interval
  Status st = e->Put("b", Bytes(100 << 10, 2));
  CHECK(st.IsNoSpace());
  CHECK_FALSE(e->Contains("b"));
  io.free = 2ull << 30;
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the measurement interval
  REQUIRE(e->Put("b", Bytes(100 << 10, 2)).ok());
  auto h = e->Get("a");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(100 << 10, 1)));
}
