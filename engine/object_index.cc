// ObjectIndex: entry allocation, the compact location and the shard tables.
#include "engine/object_index.h"

#include <cassert>
#include <cstring>
#include <functional>
#include <new>

namespace spillway::internal {

static_assert(kMaxKeyLen < (1u << 24), "Entry::key_len holds 24 bits");
static_assert(sizeof(EntryLocation) == 32);
// 96: 88 plus the version's sequence number (recovery across tiers, docs/format.md).
static_assert(sizeof(Entry) == 96, "keep the per-object index cost in view when adding fields");

void EntryLocation::Clear() {
  if (has_blob_) {
    blob_.~BlobPtr();
    has_blob_ = false;
  }
  file_ = File{};
  stored_bytes_ = 0;
}

void EntryLocation::Set(Location&& loc) {
  Clear();
  stored_bytes_ = loc.stored_bytes;
  if (loc.blob) {
    // A memory tier's location carries nothing but its blob.
    assert(loc.stripe == 0 && loc.segment == 0 && loc.offset == 0 && loc.length == 0);
    new (&blob_) BlobPtr(std::move(loc.blob));
    has_blob_ = true;
  } else {
    file_ = File{loc.stripe, loc.segment, loc.offset, loc.length};
  }
}

Location EntryLocation::Get(uint64_t raw) const {
  Location loc;
  if (has_blob_) {
    loc.blob = blob_;
  } else {
    loc.stripe = file_.stripe;
    loc.segment = file_.segment;
    loc.offset = file_.offset;
    loc.length = file_.length;
  }
  loc.stored_bytes = stored_bytes_;
  loc.raw_bytes = raw;
  return loc;
}

Location EntryLocation::Take(uint64_t raw) {
  Location loc = Get(raw);  // moves are rare: one extra blob reference is cheap
  Clear();
  return loc;
}

Entry* Entry::Create(std::string_view key, uint64_t raw) {
  void* mem = ::operator new(sizeof(Entry) + key.size());
  Entry* e = new (mem) Entry(static_cast<uint32_t>(key.size()), raw);
  if (!key.empty()) std::memcpy(reinterpret_cast<char*>(e + 1), key.data(), key.size());
  return e;
}

void Entry::Destroy(Entry* e) {
  e->~Entry();
  ::operator delete(e);
}

uint64_t ObjectIndex::Hash(std::string_view key) { return std::hash<std::string_view>{}(key); }

Entry* ObjectIndex::Shard::Find(std::string_view key, uint64_t hash) const {
  if (buckets_.empty()) return nullptr;
  for (Entry* e = buckets_[Bucket(hash)]; e != nullptr; e = e->hash_next) {
    if (e->key_len == key.size() && std::memcmp(reinterpret_cast<const char*>(e + 1), key.data(), key.size()) == 0) return e;
  }
  return nullptr;
}

Entry* ObjectIndex::Shard::Replace(Entry* e, uint64_t hash) {
  if (count_ >= buckets_.size()) Grow();
  Entry** link = &buckets_[Bucket(hash)];
  const std::string_view key = e->key();
  for (; *link != nullptr; link = &(*link)->hash_next) {
    Entry* old = *link;
    if (old->key() == key) {
      e->hash_next = old->hash_next;
      old->hash_next = nullptr;
      *link = e;
      return old;
    }
  }
  e->hash_next = nullptr;
  *link = e;
  ++count_;
  return nullptr;
}

bool ObjectIndex::Shard::Remove(Entry* e, uint64_t hash) {
  if (buckets_.empty()) return false;
  for (Entry** link = &buckets_[Bucket(hash)]; *link != nullptr; link = &(*link)->hash_next) {
    if (*link == e) {
      *link = e->hash_next;
      e->hash_next = nullptr;
      --count_;
      return true;
    }
  }
  return false;
}

void ObjectIndex::Shard::TakeAll(std::vector<Entry*>* out) {
  for (Entry*& head : buckets_) {
    for (Entry* e = head; e != nullptr;) {
      Entry* next = e->hash_next;
      e->hash_next = nullptr;
      out->push_back(e);
      e = next;
    }
    head = nullptr;
  }
  count_ = 0;
}

void ObjectIndex::Shard::Grow() {
  // Load factor at most 1: a hit usually touches one bucket and one entry.
  std::vector<Entry*> old = std::move(buckets_);
  buckets_.assign(old.empty() ? 16 : old.size() * 2, nullptr);
  for (Entry* head : old) {
    for (Entry* e = head; e != nullptr;) {
      Entry* next = e->hash_next;
      Entry*& b = buckets_[Bucket(Hash(e->key()))];
      e->hash_next = b;
      b = e;
      e = next;
    }
  }
}

}  // namespace spillway::internal
