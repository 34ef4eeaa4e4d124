// EvictionPolicy (engine/eviction_policy.h): CLOCK-style victim picking.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "engine/eviction_policy.h"
#include "engine/object_index.h"
#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::internal;
using namespace spillway::testing;

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

TEST_CASE("victims: clean copies go first, oldest first, whatever their second chance; read-ahead ones last") {
  EvictionPolicy policy(1);
  std::vector<Entry*> entries;
  for (int i = 0; i < 6; ++i) {
    entries.push_back(Entry::Create("e" + std::to_string(i), 10));
    policy.Insert(entries.back(), 0);  // e0 oldest
  }
  // e1, e3 and e4 have clean copies below; e3 was read since; e4 was read
  // ahead and not read since; e0, e2 and e5 would be writes.
  for (int i : {1, 3, 4}) entries[i]->flags.fetch_or(Entry::kClean);
  EvictionPolicy::Touch(entries[3]);
  entries[4]->flags.fetch_or(Entry::kReadAhead);
  std::vector<Entry*> a;
  policy.PickVictims(0, 20, 100, &a);
  REQUIRE(a.size() == 2);
  CHECK(a[0] == entries[1]);
  CHECK(a[1] == entries[3]);
  // Then the CLOCK walk over the rest: e0 (the oldest), e2, then the read-ahead e4.
  std::vector<Entry*> b;
  policy.PickVictims(0, 30, 100, &b);
  REQUIRE(b.size() == 3);
  CHECK(b[0] == entries[0]);
  CHECK(b[1] == entries[2]);
  CHECK(b[2] == entries[4]);
  // Once read, a read-ahead entry is an ordinary clean one again.
  for (Entry* e : a) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  for (Entry* e : b) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  EvictionPolicy::ReadAheadConsumed(entries[4]);
  CHECK((entries[4]->flags.load() & Entry::kReadAhead) == 0);
  std::vector<Entry*> c;
  policy.PickVictims(0, 10, 100, &c);
  REQUIRE(c.size() == 1);
  CHECK((c[0]->flags.load() & Entry::kClean) != 0);
  for (Entry* e : c) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
  for (Entry* e : entries) {
    policy.Remove(e);
    Entry::Destroy(e);
  }
}
