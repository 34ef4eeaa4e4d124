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

namespace {

// n entries of 10 bytes in tier 0, e0 the oldest.
std::vector<Entry*> Inserted(EvictionPolicy& policy, int n) {
  std::vector<Entry*> entries;
  for (int i = 0; i < n; ++i) {
    entries.push_back(Entry::Create("e" + std::to_string(i), 10));
    policy.Insert(entries.back(), 0);
  }
  return entries;
}

// What a Demote does with its picks when it ends.
void ReleasePicks(const std::vector<Entry*>& picked) {
  for (Entry* e : picked) EvictionPolicy::Unpick(e), e->refs.fetch_sub(1);
}

// The victims a Demote asking for `bytes` would get.
std::vector<Entry*> Pick(EvictionPolicy& policy, uint64_t bytes) {
  std::vector<Entry*> out;
  policy.PickVictims(0, bytes, 100, &out);
  return out;
}

void DestroyAll(EvictionPolicy& policy, const std::vector<Entry*>& entries) {
  for (Entry* e : entries) {
    policy.Remove(e);
    Entry::Destroy(e);
  }
}

}  // namespace

TEST_CASE("victims: a touched entry gets a second chance, picked and pinned entries are skipped") {
  EvictionPolicy policy(1);
  std::vector<Entry*> entries = Inserted(policy, 6);  // e0 oldest
  EvictionPolicy::Touch(entries[0]);
  entries[1]->pin_state.fetch_add(1);
  const std::vector<Entry*> a = Pick(policy, 20);
  CHECK(a == std::vector<Entry*>{entries[2], entries[3]});  // e0 had a second chance, e1 is pinned
  // A concurrent Demote takes different victims while these are picked.
  const std::vector<Entry*> b = Pick(policy, 20);
  CHECK(b == std::vector<Entry*>{entries[4], entries[5]});
  // Once released, e0 (its second chance spent) is picked again in turn.
  ReleasePicks(a);
  ReleasePicks(b);
  const std::vector<Entry*> c = Pick(policy, 1000);
  CHECK(c.size() == 5);  // everything but the pinned e1
  ReleasePicks(c);
  DestroyAll(policy, entries);
}

TEST_CASE("victims: a list whose every entry was read recently still yields them, oldest first") {
  EvictionPolicy policy(1);
  std::vector<Entry*> entries = Inserted(policy, 5);  // e0 oldest
  for (Entry* e : entries) EvictionPolicy::Touch(e);
  const std::vector<Entry*> a = Pick(policy, 30);
  CHECK(a == std::vector<Entry*>{entries[0], entries[1], entries[2]});
  ReleasePicks(a);
  DestroyAll(policy, entries);
}

TEST_CASE("victims: clean copies go first, oldest first, whatever their second chance, read-ahead ones last") {
  EvictionPolicy policy(1);
  std::vector<Entry*> entries = Inserted(policy, 6);  // e0 oldest
  // e1, e3 and e4 have clean copies below; e3 was read since; e4 was read
  // ahead and not read since; e0, e2 and e5 would be writes.
  for (int i : {1, 3, 4}) entries[i]->flags.fetch_or(Entry::kClean);
  EvictionPolicy::Touch(entries[3]);
  entries[4]->flags.fetch_or(Entry::kReadAhead);
  const std::vector<Entry*> a = Pick(policy, 20);
  CHECK(a == std::vector<Entry*>{entries[1], entries[3]});
  // Then the CLOCK walk over the rest: e0 (the oldest), e2, then the read-ahead e4.
  const std::vector<Entry*> b = Pick(policy, 30);
  CHECK(b == std::vector<Entry*>{entries[0], entries[2], entries[4]});
  // Once read, a read-ahead entry is an ordinary clean one again.
  ReleasePicks(a);
  ReleasePicks(b);
  EvictionPolicy::ReadAheadConsumed(entries[4]);
  CHECK((entries[4]->flags.load() & Entry::kReadAhead) == 0);
  const std::vector<Entry*> c = Pick(policy, 30);
  CHECK(c == std::vector<Entry*>{entries[1], entries[3], entries[4]});
  ReleasePicks(c);
  // With no clean copy in the engine the first walk is skipped: CLOCK alone.
  std::vector<Entry*> d;
  policy.PickVictims(0, 10, 100, &d, /*any_clean=*/false);
  CHECK(d == std::vector<Entry*>{entries[0]});
  ReleasePicks(d);
  DestroyAll(policy, entries);
}
