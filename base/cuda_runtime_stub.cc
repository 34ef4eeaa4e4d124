// base/cuda_runtime.h in a build without CUDA: every call reports
// NotSupported("built without CUDA"). Compiles to nothing in a CUDA build,
// where base/cuda_runtime.cc provides the real functions.
#ifndef SPILLWAY_HAVE_CUDA

#include "base/cuda_runtime.h"

namespace spillway::cuda {
namespace {
Status NoCuda() { return Status::NotSupported("built without CUDA"); }
}  // namespace

bool BuiltWithCuda() { return false; }
StatusOr<int> DeviceCount() { return NoCuda(); }
Status CheckDevice(int) { return NoCuda(); }
StatusOr<MemInfo> GetMemInfo(int) { return NoCuda(); }
StatusOr<uint64_t> DeviceTotalBytes(int) { return NoCuda(); }
StatusOr<DeviceIdentity> GetDeviceIdentity(int) { return NoCuda(); }
StatusOr<PointerInfo> Classify(const void*) { return PointerInfo{PointerKind::kPageable, -1}; }
const char* PointerKindName(PointerKind k) {
  switch (k) {
    case PointerKind::kPageable: return "pageable";
    case PointerKind::kPinnedHost: return "pinned-host";
    case PointerKind::kDevice: return "device";
    case PointerKind::kManaged: return "managed";
  }
  return "?";
}

StatusOr<Stream> Stream::Create(int) { return NoCuda(); }
Stream& Stream::operator=(Stream&& o) noexcept {
  handle_ = o.handle_;
  device_ = o.device_;
  o.handle_ = nullptr;
  return *this;
}
Stream::~Stream() = default;
Status Stream::Synchronize() const { return NoCuda(); }

StatusOr<Event> Event::Create(int, bool) { return NoCuda(); }
Event& Event::operator=(Event&& o) noexcept {
  handle_ = o.handle_;
  device_ = o.device_;
  o.handle_ = nullptr;
  return *this;
}
Event::~Event() = default;
Status Event::Record(const Stream&) { return NoCuda(); }
Status Event::Synchronize() const { return NoCuda(); }
StatusOr<bool> Event::Done() const { return NoCuda(); }
StatusOr<float> Event::ElapsedMs(const Event&, const Event&) { return NoCuda(); }
Status StreamWaitEvent(const Stream&, const Event&) { return NoCuda(); }
Status StreamWaitLegacyDefault(const Stream&) { return NoCuda(); }
Status SynchronizeForeignStream(uintptr_t) { return NoCuda(); }

Status MemcpyAsync(void*, const void*, uint64_t, const Stream&) { return NoCuda(); }
Status Memcpy(void*, const void*, uint64_t) { return NoCuda(); }
Status MemsetAsync(void*, int, uint64_t, const Stream&) { return NoCuda(); }
Status MemcpyBatchAsync(std::span<void* const>, std::span<const void* const>, std::span<const size_t>,
                        const Stream&) {
  return NoCuda();
}
Status CopyPiecesAsync(std::span<const CopyPiece>, const Stream&) { return NoCuda(); }
Status CopyKernelStatus() { return NoCuda(); }

StatusOr<void*> Malloc(int, uint64_t) { return NoCuda(); }
void Free(void*) {}

StatusOr<DevicePool> DevicePool::Create(int, uint64_t) { return NoCuda(); }
DevicePool& DevicePool::operator=(DevicePool&& o) noexcept {
  handle_ = o.handle_;
  device_ = o.device_;
  o.handle_ = nullptr;
  return *this;
}
DevicePool::~DevicePool() = default;
StatusOr<void*> DevicePool::AllocAsync(uint64_t, const Stream&) { return NoCuda(); }
Status DevicePool::FreeAsync(void*, const Stream&) { return NoCuda(); }
Status DevicePool::TrimTo(uint64_t) { return NoCuda(); }
uint64_t DevicePool::reserved_bytes() const { return 0; }
uint64_t DevicePool::used_bytes() const { return 0; }

StatusOr<void*> MallocHost(uint64_t) { return NoCuda(); }
void FreeHost(void*) {}
Status HostRegister(void*, uint64_t) { return NoCuda(); }
Status HostUnregister(void*) { return NoCuda(); }
StatusOr<void*> MallocManaged(int, uint64_t) { return NoCuda(); }
Status PrefetchAsync(const void*, uint64_t, int, const Stream&) { return NoCuda(); }

std::vector<uint64_t> VisibleDeviceTotalBytes() { return {}; }

}  // namespace spillway::cuda

#endif  // SPILLWAY_HAVE_CUDA
