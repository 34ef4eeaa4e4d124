// ObjectIndex: entry allocation, the compact location and the shard tables.
#include "engine/object_index.h"

#include <cassert>
#include <cstring>
#include <functional>
#include <new>

namespace spillway::internal {

static_assert(kMaxKeyLen < (1u << 24), "Entry::key_len holds 24 bits");
static_assert(sizeof(EntryLocation) == 32);
// 88: the version's sequence number (recovery across tiers, docs/format.md)
// included; the shard tables hold no pointer in the entry.
static_assert(sizeof(Entry) == 88, "keep the per-object index cost in view when adding fields");

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

size_t ObjectIndex::Shard::Probe(std::string_view key, uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  for (size_t i = Home(hash);; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.entry == nullptr) return i;
    if (s.hash == hash && s.entry->key_len == key.size() &&
        std::memcmp(reinterpret_cast<const char*>(s.entry + 1), key.data(), key.size()) == 0) {
      return i;
    }
  }
}

Entry* ObjectIndex::Shard::Find(std::string_view key, uint64_t hash) const {
  return slots_.empty() ? nullptr : slots_[Probe(key, hash)].entry;
}

Entry* ObjectIndex::Shard::Replace(Entry* e, uint64_t hash) {
  // At most three quarters full: a probe sequence stays short, and there is
  // always an empty slot to end it.
  if ((count_ + 1) * 4 > slots_.size() * 3) Grow();
  Slot& s = slots_[Probe(e->key(), hash)];
  Entry* old = s.entry;
  if (old == nullptr) ++count_;
  s = Slot{hash, e};
  return old;
}

bool ObjectIndex::Shard::Remove(Entry* e, uint64_t hash) {
  if (slots_.empty()) return false;
  size_t i = Probe(e->key(), hash);
  if (slots_[i].entry != e) return false;
  // Backward shift: each later slot of the run moves into the hole unless
  // its home lies cyclically in (hole, slot], where it already is reachable.
  const size_t mask = slots_.size() - 1;
  for (size_t j = (i + 1) & mask; slots_[j].entry != nullptr; j = (j + 1) & mask) {
    const size_t home = Home(slots_[j].hash);
    const bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
    if (!stays) {
      slots_[i] = slots_[j];
      i = j;
    }
  }
  slots_[i] = Slot{};
  --count_;
  return true;
}

void ObjectIndex::Shard::TakeAll(std::vector<Entry*>* out) {
  for (Slot& s : slots_) {
    if (s.entry != nullptr) out->push_back(s.entry);
    s = Slot{};
  }
  count_ = 0;
}

void ObjectIndex::Shard::Grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.entry == nullptr) continue;
    size_t i = Home(s.hash);
    while (slots_[i].entry != nullptr) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

}  // namespace spillway::internal
