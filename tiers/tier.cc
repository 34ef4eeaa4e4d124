// Tier's non-virtual half: reservation, accounting and counters, done once
// for every tier kind.
#include "tiers/tier.h"

#include <chrono>

namespace spillway {
namespace {
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

void Tier::MarkFull(double seconds) {
  full_until_ns_.store(NowNs() + static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
}

bool Tier::marked_full() const {
  const int64_t until = full_until_ns_.load(std::memory_order_relaxed);
  return until != 0 && NowNs() < until;
}

bool Tier::TryReserve(uint64_t bytes, bool ignore_full_mark) {
  if (!ignore_full_mark && marked_full()) return false;
  uint64_t cur = used_.load(std::memory_order_relaxed);
  const uint64_t cap = capacity_bytes();
  do {
    if (bytes > cap || cur > cap - bytes) return false;
  } while (!used_.compare_exchange_weak(cur, cur + bytes, std::memory_order_relaxed));
  return true;
}

StatusOr<std::vector<Location>> Tier::Store(std::span<const ObjectView> objects) {
  std::vector<uint64_t> reserved(objects.size());
  for (size_t i = 0; i < objects.size(); ++i) reserved[i] = ReserveEstimate(objects[i]);
  return Store(objects, reserved);
}

StatusOr<std::vector<Location>> Tier::Store(std::span<const ObjectView> objects, std::span<const uint64_t> reserved) {
  auto locs = StoreImpl(objects);
  if (!locs.ok()) {
    if (locs.status().IsIOError()) counters_.io_errors.fetch_add(1, std::memory_order_relaxed);
    if (locs.status().IsNoSpace()) MarkFull();
    return locs;
  }
  for (size_t i = 0; i < objects.size(); ++i) {
    const uint64_t estimate = reserved[i];
    const uint64_t stored = (*locs)[i].stored_bytes;
    if (stored < estimate) {
      Unreserve(estimate - stored);
    } else if (stored > estimate) {
      ForceReserve(stored - estimate);
    }
    const uint64_t raw = objects[i].raw_size();
    (*locs)[i].raw_bytes = raw;
    counters_.objects.fetch_add(1, std::memory_order_relaxed);
    counters_.raw_bytes.fetch_add(raw, std::memory_order_relaxed);
    counters_.raw_bytes_written.fetch_add(raw, std::memory_order_relaxed);
    counters_.admitted_raw_bytes.fetch_add(raw, std::memory_order_relaxed);
    counters_.bytes_written.fetch_add(stored, std::memory_order_relaxed);
    counters_.writes.fetch_add(1, std::memory_order_relaxed);
  }
  return locs;
}

StatusOr<BlobPtr> Tier::Load(const Location& loc, std::string_view key) {
  auto blob = LoadImpl(loc, key);
  if (blob.ok()) {
    counters_.reads.fetch_add(1, std::memory_order_relaxed);
    counters_.bytes_read.fetch_add(loc.stored_bytes, std::memory_order_relaxed);
  } else if (blob.status().IsCorruption()) {
    counters_.checksum_failures.fetch_add(1, std::memory_order_relaxed);
  } else if (blob.status().IsIOError()) {
    counters_.io_errors.fetch_add(1, std::memory_order_relaxed);
  }
  return blob;
}

std::vector<StatusOr<BlobPtr>> Tier::LoadBatch(std::span<const Location> locs,
                                               std::span<const std::string_view> keys) {
  std::vector<StatusOr<BlobPtr>> out = LoadBatchImpl(locs, keys);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].ok()) {
      counters_.reads.fetch_add(1, std::memory_order_relaxed);
      counters_.bytes_read.fetch_add(locs[i].stored_bytes, std::memory_order_relaxed);
    } else if (out[i].status().IsCorruption()) {
      counters_.checksum_failures.fetch_add(1, std::memory_order_relaxed);
    } else if (out[i].status().IsIOError()) {
      counters_.io_errors.fetch_add(1, std::memory_order_relaxed);
    }
  }
  return out;
}

std::vector<StatusOr<BlobPtr>> Tier::LoadBatchImpl(std::span<const Location> locs,
                                                   std::span<const std::string_view> keys) {
  std::vector<StatusOr<BlobPtr>> out;
  out.reserve(locs.size());
  for (size_t i = 0; i < locs.size(); ++i) out.push_back(LoadImpl(locs[i], keys[i]));
  return out;
}

StatusOr<Location> Tier::Adopt(BlobPtr blob, uint64_t reserved) {
  const uint64_t raw = blob->size();
  auto loc = AdoptImpl(std::move(blob), reserved);
  if (loc.ok()) {
    loc->raw_bytes = raw;
    counters_.objects.fetch_add(1, std::memory_order_relaxed);
    counters_.raw_bytes.fetch_add(raw, std::memory_order_relaxed);
    counters_.admitted_raw_bytes.fetch_add(raw, std::memory_order_relaxed);
    counters_.writes.fetch_add(1, std::memory_order_relaxed);
  }
  return loc;
}

StatusOr<Location> Tier::AdoptImpl(BlobPtr, uint64_t) {
  return Status::NotSupported("tier '" + name() + "' cannot adopt host memory");
}

void Tier::Free(Location& loc) {
  counters_.objects.fetch_sub(1, std::memory_order_relaxed);
  counters_.raw_bytes.fetch_sub(loc.raw_bytes, std::memory_order_relaxed);
  counters_.freed_raw_bytes.fetch_add(loc.raw_bytes, std::memory_order_relaxed);
  FreeImpl(loc);
}

void Tier::KeepAsCopy(uint64_t raw_bytes) {
  counters_.objects.fetch_sub(1, std::memory_order_relaxed);
  counters_.raw_bytes.fetch_sub(raw_bytes, std::memory_order_relaxed);
}

void Tier::ServeFromCopy(uint64_t raw_bytes) {
  counters_.objects.fetch_add(1, std::memory_order_relaxed);
  counters_.raw_bytes.fetch_add(raw_bytes, std::memory_order_relaxed);
}

void Tier::FreeCopy(Location& loc) {
  counters_.freed_raw_bytes.fetch_add(loc.raw_bytes, std::memory_order_relaxed);
  FreeImpl(loc);
}

}  // namespace spillway
