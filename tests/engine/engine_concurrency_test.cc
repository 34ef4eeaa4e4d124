// EngineCore under concurrent readers: promotions racing reads, pins released
// on other threads.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "engine_test_util.h"

using namespace spillway;
using namespace spillway::internal;
using namespace spillway::testing;

TEST_CASE("readers racing promotions get good bytes, pins released on other threads leave pinned bytes at zero") {
  TempDir dir("eng");
  Config c = HostFileChain(dir.path(), 1 << 20, 64 << 20);
  c.policy.promote_on_read = true;
  auto e = MustOpen(c, nullptr, /*background=*/true);
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
