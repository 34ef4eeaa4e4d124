// ObjectIndex: key -> Entry, sharded so concurrent calls on different keys
// rarely meet. Each shard has one mutex guarding its map and the
// shard-guarded fields of its entries.
//
// Entry lifetime: reference counted. The index holds one reference while the
// key maps to it; Handles, movers and readers hold their own. The entry's
// stored copy is freed when the last reference goes (EngineCore::Unref), so
// an object erased while pinned or being moved stays readable until then.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "tiers/tier.h"

namespace spillway::internal {

struct Entry {
  Entry(std::string_view k, uint64_t raw) : key(k), raw_size(raw) {}

  std::atomic<uint32_t> refs{1};
  std::atomic<uint32_t> pins{0};  // live Handles and in-flight reads; pinned entries never move
  // ---- guarded by the shard mutex ----
  int8_t tier = -1;        // index of the tier holding the object
  bool moving = false;     // a mover copied it and will commit or abort
  bool erased = false;     // no longer in the index
  uint64_t version = 0;    // bumped on every change of location
  Location loc;
  // ---- guarded by the eviction policy's mutex for lru_tier ----
  Entry* lru_prev = nullptr;
  Entry* lru_next = nullptr;
  int8_t lru_tier = -1;    // list the entry is on, -1 when on none
  // ---- immutable ----
  const std::string key;
  const uint64_t raw_size;
};

class ObjectIndex {
 public:
  static constexpr size_t kShards = 64;

  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string_view, Entry*> map;  // key views point into Entry::key
  };

  Shard& ShardFor(std::string_view key) {
    return shards_[std::hash<std::string_view>{}(key) % kShards];
  }
  Shard& shard(size_t i) { return shards_[i]; }

 private:
  Shard shards_[kShards];
};

}  // namespace spillway::internal
