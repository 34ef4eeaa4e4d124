// Helpers for the GPU tests: a visible skip when there is no usable GPU, and
// device buffers with known contents.
//
// Every test that needs a GPU starts with SPILLWAY_REQUIRE_GPU(): without CUDA
// or without a device it skips visibly with SPILLWAY_SKIP_TEST ("SKIPPED: no
// CUDA device: <reason>"; CTest reports the case as skipped, test_main.cc).
#pragma once

#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "base/cuda_runtime.h"
#include "test_util.h"

namespace spillway::testing {

// Why GPU tests cannot run here; empty when they can. Checked once; never
// destroyed, so it can still be printed from an exit handler.
inline const std::string& NoGpuReason() {
  static const std::string* reason = [] {
    if (!cuda::BuiltWithCuda()) return new std::string("built without CUDA");
    Status st = cuda::CheckDevice(0);
    return new std::string(st.ok() ? std::string() : st.ToString());
  }();
  return *reason;
}

// Device memory freed at scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(uint64_t bytes, int device = 0) : bytes_(bytes) {
    auto p = cuda::Malloc(device, bytes);
    REQUIRE_MESSAGE(p.ok(), p.status().ToString());
    p_ = static_cast<std::byte*>(*p);
  }
  ~DeviceBuffer() { cuda::Free(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  std::byte* data() const { return p_; }
  uint64_t size() const { return bytes_; }
  std::span<const std::byte> span() const { return {p_, static_cast<size_t>(bytes_)}; }
  void Upload(const std::vector<std::byte>& v, uint64_t offset = 0) const {
    Status st = cuda::Memcpy(p_ + offset, v.data(), v.size());
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }

 private:
  uint64_t bytes_;
  std::byte* p_ = nullptr;
};

// Copies `n` bytes at device (or host) address `p` to a host vector.
inline std::vector<std::byte> Download(const void* p, uint64_t n) {
  std::vector<std::byte> v(n);
  Status st = cuda::Memcpy(v.data(), p, n);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return v;
}

inline bool SameBytes(const void* a, const std::vector<std::byte>& b) {
  return std::memcmp(a, b.data(), b.size()) == 0;
}

}  // namespace spillway::testing

#define SPILLWAY_REQUIRE_GPU()                                                        \
  do {                                                                                \
    if (!::spillway::testing::NoGpuReason().empty()) {                                \
      SPILLWAY_SKIP_TEST("no CUDA device: " + ::spillway::testing::NoGpuReason());   \
    }                                                                                 \
  } while (0)
