// ObjectIndex (engine/object_index.h): the shard hash table and the compact
// entry location.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
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
