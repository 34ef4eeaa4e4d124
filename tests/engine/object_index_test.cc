// ObjectIndex (engine/object_index.h): the shard hash table (with real and
// with colliding hashes) and the compact entry location.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "engine/object_index.h"
#include "engine_test_util.h"
#include "tiers/host_tier.h"

using namespace spillway;
using namespace spillway::internal;
using namespace spillway::testing;

TEST_CASE("shard table: find, replace, remove and growth keep every key reachable") {
  ObjectIndex::Shard shard;
  std::vector<Entry*> live;
  const int n = 5000;
  for (int i = 0; i < n; ++i) {
    std::string key = "key/" + std::to_string(i);
    if (i % 7 == 0) key.push_back('\0');  // arbitrary bytes, embedded NUL
    Entry* e = Entry::Create(key, i);
    CHECK(shard.Replace(e, ObjectIndex::Hash(key)) == nullptr);
    live.push_back(e);
  }
  CHECK(shard.size() == static_cast<size_t>(n));
  for (Entry* e : live) CHECK(shard.Find(e->key(), ObjectIndex::Hash(e->key())) == e);
  const std::string_view absent("key/1\0", 6);  // "key/1" exists, with a NUL it does not
  CHECK(shard.Find(absent, ObjectIndex::Hash(absent)) == nullptr);

  // Replacing returns the old entry, unlinked.
  Entry* repl = Entry::Create(live[42]->key(), 1);
  CHECK(shard.Replace(repl, ObjectIndex::Hash(repl->key())) == live[42]);
  CHECK(shard.size() == static_cast<size_t>(n));
  CHECK(shard.Find(repl->key(), ObjectIndex::Hash(repl->key())) == repl);
  Entry::Destroy(live[42]);
  live[42] = repl;

  // Removing half leaves the other half.
  for (int i = 0; i < n; i += 2) CHECK(shard.Remove(live[i], ObjectIndex::Hash(live[i]->key())));
  CHECK_FALSE(shard.Remove(live[0], ObjectIndex::Hash(live[0]->key())));
  for (int i = 0; i < n; ++i) {
    Entry* found = shard.Find(live[i]->key(), ObjectIndex::Hash(live[i]->key()));
    CHECK(found == (i % 2 ? live[i] : nullptr));
  }
  std::vector<Entry*> rest;
  shard.TakeAll(&rest);
  CHECK(rest.size() == static_cast<size_t>(n / 2));
  CHECK(shard.size() == 0);
  for (Entry* e : live) Entry::Destroy(e);
}

TEST_CASE("shard table: colliding hashes, runs that wrap past the end, and removals in any order") {
  // Hashes chosen by the test (the table takes them as given): many keys
  // share a home slot, and homes near the end of the 16-slot table make
  // runs wrap to its start. Every removal shifts the rest of its run back;
  // after each one every remaining key must still be found, and removed
  // ones must not.
  std::mt19937_64 rng(11);
  for (int round = 0; round < 200; ++round) {
    CAPTURE(round);
    ObjectIndex::Shard shard;
    const int n = 1 + static_cast<int>(rng() % 11);  // stays within 16 slots (at most 3/4 full)
    std::vector<std::pair<Entry*, uint64_t>> live;
    for (int i = 0; i < n; ++i) {
      const uint64_t home = 12 + rng() % 6;  // slots 12..15, and 16, 17 wrap to 0, 1
      const uint64_t hash = (home % 16) * ObjectIndex::kShards + (rng() % 3) * 16 * ObjectIndex::kShards;
      Entry* e = Entry::Create("c" + std::to_string(round) + "-" + std::to_string(i), i);
      REQUIRE(shard.Replace(e, hash) == nullptr);
      live.emplace_back(e, hash);
    }
    REQUIRE(shard.size() == live.size());
    std::vector<std::pair<Entry*, uint64_t>> gone;
    while (!live.empty()) {
      const size_t k = rng() % live.size();
      REQUIRE(shard.Remove(live[k].first, live[k].second));
      gone.push_back(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      CHECK(shard.size() == live.size());
      for (auto& [e, h] : live) CHECK(shard.Find(e->key(), h) == e);
      for (auto& [e, h] : gone) CHECK(shard.Find(e->key(), h) == nullptr);
      size_t seen = 0;
      shard.ForEach([&](Entry*) { ++seen; });
      CHECK(seen == live.size());
    }
    for (auto& [e, h] : gone) Entry::Destroy(e);
  }
}

TEST_CASE("shard table: a key replaced under a colliding hash keeps its slot, growth keeps colliding keys") {
  ObjectIndex::Shard shard;
  std::vector<Entry*> es;
  // 100 keys on one home slot: growth (16 -> 256 slots) rehashes them from
  // the stored hash alone.
  for (int i = 0; i < 100; ++i) {
    es.push_back(Entry::Create("same/" + std::to_string(i), i));
    REQUIRE(shard.Replace(es.back(), 5 * ObjectIndex::kShards) == nullptr);
  }
  for (Entry* e : es) CHECK(shard.Find(e->key(), 5 * ObjectIndex::kShards) == e);
  Entry* repl = Entry::Create("same/50", 7);
  CHECK(shard.Replace(repl, 5 * ObjectIndex::kShards) == es[50]);
  CHECK(shard.size() == 100);
  CHECK(shard.Find("same/50", 5 * ObjectIndex::kShards) == repl);
  CHECK(shard.Remove(repl, 5 * ObjectIndex::kShards));
  CHECK_FALSE(shard.Remove(es[50], 5 * ObjectIndex::kShards));  // no longer mapped
  CHECK(shard.Find("same/50", 5 * ObjectIndex::kShards) == nullptr);
  for (int i = 0; i < 100; ++i) {
    if (i != 50) CHECK(shard.Find(es[i]->key(), 5 * ObjectIndex::kShards) == es[i]);
  }
  std::vector<Entry*> rest;
  shard.TakeAll(&rest);
  CHECK(rest.size() == 99);
  CHECK(shard.size() == 0);
  CHECK(shard.Find(es[0]->key(), 5 * ObjectIndex::kShards) == nullptr);
  for (Entry* e : es) Entry::Destroy(e);
  Entry::Destroy(repl);
}

TEST_CASE("entry location round-trips memory and file locations") {
  EntryLocation el;
  Location file;
  file.stripe = 3;
  file.segment = 77;
  file.offset = 1ull << 40;
  file.length = 12288;
  file.stored_bytes = 12000;
  el.Set(std::move(file));
  CHECK_FALSE(el.has_blob());
  Location got = el.Get(5000);
  CHECK(got.stripe == 3);
  CHECK(got.segment == 77);
  CHECK(got.offset == (1ull << 40));
  CHECK(got.length == 12288);
  CHECK(got.stored_bytes == 12000);
  CHECK(got.raw_bytes == 5000);
  CHECK(got.blob == nullptr);

  BlobPtr blob = NewHostBlob(nullptr, 100, {100});
  Location mem;
  mem.blob = blob;
  mem.stored_bytes = 100;
  el.Set(std::move(mem));
  CHECK(el.has_blob());
  CHECK(el.blob() == blob);
  CHECK(blob.use_count() == 2);
  Location taken = el.Take(100);
  CHECK(taken.blob == blob);
  CHECK(taken.stored_bytes == 100);
  CHECK(taken.offset == 0);
  CHECK_FALSE(el.has_blob());
  taken.blob.reset();
  CHECK(blob.use_count() == 1);
}
