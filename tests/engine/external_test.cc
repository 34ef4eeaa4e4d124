// Engine::PutExternal: a caller's live object held in the host tier without
// bytes, materialized only when the mover demotes it, released once; a
// failing Materialize keeps it in memory; erase, overwrite and reads racing
// the demotion; a Materialize that blocks (Python's GIL) stalls no other move.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

struct Counts {
  std::atomic<int> materialized{0};
  std::atomic<int> released{0};
  std::atomic<int> scopes{0};       // MaterializeScope calls
  std::atomic<int> scopes_open{0};  // scopes alive now
};

// A live object of `n` bytes (seed): Materialize hands out a copy as two
// buffers; `during` runs inside Materialize (a race, a blocking wait).
class FakeExternal final : public ExternalObject {
 public:
  FakeExternal(size_t n, uint64_t seed, Counts* counts) : bytes_(Bytes(n, seed)), counts_(counts) {}
  ~FakeExternal() override { counts_->released.fetch_add(1); }
  StatusOr<MaterializedObject> Materialize() override {
    counts_->materialized.fetch_add(1);
    if (during) during();
    if (fail) return Status::InvalidArgument("cannot serialize a FakeExternal");
    auto copy = std::make_shared<std::vector<std::byte>>(bytes_);
    MaterializedObject m;
    const size_t head = std::min<size_t>(100, copy->size());
    m.buffers = {std::span<const std::byte>(copy->data(), head),
                 std::span<const std::byte>(copy->data() + head, copy->size() - head)};
    m.owner = std::move(copy);
    return m;
  }
  std::shared_ptr<void> MaterializeScope() override {
    counts_->scopes.fetch_add(1);
    counts_->scopes_open.fetch_add(1);
    Counts* c = counts_;
    return std::shared_ptr<void>(static_cast<void*>(nullptr), [c](void*) { c->scopes_open.fetch_sub(1); });
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

  std::function<void()> during;
  bool fail = false;

 private:
  std::vector<std::byte> bytes_;
  Counts* counts_;
};

// Waits up to 10 s for `done`.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 1000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return done();
}

}  // namespace

TEST_CASE("an external object is held live, accounted, never materialized while it stays in memory") {
  TempDir dir("external");
  auto e = MustOpen(HostFileChain(dir.path(), 4 << 20, 64 << 20));
  Counts c;
  auto obj = std::make_shared<FakeExternal>(64 << 10, 1, &c);
  ExternalObject* raw = obj.get();
  REQUIRE(e->PutExternal("x", 300 << 10, std::move(obj)).ok());
  {
    const EngineStats s = e->Stats();
    const TierStats& host = TierNamed(s, "host");
    CHECK(host.objects == 1);
    CHECK(host.used_bytes == (300 << 10));  // the caller's accounted size, not its bytes
  }
  auto live = e->GetExternal("x");
  REQUIRE(live.ok());
  CHECK(live->get() == raw);  // the object itself
  {
    auto h = e->Get("x");
    REQUIRE(h.ok());
    CHECK(h->num_buffers() == 0);  // no bytes while it is live
  }
  REQUIRE(e->Flush().ok());
  CHECK(c.materialized == 0);
  CHECK(e->GetExternal("nope").status().IsNotFound());
  live = StatusOr<std::shared_ptr<ExternalObject>>(std::shared_ptr<ExternalObject>());
  REQUIRE(e->Erase("x").ok());
  CHECK(c.released == 1);
  CHECK(TierNamed(e->Stats(), "host").used_bytes == 0);
  CHECK(e->PutExternal("big", 8 << 20, std::make_shared<FakeExternal>(10, 2, &c)).IsNoSpace());
  CHECK(c.released == 2);  // refused: released at once
}

TEST_CASE("demotion materializes an external object once, stores its bytes below and releases it") {
  TempDir dir("external");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));  // caller-thread demotion
  Counts c;
  std::vector<std::vector<std::byte>> want;
  for (int i = 0; i < 8; ++i) {  // 8 x 256 KiB accounted into a 1 MiB host tier
    auto obj = std::make_shared<FakeExternal>(50 << 10, 10 + i, &c);
    want.push_back(obj->bytes());
    REQUIRE(e->PutExternal("k" + std::to_string(i), 256 << 10, std::move(obj)).ok());
  }
  REQUIRE(e->Flush().ok());
  const int demoted = c.materialized.load();
  CHECK(demoted >= 4);
  CHECK(c.released == demoted);  // each demoted object let go once its bytes committed
  const EngineStats s = e->Stats();
  CHECK(TierNamed(s, "disk").objects == static_cast<uint64_t>(demoted));
  CHECK(TierNamed(s, "disk").raw_bytes == static_cast<uint64_t>(demoted) * (50 << 10));  // the bytes' size
  CHECK(TierNamed(s, "host").used_bytes == static_cast<uint64_t>(8 - demoted) * (256 << 10));
  CHECK(TierNamed(s, "host").raw_bytes == static_cast<uint64_t>(8 - demoted) * (256 << 10));
  for (int i = 0; i < 8; ++i) {
    const std::string k = "k" + std::to_string(i);
    auto live = e->GetExternal(k);
    REQUIRE(live.ok());
    if (e->TierOf(k) == 1) {
      CHECK(*live == nullptr);  // bytes now
      auto h = e->Get(k);
      REQUIRE(h.ok());
      CHECK(HandleEquals(*h, want[i]));
    } else {
      CHECK(*live != nullptr);
    }
  }
  CHECK(c.materialized == demoted);  // reads never materialize
  e.reset();
  CHECK(c.released == 8);
}

TEST_CASE("a failing Materialize keeps the object in memory, counted, not retried, others move past it") {
  TempDir dir("external");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  Counts c;
  auto bad = std::make_shared<FakeExternal>(10, 1, &c);
  bad->fail = true;
  ExternalObject* raw = bad.get();
  REQUIRE(e->PutExternal("bad", 300 << 10, std::move(bad)).ok());  // the oldest: picked first
  for (int i = 0; i < 6; ++i) REQUIRE(e->Put("p" + std::to_string(i), Bytes(200 << 10, i)).ok());
  REQUIRE(e->Flush().ok());
  REQUIRE(e->Flush().ok());
  CHECK(c.materialized == 1);
  CHECK(c.released == 0);
  CHECK(e->TierOf("bad") == 0);
  auto live = e->GetExternal("bad");
  REQUIRE(live.ok());
  CHECK(live->get() == raw);
  const EngineStats s = e->Stats();
  CHECK(TierNamed(s, "disk").objects >= 2);  // the ordinary objects still spilled
  uint64_t failures = 0;
  for (const auto& b : s.boundaries) failures += b.failures;
  CHECK(failures == 1);
  for (int i = 0; i < 6; ++i) {
    auto h = e->Get("p" + std::to_string(i));
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(200 << 10, i)));
  }
}

TEST_CASE("erase, overwrite or a read racing an external object's demotion: nothing lost, nothing leaked") {
  TempDir dir("external");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  Counts c;
  Engine* eng = e.get();
  SUBCASE("erased while materializing") {
    auto obj = std::make_shared<FakeExternal>(40 << 10, 1, &c);
    obj->during = [eng] { REQUIRE(eng->Erase("x").ok()); };
    REQUIRE(e->PutExternal("x", 900 << 10, std::move(obj)).ok());
    REQUIRE(e->Put("y", Bytes(200 << 10, 2)).ok());  // over the high watermark: demotes x first
    REQUIRE(e->Flush().ok());
    CHECK(c.materialized == 1);
    CHECK_FALSE(e->Contains("x"));
    CHECK(c.released == 1);
    CHECK(TierNamed(e->Stats(), "disk").objects == 0);  // the aborted copy was freed
  }
  SUBCASE("overwritten while materializing") {
    auto obj = std::make_shared<FakeExternal>(40 << 10, 1, &c);
    obj->during = [eng] { REQUIRE(eng->Put("x", Bytes(1000, 7)).ok()); };
    REQUIRE(e->PutExternal("x", 900 << 10, std::move(obj)).ok());
    REQUIRE(e->Put("y", Bytes(200 << 10, 2)).ok());
    REQUIRE(e->Flush().ok());
    CHECK(c.materialized == 1);
    CHECK(c.released == 1);
    auto h = e->Get("x");
    REQUIRE(h.ok());
    CHECK(HandleEquals(*h, Bytes(1000, 7)));  // the newer value won
  }
  SUBCASE("pinned by a reader while materializing") {
    Handle pin;
    auto obj = std::make_shared<FakeExternal>(40 << 10, 1, &c);
    obj->during = [eng, &pin] {
      auto h = eng->Get("x");
      REQUIRE(h.ok());
      pin = std::move(*h);
    };
    REQUIRE(e->PutExternal("x", 900 << 10, std::move(obj)).ok());
    REQUIRE(e->Put("y", Bytes(200 << 10, 2)).ok());
    CHECK(c.materialized == 1);
    CHECK(e->TierOf("x") == 0);  // the move aborted: still live
    auto live = e->GetExternal("x");
    REQUIRE(live.ok());
    CHECK(*live != nullptr);
    CHECK(c.released == 0);
    pin.Release();
  }
}

TEST_CASE("a Materialize that blocks (the GIL) holds up no other move of the background mover") {
  TempDir dir("external");
  auto e = MustOpen(HostFileChain(dir.path(), 2 << 20, 64 << 20), nullptr, /*background=*/true);
  Counts c;
  std::mutex mu;
  std::condition_variable cv;
  bool go = false;
  std::atomic<bool> entered{false};
  auto obj = std::make_shared<FakeExternal>(64 << 10, 1, &c);
  obj->during = [&] {
    entered = true;
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return go; });
  };
  REQUIRE(e->PutExternal("x", 512 << 10, std::move(obj)).ok());  // the oldest: in the first batch
  for (int i = 0; i < 16; ++i) REQUIRE(e->Put("p" + std::to_string(i), Bytes(128 << 10, i)).ok());
  CHECK(Eventually([&] { return entered.load(); }));
  // While x's Materialize waits, ordinary objects keep moving to the file tier.
  CHECK(Eventually([&] { return TierNamed(e->Stats(), "disk").objects >= 4; }));
  CHECK(e->TierOf("x") == 0);
  {
    std::lock_guard<std::mutex> l(mu);
    go = true;
  }
  cv.notify_all();
  REQUIRE(e->Flush().ok());
  CHECK(c.materialized == 1);
  CHECK(e->TierOf("x") == 1);
  CHECK(c.released == 1);
  auto h = e->Get("x");
  REQUIRE(h.ok());
  CHECK(HandleEquals(*h, Bytes(64 << 10, 1)));
}

TEST_CASE("a batch of external objects is materialized under one MaterializeScope") {
  TempDir dir("external");
  auto e = MustOpen(HostFileChain(dir.path(), 1 << 20, 64 << 20));
  Counts c;
  std::atomic<int> outside{0};  // Materialize calls with no scope open
  for (int i = 0; i < 64; ++i) {  // 64 x 32 KiB accounted: batches of several objects
    auto obj = std::make_shared<FakeExternal>(1000, i, &c);
    obj->during = [&] {
      if (c.scopes_open == 0) outside.fetch_add(1);
    };
    REQUIRE(e->PutExternal("k" + std::to_string(i), 32 << 10, std::move(obj)).ok());
  }
  REQUIRE(e->Flush().ok());
  CHECK(c.materialized >= 16);
  CHECK(outside == 0);
  CHECK(c.scopes_open == 0);
  CHECK(c.scopes >= 1);
  CHECK(c.scopes < c.materialized);  // one per batch, not one per object
}
