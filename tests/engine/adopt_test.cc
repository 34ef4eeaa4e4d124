// Engine::PutHostAllocation: the caller's host memory adopted without a copy,
// accounted in the host tier, demoted like any object, released exactly once.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

// Caller memory and a count of releases, as the Python module's buffers.
struct Owned {
  std::vector<std::byte> bytes;
  std::atomic<int> releases{0};
  std::atomic<std::thread::id> released_on{};
  explicit Owned(size_t n, uint64_t seed) : bytes(Bytes(n, seed)) {}
  std::function<void(const std::byte*)> Release() {
    return [this](const std::byte* p) {
      CHECK(p == bytes.data());
      released_on = std::this_thread::get_id();
      releases.fetch_add(1);
    };
  }
};

}  // namespace

TEST_CASE("an adopted object is read in place and released once when erased") {
  TempDir dir("adopt");
  Owned o(100 << 10, 1);  // declared first: outlives the engine that adopts it
  auto e = MustOpen(HostFileChain(dir.path(), 4 << 20, 64 << 20));
  REQUIRE(e->PutHostAllocation("a", o.bytes.data(), {1000, (100 << 10) - 1000}, o.Release()).ok());
  const EngineStats stats = e->Stats();  // TierNamed returns a reference into it
  const TierStats& host = TierNamed(stats, "host");
  CHECK(host.objects == 1);
  CHECK(host.used_bytes == (100 << 10));  // accounted like a stored object
  {
    auto h = e->Get("a");
    REQUIRE(h.ok());
    REQUIRE(h->num_buffers() == 2);
    CHECK(h->buffer(0).data() == o.bytes.data());  // no copy
    CHECK(h->buffer(1).data() == o.bytes.data() + 1000);
    REQUIRE(e->Erase("a").ok());
    CHECK(o.releases == 0);  // pinned by h
  }
  CHECK(o.releases == 1);
  CHECK(TierNamed(e->Stats(), "host").used_bytes == 0);
}

TEST_CASE("an adopted object is demoted to the file tier, released after the move, and reads back") {
  TempDir dir("adopt");
  std::vector<std::unique_ptr<Owned>> objs;  // declared first: outlives the engine
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  for (int i = 0; i < 8; ++i) {  // 8 x 256 KiB into a 1 MiB host tier
    objs.push_back(std::make_unique<Owned>(256 << 10, 10 + i));
    REQUIRE(e->PutHostAllocation("k" + std::to_string(i), objs.back()->bytes.data(), {256 << 10},
                                 objs.back()->Release()).ok());
  }
  REQUIRE(e->Flush().ok());
  int released = 0;
  for (auto& o : objs) released += o->releases;
  CHECK(released >= 4);  // the demoted ones went to disk and let their memory go
  CHECK(TierNamed(e->Stats(), "disk").objects == static_cast<uint64_t>(released));
  for (int i = 0; i < 8; ++i) {
    auto h = e->Get("k" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, objs[i]->bytes));
  }
  e.reset();
  for (auto& o : objs) CHECK(o->releases == 1);
}

TEST_CASE("replacing an adopted object releases it, no host room copies it down and releases at once") {
  TempDir dir("adopt");
  Owned a(1000, 1), b(1000, 2), big(2 << 20, 3);  // declared first: outlive the engine
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  REQUIRE(e->PutHostAllocation("k", a.bytes.data(), {1000}, a.Release()).ok());
  REQUIRE(e->PutHostAllocation("k", b.bytes.data(), {1000}, b.Release()).ok());
  CHECK(a.releases == 1);
  CHECK(b.releases == 0);
  REQUIRE(e->PutHostAllocation("big", big.bytes.data(), {2 << 20}, big.Release()).ok());
  CHECK(big.releases == 1);  // larger than the host tier: stored as a copy in the file tier
  CHECK(TierNamed(e->Stats(), "disk").objects == 1);
  {
    auto h = e->Get("big");
    REQUIRE(h.ok());
    CHECK(h->buffer(0).data() != big.bytes.data());
    CHECK(HandleEquals(*h, big.bytes));
  }  // a Handle must not outlive its engine
  CHECK(e->PutHostAllocation(std::string(1 << 20, 'x'), a.bytes.data(), {1000}, a.Release()).code() == StatusCode::kInvalidArgument);
  CHECK(a.releases == 2);  // released on failure too
  e.reset();
  CHECK(b.releases == 1);  // the engine's close releases what it still holds
}

TEST_CASE("the background mover releases adopted memory on its own thread") {
  TempDir dir("adopt");
  // Declared before the engine, so that the memory outlives it: at the end of
  // the case the engine releases what its host tier still holds, on close.
  std::vector<std::unique_ptr<Owned>> objs;
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20), nullptr, /*background=*/true);
  for (int i = 0; i < 16; ++i) {
    objs.push_back(std::make_unique<Owned>(128 << 10, 50 + i));
    REQUIRE(e->PutHostAllocation("m" + std::to_string(i), objs.back()->bytes.data(), {128 << 10},
                                 objs.back()->Release()).ok());
  }
  REQUIRE(e->Flush().ok());
  bool other_thread = false;
  for (auto& o : objs) {
    if (o->releases == 1 && o->released_on.load() != std::this_thread::get_id()) other_thread = true;
  }
  CHECK(other_thread);
  for (int i = 0; i < 16; ++i) {
    auto h = e->Get("m" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, objs[i]->bytes));
  }
  e.reset();
  for (auto& o : objs) CHECK(o->releases == 1);
}

TEST_CASE("TierOf follows an object down the chain") {
  TempDir dir("locate");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  CHECK(e->TierOf("absent") == -1);
  auto small = Bytes(1000, 1), big = Bytes(2 << 20, 2);
  REQUIRE(e->Put("small", small).ok());
  REQUIRE(e->Put("big", big).ok());  // larger than the host tier
  CHECK(e->TierOf("small") == 0);
  CHECK(e->TierOf("big") == 1);
  for (int i = 0; i < 12; ++i) REQUIRE(e->Put("fill" + std::to_string(i), Bytes(100 << 10, 10 + i)).ok());
  REQUIRE(e->Flush().ok());
  CHECK(e->TierOf("small") == 1);  // least recently used: demoted
  REQUIRE(e->Erase("small").ok());
  CHECK(e->TierOf("small") == -1);
}
