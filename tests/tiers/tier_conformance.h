// The Tier conformance suite (tensorstore's kvstore/test_util): every tier
// kind, each codec and each FileIo, must pass the same cases. A test file
// registers a tier with
//
//   SPILLWAY_TIER_CONFORMANCE("file/zstd/memory", MakeMyTier)
//
// where MakeMyTier(const TierSpec&) returns a TierUnderTest, or one whose
// `skip` says why the tier cannot run here (no GPU): every case then skips
// visibly. Cases: round trips of multi-buffer objects (empty buffers, sizes
// around kIoAlign, one larger than a file tier's slab), erase, capacity
// accounting and a full device (NoSpace), corruption detection where the tier
// stores bytes of its own, concurrent use, and the counters. Each kind's
// config round trip (YAML -> TierConfig -> JSON -> the same) is in
// tier_config_roundtrip_test.cc.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "spillway/file_io.h"
#include "test_util.h"
#include "tiers/tier.h"

namespace spillway::testing {

struct TierSpec {
  uint64_t capacity_bytes = 64ull << 20;
  // When non-zero, the device behind the tier holds only this many bytes, so
  // a Store fails with NoSpace; factories that cannot bound it set
  // TierUnderTest::device_bounded = false.
  uint64_t device_bytes = 0;
};

struct TierUnderTest {
  std::string skip;  // non-empty: the tier cannot run here, and why
  // What the tier uses (FileIo, directories); declared first, so released after the tier.
  std::vector<std::shared_ptr<void>> keep;
  std::unique_ptr<Tier> tier;
  bool device_bounded = false;  // honours TierSpec::device_bytes
  // Damages one byte of a stored object in place; null where the tier keeps
  // no bytes of its own to damage (memory tiers hold the caller's copy).
  std::function<Status(const Location&)> corrupt;
};

using TierMaker = std::function<TierUnderTest(const TierSpec&)>;

// An object with its buffers; view() points into them.
struct TestObject {
  std::string key;
  std::vector<std::vector<std::byte>> bufs;
  std::vector<std::span<const std::byte>> spans;
  ObjectView view() {
    spans.assign(bufs.begin(), bufs.end());
    return ObjectView{key, spans};
  }
  std::vector<std::byte> concat() const {
    std::vector<std::byte> all;
    for (const auto& b : bufs) all.insert(all.end(), b.begin(), b.end());
    return all;
  }
  std::vector<uint64_t> sizes() const {
    std::vector<uint64_t> s;
    for (const auto& b : bufs) s.push_back(b.size());
    return s;
  }
};

inline TestObject MakeTestObject(std::string key, const std::vector<size_t>& sizes, uint64_t seed) {
  TestObject o;
  o.key = std::move(key);
  for (size_t i = 0; i < sizes.size(); ++i) {
    // Half the buffers compress well, so the codecs take both paths.
    o.bufs.push_back(i % 2 ? CompressibleBytes(sizes[i], seed * 31 + i) : RandomBytes(sizes[i], seed * 31 + i));
  }
  return o;
}

// Reserves and stores `objs` in one batch.
inline StatusOr<std::vector<Location>> StoreObjects(Tier& tier, std::vector<TestObject>& objs) {
  std::vector<ObjectView> views;
  for (TestObject& o : objs) {
    views.push_back(o.view());
    if (!tier.TryReserve(tier.ReserveEstimate(views.back()), /*ignore_full_mark=*/true)) {
      return Status::NoSpace("test: no room to reserve " + o.key);
    }
  }
  auto locs = tier.Store(views);
  if (!locs.ok()) {
    for (const ObjectView& v : views) tier.Unreserve(tier.ReserveEstimate(v));
  }
  return locs;
}

// Loads `loc` and compares bytes and buffer layout with `o`; false on a mismatch.
inline bool LoadsBack(Tier& tier, const Location& loc, const TestObject& o, std::string* why) {
  auto blob = tier.Load(loc, o.key);
  if (!blob.ok()) return *why = blob.status().ToString(), false;
  const auto want = o.concat();
  if ((*blob)->size() != want.size()) return *why = "size " + std::to_string((*blob)->size()), false;
  if (!want.empty() && std::memcmp((*blob)->data(), want.data(), want.size()) != 0) return *why = "bytes differ", false;
  const std::vector<uint64_t> sizes = (*blob)->buffer_sizes(), want_sizes = o.sizes();
  // One buffer has one layout, whether the tier keeps a size list or not.
  if (want_sizes.size() > 1 && sizes != want_sizes) return *why = "buffer layout differs", false;
  return true;
}

inline TierUnderTest MakeOrSkip(const TierMaker& make, const TierSpec& spec) {
  TierUnderTest t = make(spec);
  if (t.skip.empty()) REQUIRE_MESSAGE(t.tier != nullptr, "the factory made no tier");
  return t;
}

#define SPILLWAY_TIER_OPEN(var, make, spec)                        \
  ::spillway::testing::TierUnderTest var = ::spillway::testing::MakeOrSkip(make, spec); \
  if (!var.skip.empty()) SPILLWAY_SKIP_TEST(var.skip);             \
  Tier& tier = *var.tier

inline void TierRoundTrip(const TierMaker& make) {
  SPILLWAY_TIER_OPEN(t, make, TierSpec{});
  std::vector<TestObject> objs;
  objs.push_back(MakeTestObject("multi", {1000, 0, 5000, 1}, 1));
  objs.push_back(MakeTestObject("one-empty-buffer", {0}, 2));
  objs.push_back(MakeTestObject("empty-among-full", {0, 0, 300, 0}, 3));
  for (size_t n : {size_t{1}, kIoAlign - 1, kIoAlign, kIoAlign + 1, 2 * kIoAlign - 7, 3 * kIoAlign}) {
    objs.push_back(MakeTestObject("size-" + std::to_string(n), {n}, n));
    objs.push_back(MakeTestObject("split-" + std::to_string(n), {n / 2, n - n / 2}, n + 1));
  }
  objs.push_back(MakeTestObject(std::string(300, 'k'), {70000}, 4));   // a long key
  objs.push_back(MakeTestObject("past-a-slab", {(9u << 20) + 13, 4096}, 5));  // a file tier streams it
  auto locs = StoreObjects(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(locs->size() == objs.size());
  for (size_t i = 0; i < objs.size(); ++i) {
    CAPTURE(objs[i].key.substr(0, 20));
    std::string why;
    CHECK_MESSAGE(LoadsBack(tier, (*locs)[i], objs[i], &why), why);
    CHECK((*locs)[i].raw_bytes == objs[i].concat().size());
  }
  // Loading twice gives the same bytes (a load consumes nothing).
  std::string why;
  CHECK_MESSAGE(LoadsBack(tier, (*locs)[0], objs[0], &why), why);
  CHECK(tier.Sync().ok());
  for (Location& l : *locs) tier.Free(l);
}

inline void TierEraseAndCapacity(const TierMaker& make) {
  TierSpec spec;
  spec.capacity_bytes = 1 << 20;
  SPILLWAY_TIER_OPEN(t, make, spec);
  CHECK(tier.used_bytes() == 0);
  std::vector<TestObject> objs;
  for (int i = 0; i < 4; ++i) objs.push_back(MakeTestObject("o" + std::to_string(i), {100000}, 10 + i));
  auto locs = StoreObjects(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  uint64_t stored = 0;
  for (const Location& l : *locs) stored += l.stored_bytes;
  CHECK(tier.used_bytes() == stored);  // the reservation follows the bytes actually stored
  CHECK(tier.counters().objects.load() == 4);
  // A reservation past the capacity is refused; what fits is taken.
  CHECK_FALSE(tier.TryReserve(tier.capacity_bytes() - tier.used_bytes() + 1));
  REQUIRE(tier.TryReserve(tier.capacity_bytes() - tier.used_bytes()));
  CHECK(tier.used_bytes() == tier.capacity_bytes());
  CHECK_FALSE(tier.TryReserve(1));
  tier.Unreserve(tier.capacity_bytes() - stored);
  // Erase: the space comes back, the other objects stay readable.
  tier.Free((*locs)[1]);
  CHECK(tier.counters().objects.load() == 3);
  CHECK(tier.used_bytes() == stored - (*locs)[1].stored_bytes);
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}}) {
    std::string why;
    CHECK_MESSAGE(LoadsBack(tier, (*locs)[i], objs[i], &why), why);
  }
  for (size_t i : {size_t{0}, size_t{2}, size_t{3}}) tier.Free((*locs)[i]);
  CHECK(tier.Sync().ok());
  CHECK(tier.used_bytes() == 0);
  CHECK(tier.counters().objects.load() == 0);
  CHECK(tier.counters().raw_bytes.load() == 0);
}

inline void TierDeviceFull(const TierMaker& make) {
  TierSpec spec;
  spec.capacity_bytes = 64ull << 20;
  spec.device_bytes = 2ull << 20;
  SPILLWAY_TIER_OPEN(t, make, spec);
  if (!t.device_bounded) {
    MESSAGE("SKIPPED (device full): this tier's device cannot be bounded in a test; capacity is covered");
    return;
  }
  std::vector<TestObject> objs;
  objs.push_back(MakeTestObject("too-big", {3u << 20}, 20));
  auto locs = StoreObjects(tier, objs);
  REQUIRE_FALSE(locs.ok());
  CHECK_MESSAGE(locs.status().IsNoSpace(), locs.status().ToString());
  CHECK(tier.marked_full());  // the chain falls through to the next tier
  CHECK(tier.used_bytes() == 0);
  CHECK(tier.counters().objects.load() == 0);
  // Once the device has room again a smaller object fits.
  std::vector<TestObject> small;
  small.push_back(MakeTestObject("fits", {100000}, 21));
  auto ok = StoreObjects(tier, small);
  REQUIRE_MESSAGE(ok.ok(), ok.status().ToString());
  std::string why;
  CHECK_MESSAGE(LoadsBack(tier, (*ok)[0], small[0], &why), why);
  tier.Free((*ok)[0]);
}

inline void TierDetectsCorruption(const TierMaker& make) {
  SPILLWAY_TIER_OPEN(t, make, TierSpec{});
  if (!t.corrupt) {
    MESSAGE("SKIPPED (corruption): this tier keeps no bytes of its own to damage");
    return;
  }
  std::vector<TestObject> objs;
  objs.push_back(MakeTestObject("victim", {20000, 30000}, 30));
  objs.push_back(MakeTestObject("neighbour", {50000}, 31));
  auto locs = StoreObjects(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  REQUIRE(tier.Sync().ok());
  REQUIRE(t.corrupt((*locs)[0]).ok());
  auto bad = tier.Load((*locs)[0], "victim");
  REQUIRE_FALSE(bad.ok());
  CHECK_MESSAGE(bad.status().IsCorruption(), bad.status().ToString());
  CHECK(tier.counters().checksum_failures.load() == 1);
  // The wrong key for a location is corruption too, never another object's bytes.
  CHECK(tier.Load((*locs)[1], "victim").status().IsCorruption());
  std::string why;
  CHECK_MESSAGE(LoadsBack(tier, (*locs)[1], objs[1], &why), why);
  for (Location& l : *locs) tier.Free(l);
}

inline void TierConcurrentUse(const TierMaker& make) {
  SPILLWAY_TIER_OPEN(t, make, TierSpec{});
  constexpr int kThreads = 4, kRounds = 12;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      for (int r = 0; r < kRounds && failures == 0; ++r) {
        std::vector<TestObject> objs;
        for (int i = 0; i < 3; ++i) {
          const size_t n = 1000 + 4093 * static_cast<size_t>(th * kRounds + r + i);
          objs.push_back(MakeTestObject("t" + std::to_string(th) + "-" + std::to_string(r) + "-" + std::to_string(i),
                                        {n, n / 3}, th * 1000 + r * 10 + i));
        }
        auto locs = StoreObjects(tier, objs);
        if (!locs.ok()) {
          errors[th] = locs.status().ToString();
          failures++;
          return;
        }
        for (size_t i = 0; i < objs.size(); ++i) {
          if (!LoadsBack(tier, (*locs)[i], objs[i], &errors[th])) {
            failures++;
            return;
          }
        }
        for (Location& l : *locs) tier.Free(l);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const std::string& e : errors) CHECK_MESSAGE(e.empty(), e);
  CHECK(failures == 0);
  CHECK(tier.Sync().ok());
  CHECK(tier.used_bytes() == 0);
  CHECK(tier.counters().objects.load() == 0);
}

inline void TierCountersCase(const TierMaker& make) {
  SPILLWAY_TIER_OPEN(t, make, TierSpec{});
  std::vector<TestObject> objs;
  objs.push_back(MakeTestObject("a", {10000}, 40));
  objs.push_back(MakeTestObject("b", {3000, 7000}, 41));
  auto locs = StoreObjects(tier, objs);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  const TierCounters& c = tier.counters();
  uint64_t stored = 0;
  for (const Location& l : *locs) stored += l.stored_bytes;
  CHECK(c.objects.load() == 2);
  CHECK(c.writes.load() == 2);
  CHECK(c.raw_bytes.load() == 20000);
  CHECK(c.raw_bytes_written.load() == 20000);
  CHECK(c.bytes_written.load() == stored);
  CHECK(c.reads.load() == 0);
  std::string why;
  CHECK_MESSAGE(LoadsBack(tier, (*locs)[1], objs[1], &why), why);
  CHECK(c.reads.load() == 1);
  CHECK(c.bytes_read.load() == (*locs)[1].stored_bytes);
  CHECK(c.checksum_failures.load() == 0);
  CHECK(c.io_errors.load() == 0);
  for (Location& l : *locs) tier.Free(l);
  CHECK(c.objects.load() == 0);
  CHECK(c.raw_bytes.load() == 0);
  CHECK(c.writes.load() == 2);  // monotonic
}

}  // namespace spillway::testing

// Registers every case for one tier. `label` is a string literal naming the
// tier ("host", "file/lz4/memory"); `maker` a TierMaker expression.
#define SPILLWAY_TIER_CONFORMANCE(label, maker)                                                       \
  TEST_CASE("tier conformance " label ": multi-buffer objects round-trip") {                          \
    ::spillway::testing::TierRoundTrip(maker);                                                        \
  }                                                                                                   \
  TEST_CASE("tier conformance " label ": erase and capacity accounting") {                            \
    ::spillway::testing::TierEraseAndCapacity(maker);                                                 \
  }                                                                                                   \
  TEST_CASE("tier conformance " label ": a full device is NoSpace") {                                 \
    ::spillway::testing::TierDeviceFull(maker);                                                       \
  }                                                                                                   \
  TEST_CASE("tier conformance " label ": damaged bytes are Corruption") {                             \
    ::spillway::testing::TierDetectsCorruption(maker);                                                \
  }                                                                                                   \
  TEST_CASE("tier conformance " label ": concurrent use") { ::spillway::testing::TierConcurrentUse(maker); } \
  TEST_CASE("tier conformance " label ": counters") { ::spillway::testing::TierCountersCase(maker); }
