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
