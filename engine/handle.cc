// Handle: the pin on an object; releasing it lets the engine move or free it.
#include "spillway/handle.h"

#include "engine/engine_core.h"
#include "tiers/blob.h"

namespace spillway {

Handle::Handle(Handle&& o) noexcept : blob_(std::move(o.blob_)), entry_(o.entry_), core_(o.core_) {
  o.entry_ = nullptr;
  o.core_ = nullptr;
}

Handle& Handle::operator=(Handle&& o) noexcept {
  if (this != &o) {
    Release();
    blob_ = std::move(o.blob_);
    entry_ = o.entry_;
    core_ = o.core_;
    o.entry_ = nullptr;
    o.core_ = nullptr;
  }
  return *this;
}

size_t Handle::num_buffers() const { return blob_ ? blob_->num_buffers() : 0; }

std::span<const std::byte> Handle::buffer(size_t i) const { return blob_->buffer(i); }

uint64_t Handle::size() const { return blob_ ? blob_->size() : 0; }

Where Handle::where() const {
  return blob_ && blob_->kind() == MemoryKind::kDevice ? Where::kDevice : Where::kHost;
}

void Handle::Release() {
  if (entry_ != nullptr) {
    internal::Entry* e = entry_;
    entry_ = nullptr;
    core_->Unpin(e);
    core_->Unref(e);
  }
  blob_.reset();
}

}  // namespace spillway
