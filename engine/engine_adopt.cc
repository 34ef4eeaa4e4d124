// EngineCore::PutHostAllocation: a host object the engine adopts instead of
// copying (the Python module's live NumPy buffers, docs/python.md).
//
// The caller's memory is wrapped in a Blob whose deleter is `release`; a host
// tier adopts it as it adopts a gpu tier's demoted batch (HostTier::Adopt),
// so everything downstream (pins, demotion, erase, replacement) treats it as
// any host object. The Blob's destructor runs where its last reference drops,
// which is why `release` must not block: an engine thread may call it.
#include "engine/engine_core.h"
#include "engine/mover.h"

namespace spillway::internal {

bool EngineCore::AdoptIntoHostTier(std::string_view key, const BlobPtr& blob, uint64_t bytes) {
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Tier& tier = *tiers_[t];
    // Placement's admission rule (capacity, max_object_size), as for Put.
    if (tier.kind() != TierKind::kHost || !placement_->Admits(static_cast<int>(t), bytes, bytes)) continue;
    if (!mover_->MakeRoom(static_cast<int>(t), bytes)) continue;
    auto loc = tier.Adopt(blob, bytes);
    if (!loc.ok()) {
      tier.Unreserve(bytes);
      continue;
    }
    puts_.fetch_add(1, std::memory_order_relaxed);
    Insert(key, bytes, static_cast<int>(t), std::move(*loc), next_sequence_.fetch_add(1, std::memory_order_relaxed));
    if (mover_) mover_->NudgeIfDue(static_cast<int>(t));
    return true;
  }
  return false;
}

Status EngineCore::PutHostAllocation(std::string_view key, const std::byte* data, std::vector<uint64_t> buffer_sizes,
                                     std::function<void(const std::byte*)> release) {
  if (Status st = CheckKey(key); !st.ok()) {
    if (release) release(data);
    return st;
  }
  if (buffer_sizes.size() > kMaxBuffers) {
    if (release) release(data);
    return Status::InvalidArgument("too many buffers in one object");
  }
  uint64_t size = 0;
  for (uint64_t n : buffer_sizes) size += n;
  Blob::Deleter deleter = [release = std::move(release)](std::byte* p, uint64_t) {
    if (release) release(p);
  };
  // The Blob never writes through the pointer; it is non-const only because
  // Blob also owns memory the engine fills.
  BlobPtr blob = std::make_shared<Blob>(const_cast<std::byte*>(data), size, std::move(buffer_sizes),
                                        MemoryKind::kHost, std::move(deleter));
  if (AdoptIntoHostTier(key, blob, size)) return Status::OK();
  // No host tier has room: store a copy down the chain (Put counts the put);
  // `release` runs when `blob` goes away at the end of this call.
  std::vector<std::span<const std::byte>> spans;
  blob->Spans(&spans);
  PutOptions po;
  po.memory = Where::kHost;
  return Put(key, spans, po);
}

}  // namespace spillway::internal
