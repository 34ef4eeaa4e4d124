// Handle: a pin on one object. While a Handle lives, the object's bytes stay
// valid at buffer(i) and the engine never moves or frees them, even if the
// key is erased or overwritten meanwhile. Movable, not copyable.
//
// REQUIRES: every Handle is released before its Engine is destroyed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace spillway {

class Blob;
namespace internal {
struct Entry;
class EngineCore;
}  // namespace internal

// Where a caller wants an object's bytes (or where a Handle's bytes are).
enum class Where : unsigned char { kAny, kHost, kDevice };

class Handle {
 public:
  Handle() = default;
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { Release(); }

  bool valid() const { return blob_ != nullptr; }
  size_t num_buffers() const;
  // The i-th buffer as it was put. Device memory when where() == kDevice.
  std::span<const std::byte> buffer(size_t i) const;
  // Total bytes of all buffers.
  uint64_t size() const;
  Where where() const;
  // Unpins now (also done by the destructor).
  void Release();

 private:
  friend class internal::EngineCore;
  Handle(std::shared_ptr<Blob> blob, internal::Entry* entry, internal::EngineCore* core)
      : blob_(std::move(blob)), entry_(entry), core_(core) {}

  std::shared_ptr<Blob> blob_;
  internal::Entry* entry_ = nullptr;  // holds a pin and a reference; null for unindexed reads
  internal::EngineCore* core_ = nullptr;
};

}  // namespace spillway
