// The engine's hit-path and memory structures: the shard hash table, the
// compact entry location, CLOCK-style victim picking, compact and inline
// blobs, lock-free unpinning, and demotion batch sizes.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "engine/eviction_policy.h"
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

TEST_CASE("blobs: inline small objects, extra buffer sizes and custom deleters") {
  BlobPtr small = NewHostBlob(nullptr, Blob::kInlineMaxBytes, {Blob::kInlineMaxBytes});
  REQUIRE(small);
  CHECK(reinterpret_cast<uintptr_t>(small->data()) % 16 == 0);
  std::memset(small->data(), 0xab, small->size());  // the whole tail is writable (ASan checks)
  CHECK(small->num_buffers() == 1);
  CHECK(small->buffer(0).size() == Blob::kInlineMaxBytes);
  CHECK(small->buffer_sizes() == std::vector<uint64_t>{Blob::kInlineMaxBytes});

  BlobPtr multi = NewHostBlob(nullptr, 30, {10, 0, 20});
  CHECK(multi->num_buffers() == 3);
  CHECK(multi->buffer(1).size() == 0);
  CHECK(multi->buffer(2).data() == multi->data() + 10);
  std::vector<std::span<const std::byte>> spans;
  multi->Spans(&spans);
  CHECK(spans.size() == 3);
  CHECK(multi->buffer_sizes() == std::vector<uint64_t>{10, 0, 20});

  BlobPtr none = NewHostBlob(nullptr, 0, {});
  CHECK(none->num_buffers() == 0);
  none->Spans(&spans);
  CHECK(spans.empty());

  BlobPtr big = NewHostBlob(nullptr, 1 << 20, {1 << 20});
  CHECK(reinterpret_cast<uintptr_t>(big->data()) % 64 == 0);

  int freed = 0;
  {
    std::byte* p = Blob::AllocateHost(64);
    Blob b(p, 64, {64}, MemoryKind::kHost, [&freed](std::byte* d, uint64_t n) {
      CHECK(n == 64);
      std::free(d);
      ++freed;
    });
  }
  CHECK(freed == 1);
}

TEST_CASE("victims: a touched entry gets a second chance; picked and pinned entries are skipped") {
  EvictionPolicy policy(1);
  std::vector<Entry*> entries;
  for (int i = 0; i < 6; ++i) {
    entries.push_back(Entry::Create("e" + std::to_string(i), 10));
    policy.Insert(entries.back(), 0);  // e0 oldest
  }
  EvictionPolicy::Touch(entries[0]);
  entries[1]->pin_state.fetch_add(1);
  std::vector<Entry*> a;
  policy.PickVictims(0, 20, 100, &a);
  REQUIRE(a.size() == 2);
  CHECK(a[0] == entries[2]);  // e0 had a second chance, e1 is pinned
  CHECK(a[1] == entries[3]);
  // A concurrent Demote takes different victims while these are picked.
  std::vector<Entry*> b;
  policy.PickVictims(0, 20, 100, &b);
  REQUIRE(b.size() == 2);
  CHECK(b[0] == entries[4]);
  CHECK(b[1] == entries[5]);
  // Once released, e0 (its second chance spent) is picked again in turn.
  for (Entry* e : a) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  for (Entry* e : b) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  std::vector<Entry*> c;
  policy.PickVictims(0, 1000, 100, &c);
  CHECK(c.size() == 5);  // everything but the pinned e1
  for (Entry* e : c) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  for (Entry* e : entries) {
    policy.Remove(e);
    Entry::Destroy(e);
  }
}

TEST_CASE("victims: a list whose every entry was read recently still yields them, oldest first") {
  EvictionPolicy policy(1);
  std::vector<Entry*> entries;
  for (int i = 0; i < 5; ++i) {
    entries.push_back(Entry::Create("e" + std::to_string(i), 10));
    policy.Insert(entries.back(), 0);  // e0 oldest
  }
  for (Entry* e : entries) EvictionPolicy::Touch(e);
  std::vector<Entry*> a;
  policy.PickVictims(0, 30, 100, &a);
  REQUIRE(a.size() == 3);
  CHECK(a[0] == entries[0]);
  CHECK(a[1] == entries[1]);
  CHECK(a[2] == entries[2]);
  for (Entry* e : a) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  for (Entry* e : entries) {
    policy.Remove(e);
    Entry::Destroy(e);
  }
}

TEST_CASE("a mover pass demotes at least min(64 MiB, capacity / 4)") {
  TempDir dir("eng");
  const uint64_t cap = 4 << 20;
  auto e = OpenOrDie(HostFileChain(dir.path(), cap, 64 << 20));
  int i = 0;
  while (e->Stats().tiers[0].used_bytes <= static_cast<uint64_t>(0.9 * cap)) {
    REQUIRE(e->Put("k" + std::to_string(i), Bytes(64 << 10, i)).ok());
    ++i;
  }
  const uint64_t before = e->Stats().tiers[0].used_bytes;
  REQUIRE(e->Flush().ok());  // no background thread: runs the passes here
  const auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes + cap / 4 <= before);
  CHECK(s.tiers[0].demotions_out >= (cap / 4) / (64 << 10));
  CHECK(s.tiers[0].objects + s.tiers[1].objects == static_cast<uint64_t>(i));
}

TEST_CASE("readers racing promotions get good bytes; pins released on other threads leave pinned bytes at zero") {
  TempDir dir("eng");
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  c.policy.promote_on_read = true;
  auto e = OpenOrDie(c, /*background=*/true);
  const int keys = 32;
  for (int k = 0; k < keys; ++k) REQUIRE(e->Put("k" + std::to_string(k), Bytes(64 << 10, k)).ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      for (int i = 0; i < 400; ++i) {
        const int k = (i * 7 + t * 13) % keys;
        auto h = e->Get("k" + std::to_string(k));
        if (!h.ok()) {
          MESSAGE("get k" << k << ": " << h.status().ToString());
          bad++;
        } else if (!HandleEquals(*h, Bytes(64 << 10, k))) {
          MESSAGE("get k" << k << ": wrong bytes");
          bad++;
        }
        // Hand the pin to another thread to release.
        std::thread([h = std::move(h)]() mutable { h = Status::NotFound("released"); }).join();
      }
    });
  }
  for (auto& th : ts) th.join();
  CHECK(bad.load() == 0);
  REQUIRE(e->Flush().ok());
  for (const TierStats& t : e->Stats().tiers) CHECK(t.pinned_bytes == 0);
}
