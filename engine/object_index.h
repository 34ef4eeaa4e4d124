// ObjectIndex: key -> Entry, sharded so concurrent calls on different keys
// rarely meet. Each shard has one mutex guarding its hash table and the
// shard-guarded fields of its entries.
//
// Entry lifetime: reference counted. The index holds one reference while the
// key maps to it; Handles, movers and readers hold their own. The entry's
// stored copy is freed when the last reference goes (EngineCore::Unref), so
// an object erased while pinned or being moved stays readable until then.
//
// Memory: an Entry is one allocation with its key bytes right after it, and
// a shard's table is an open-addressed array of {hash, Entry*} slots at most
// three quarters full, so the index costs 88 bytes plus the key and 16-21
// bytes of slots per object. A lookup compares full hashes in the slot array
// and touches an entry only on a hash match, so a miss (every Put of a new
// key) reads one cache line of slots and no entry; growth rehashes from the
// stored hashes without touching entries. Entries chained through the
// buckets cost a small-object spill's Put thread a large share of its time
// in lookups and growth (docs/performance.md, "Tuning constants").
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tiers/tier.h"

namespace spillway::internal {

// An entry's Location without what the entry already knows (the raw size),
// with the memory-tier half (a Blob) and the file-tier half (a record
// address) overlapped: 32 bytes instead of Location's 56.
class EntryLocation {
 public:
  EntryLocation() : file_{} {}
  ~EntryLocation() { Clear(); }
  EntryLocation(const EntryLocation&) = delete;
  EntryLocation& operator=(const EntryLocation&) = delete;

  // Takes `loc` (a memory tier's: blob set, record fields zero; or a file
  // tier's: no blob).
  void Set(Location&& loc);
  // A copy as a Location of an object of `raw` bytes.
  Location Get(uint64_t raw) const;
  // Moves the location out, leaving this one empty.
  Location Take(uint64_t raw);
  uint64_t stored_bytes() const { return stored_bytes_; }
  bool has_blob() const { return has_blob_; }
  // REQUIRES: has_blob().
  const BlobPtr& blob() const { return blob_; }

 private:
  struct File {
    uint32_t stripe;
    uint32_t segment;
    uint64_t offset;
    uint64_t length;
  };
  void Clear();

  union {
    BlobPtr blob_;  // when has_blob_
    File file_;
  };
  uint64_t stored_bytes_ : 63 = 0;
  uint64_t has_blob_ : 1 = 0;  // which half of the union is live
};

struct Entry {
  // An entry for `key` (copied into the same allocation), one reference held.
  static Entry* Create(std::string_view key, uint64_t raw);
  // REQUIRES: the last reference is gone.
  static void Destroy(Entry* e);

  std::string_view key() const { return {reinterpret_cast<const char*>(this + 1), key_len}; }

  // Pin count in the low 32 bits, the tier the pins count against in the
  // high 32: a pin or unpin learns the tier from the same atomic operation,
  // so unpinning needs no lock. Live Handles and in-flight reads pin;
  // pinned entries never move down.
  std::atomic<uint64_t> pin_state{0};
  static constexpr uint64_t kPinMask = 0xffffffffull;
  static constexpr int kPinTierShift = 32;
  uint32_t pins() const { return static_cast<uint32_t>(pin_state.load(std::memory_order_acquire) & kPinMask); }

  std::atomic<uint32_t> refs{1};
  // ---- guarded by the shard mutex ----
  uint32_t version = 0;    // bumped on every change of location (wraps; compared for equality)
  // ---- immutable ----
  uint32_t key_len : 24;
  // ---- written holding both the shard mutex and the policy's list mutex ----
  int8_t lru_tier = -1;    // list the entry is on, -1 when on none
  // ---- eviction hints, lock-free ----
  std::atomic<uint8_t> flags{0};
  static constexpr uint8_t kAccessed = 1;  // read since the policy last looked (second chance)
  static constexpr uint8_t kPicked = 2;    // chosen as a victim by a Demote still running
  // A Prefetch is reading it from a file tier: a Get waits for that read
  // (EngineCore::Get) instead of reading the same record again.
  static constexpr uint8_t kLoading = 4;
  // Mirrors clean_tier >= 0 for the eviction policy, which reads it without
  // the shard mutex: demoting the entry now would write nothing. A hint;
  // the Demoter decides from clean_tier under the mutex.
  static constexpr uint8_t kClean = 8;
  // Promoted by a Prefetch and not read since: a read announced, which the
  // policy's clean pass leaves alone (EvictionPolicy::PickVictims).
  static constexpr uint8_t kReadAhead = 16;
  // ---- guarded by the shard mutex ----
  int8_t tier = -1;        // index of the tier holding the object
  // A clean copy in tier clean_tier (-1: none): the record a promotion from a
  // scratch file tier left in place, its location in the shard's
  // clean_copies. The object is immutable, so while the entry lives that
  // record holds its bytes, and demoting the entry again only re-points it
  // there: nothing is written. Freed with the entry (EngineCore::Unref) or
  // when a demotion takes it back.
  int8_t clean_tier = -1;
  bool moving : 1 = false;  // a mover copied it and will commit or abort
  bool erased : 1 = false;  // no longer in the index
  // ---- guarded by the eviction policy's mutex for lru_tier ----
  Entry* lru_prev = nullptr;
  Entry* lru_next = nullptr;
  // ---- immutable ----
  uint64_t raw_size;
  // The version's sequence number (engine-wide, from Put; a recovered
  // record's): its records in every tier carry it, so recovery can tell the
  // newest version of a key across tiers. Set before the entry is indexed.
  uint64_t sequence = 0;
  // ---- guarded by the shard mutex ----
  EntryLocation loc;

  // Sentinels and tests; indexed entries come from Create.
  Entry(uint32_t key_length, uint64_t raw) : key_len(key_length), raw_size(raw) {}
};

class ObjectIndex {
 public:
  static constexpr size_t kShards = 64;

  static uint64_t Hash(std::string_view key);

  // A hash table of entries, open addressing with linear probing and
  // backward-shift deletion (no tombstones). REQUIRES: `mu` for every method.
  // Cache-line aligned so threads locking neighbouring shards do not share
  // a line.
  class alignas(64) Shard {
   public:
    std::mutex mu;
    // Entry -> its clean copy's location (Entry::clean_tier). REQUIRES: mu.
    std::unordered_map<const Entry*, Location> clean_copies;

    Entry* Find(std::string_view key, uint64_t hash) const;
    // Maps e's key to `e`; returns the entry it replaces (null if none), which
    // is unlinked but keeps its flags and references.
    Entry* Replace(Entry* e, uint64_t hash);
    // Unmaps e's key if it maps to `e`.
    bool Remove(Entry* e, uint64_t hash);
    // Unmaps every key, appending the entries to `out`.
    void TakeAll(std::vector<Entry*>* out);
    // Calls f(entry) for every mapped entry (a snapshot for checks such as
    // EngineCore::CheckDevices; f must not change the table).
    template <typename F>
    void ForEach(F&& f) const {
      for (const Slot& s : slots_) {
        if (s.entry != nullptr) f(s.entry);
      }
    }
    size_t size() const { return count_; }

   private:
    struct Slot {
      uint64_t hash = 0;
      Entry* entry = nullptr;  // null: empty
    };
    // The slot a hash probes first. The low bits chose the shard
    // (ShardForHash), so the slot comes from the bits above them.
    size_t Home(uint64_t hash) const { return (hash / kShards) & (slots_.size() - 1); }
    // The slot holding the key's entry, or else the empty slot that ends its
    // probe (where it would go). REQUIRES: slots_ not empty.
    size_t Probe(std::string_view key, uint64_t hash) const;
    void Grow();

    std::vector<Slot> slots_;  // power-of-two size, or empty
    size_t count_ = 0;
  };

  Shard& ShardForHash(uint64_t hash) { return shards_[hash % kShards]; }
  Shard& ShardFor(std::string_view key) { return ShardForHash(Hash(key)); }
  Shard& shard(size_t i) { return shards_[i]; }

 private:
  Shard shards_[kShards];
};

}  // namespace spillway::internal
