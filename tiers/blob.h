// Blob: the bytes of one object in memory (its buffers concatenated), shared
// by the tier that stores it and by every Handle that pins it.
//
// A Blob may be "accounted" in a memory tier: its destructor then returns its
// bytes to that tier, so memory pinned by a Handle after an Erase is still
// counted until the Handle lets go.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <span>
#include <vector>

namespace spillway {

enum class MemoryKind : unsigned char { kHost, kDevice, kManaged };

class Blob;
// Called with the number of bytes when an accounted Blob is destroyed.
class BlobAccount {
 public:
  virtual ~BlobAccount() = default;
  virtual void OnBlobFreed(uint64_t bytes) = 0;
};

class Blob {
 public:
  // Frees `data`; default is std::free (memory from AllocateHost).
  using Deleter = std::function<void(std::byte*, uint64_t)>;

  Blob(std::byte* data, uint64_t size, std::vector<uint64_t> buffer_sizes, MemoryKind kind,
       Deleter deleter = nullptr)
      : data_(data), size_(size), buffer_sizes_(std::move(buffer_sizes)), kind_(kind),
        deleter_(std::move(deleter)) {}
  ~Blob() {
    if (deleter_) {
      deleter_(data_, size_);
    } else {
      std::free(data_);
    }
    if (account_) account_->OnBlobFreed(accounted_bytes_);
  }
  Blob(const Blob&) = delete;
  Blob& operator=(const Blob&) = delete;

  // Host memory for `size` bytes, 64-byte aligned; null when out of memory.
  static std::byte* AllocateHost(uint64_t size) {
    size_t n = (size + 63) & ~size_t{63};
    return static_cast<std::byte*>(std::aligned_alloc(64, n ? n : 64));
  }

  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  MemoryKind kind() const { return kind_; }
  size_t num_buffers() const { return buffer_sizes_.size(); }
  const std::vector<uint64_t>& buffer_sizes() const { return buffer_sizes_; }
  std::span<const std::byte> buffer(size_t i) const {
    uint64_t off = 0;
    for (size_t j = 0; j < i; ++j) off += buffer_sizes_[j];
    return {data_ + off, static_cast<size_t>(buffer_sizes_[i])};
  }
  // Fills `out` with one span per buffer.
  void Spans(std::vector<std::span<const std::byte>>* out) const {
    out->clear();
    uint64_t off = 0;
    for (uint64_t n : buffer_sizes_) {
      out->emplace_back(data_ + off, static_cast<size_t>(n));
      off += n;
    }
  }

  // REQUIRES: not yet accounted. `account` must outlive the Blob.
  void SetAccount(BlobAccount* account, uint64_t bytes) {
    account_ = account;
    accounted_bytes_ = bytes;
  }
  bool accounted() const { return account_ != nullptr; }

 private:
  std::byte* data_;
  uint64_t size_;
  std::vector<uint64_t> buffer_sizes_;
  MemoryKind kind_;
  Deleter deleter_;
  BlobAccount* account_ = nullptr;
  uint64_t accounted_bytes_ = 0;
};

using BlobPtr = std::shared_ptr<Blob>;

}  // namespace spillway
