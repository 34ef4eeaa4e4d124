// A thin, Status-returning wrapper over the CUDA runtime: the only door to
// CUDA in spillway. base/cuda_runtime.cc is the one file that includes the
// CUDA headers; base/cuda_runtime_stub.cc provides the same functions in a
// build without CUDA, each returning NotSupported("built without CUDA").
//
// Conventions:
//  - A function that takes a device (or a Stream, or a pool) makes that device
//    current on the calling thread for the call and restores the thread's
//    previous device before returning.
//  - Out-of-memory is NoSpace; a missing driver or device is NotSupported with
//    the reason; any other CUDA error is Internal and names the call.
//  - Copies use cudaMemcpyDefault: with unified addressing the runtime tells
//    host from device pointers, so one call serves every direction.
//
// Thread-safety: every function may be called from any thread. A Stream or
// Event may be used by several threads (CUDA serializes them); the objects
// themselves are move-only handles, not synchronized for assignment.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "spillway/status.h"

namespace spillway::cuda {

// True in a build linked with the CUDA runtime (whether or not a GPU exists).
bool BuiltWithCuda();

// Number of visible devices. NotSupported when built without CUDA, when the
// driver is missing or too old, or when there is no device (the message says
// which); never 0 on success.
StatusOr<int> DeviceCount();
// OK when `device` exists and a context can be made on it; NotSupported with
// the reason otherwise. The first call per process pays the driver start.
Status CheckDevice(int device);

struct MemInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};
// cudaMemGetInfo on `device` (creates its primary context when needed).
StatusOr<MemInfo> GetMemInfo(int device);
// The device's total memory, read without creating a context.
StatusOr<uint64_t> DeviceTotalBytes(int device);

enum class PointerKind : unsigned char {
  kPageable,    // host memory CUDA does not know (malloc, mmap, stack)
  kPinnedHost,  // page-locked host memory (cudaMallocHost / cudaHostRegister)
  kDevice,      // device memory (cudaMalloc, cudaMallocAsync, pools)
  kManaged,     // cudaMallocManaged
};
struct PointerInfo {
  PointerKind kind = PointerKind::kPageable;
  int device = -1;  // owning device for kDevice; the allocating device otherwise
};
// What names a physical GPU whatever CUDA_VISIBLE_DEVICES does to its ordinal
// (each dask-cuda worker sees its own GPU as device 0): the UUID, as
// `nvidia-smi -L` prints it, and the PCI bus id.
struct DeviceIdentity {
  int ordinal = -1;        // in this process's numbering
  std::string uuid;        // "GPU-8e9f0a1b-...-..."
  std::string pci_bus_id;  // "0000:3b:00.0" (domain:bus:device.function)
  std::string name;        // "NVIDIA H200"
  uint64_t total_bytes = 0;
  bool operator==(const DeviceIdentity& o) const { return uuid == o.uuid && pci_bus_id == o.pci_bus_id; }
};
// cudaGetDeviceProperties of `device` (no context is made). Cached per
// ordinal after the first call: the numbering is fixed for the process.
StatusOr<DeviceIdentity> GetDeviceIdentity(int device);
// "device 1 (GPU-8e9f0a1b-..., 0000:3b:00.0)" for messages.
inline std::string DescribeDevice(const DeviceIdentity& id) {
  return "device " + std::to_string(id.ordinal) + " (" + id.uuid + ", " + id.pci_bus_id + ")";
}

// cudaPointerGetAttributes. Built without CUDA: kPageable for every pointer.
StatusOr<PointerInfo> Classify(const void* p);
const char* PointerKindName(PointerKind k);

// ---- streams and events ----------------------------------------------------

// A non-blocking stream on one device. Move-only; destroys the stream.
class Stream {
 public:
  static StatusOr<Stream> Create(int device);
  Stream() = default;
  Stream(Stream&& o) noexcept : handle_(o.handle_), device_(o.device_) { o.handle_ = nullptr; }
  Stream& operator=(Stream&& o) noexcept;
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  bool valid() const { return handle_ != nullptr; }
  void* native() const { return handle_; }  // cudaStream_t
  int device() const { return device_; }
  // Waits until all work queued so far is done.
  Status Synchronize() const;

 private:
  Stream(void* h, int device) : handle_(h), device_(device) {}
  void* handle_ = nullptr;
  int device_ = 0;
};

// An event for ordering and timing. Move-only; destroys the event.
class Event {
 public:
  // `timing` false makes a cheaper event that cannot be used with ElapsedMs.
  static StatusOr<Event> Create(int device, bool timing = false);
  Event() = default;
  Event(Event&& o) noexcept : handle_(o.handle_), device_(o.device_) { o.handle_ = nullptr; }
  Event& operator=(Event&& o) noexcept;
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  bool valid() const { return handle_ != nullptr; }
  void* native() const { return handle_; }  // cudaEvent_t
  Status Record(const Stream& s);
  Status Synchronize() const;
  // True when all work before the last Record is done.
  StatusOr<bool> Done() const;
  // Milliseconds between two recorded timing events.
  static StatusOr<float> ElapsedMs(const Event& start, const Event& end);

 private:
  Event(void* h, int device) : handle_(h), device_(device) {}
  void* handle_ = nullptr;
  int device_ = 0;
};

// Makes later work on `s` wait for `e`'s last Record.
Status StreamWaitEvent(const Stream& s, const Event& e);
// Makes later work on `s` (a non-blocking stream) wait for everything queued
// so far on the legacy default stream. A caller's cudaMemcpy from pageable
// memory returns before its DMA lands; copies the engine then issues on its
// own streams must not read the destination early.
Status StreamWaitLegacyDefault(const Stream& s);
// Waits for all work queued on a stream another library made (a cudaStream_t
// as its handle value; 0 or 1 is the legacy default stream, 2 the per-thread
// default stream, as in __cuda_array_interface__ v3). For allocators that hand
// memory back to the engine: the owner's pending kernels must finish first.
Status SynchronizeForeignStream(uintptr_t stream);

// ---- copies ------------------------------------------------------------------

// Queues a copy of `bytes` from `src` to `dst` (any kinds) on `s`. Asynchronous
// for device and page-locked memory; a pageable side makes the runtime stage it.
Status MemcpyAsync(void* dst, const void* src, uint64_t bytes, const Stream& s);
// Synchronous copy (legacy stream semantics; for tests and setup).
Status Memcpy(void* dst, const void* src, uint64_t bytes);
Status MemsetAsync(void* dst, int value, uint64_t bytes, const Stream& s);
// cudaMemcpyBatchAsync: many copies in one call (same stream, stream order).
Status MemcpyBatchAsync(std::span<void* const> dsts, std::span<const void* const> srcs,
                        std::span<const size_t> sizes, const Stream& s);

// One piece of a gather or scatter between device buffers.
struct CopyPiece {
  const void* src;
  void* dst;
  uint64_t bytes;
};
// Copies every piece (device or managed memory on the stream's device) with a
// single kernel launch per up to 160 pieces, instead of one DMA per piece: the
// way many small objects are packed into one staging buffer, so that they
// cross PCIe as one large copy. Pieces above 256 KiB are split across blocks.
// Falls back to one cudaMemcpyAsync per piece if the kernel cannot be loaded
// (see CopyKernelStatus).
Status CopyPiecesAsync(std::span<const CopyPiece> pieces, const Stream& s);
// OK when the gather kernel is loaded (it is JIT-compiled from PTX on first use).
Status CopyKernelStatus();

// ---- memory --------------------------------------------------------------------

// Plain device memory (cudaMalloc / cudaFree; cudaFree synchronizes the device).
StatusOr<void*> Malloc(int device, uint64_t bytes);
void Free(void* p);

// A stream-ordered memory pool (cudaMemPool) of one device. Move-only.
class DevicePool {
 public:
  // Memory freed to the pool stays reserved by it up to `release_threshold`
  // bytes; beyond that it goes back to the device at synchronization points.
  static StatusOr<DevicePool> Create(int device, uint64_t release_threshold);
  DevicePool() = default;
  DevicePool(DevicePool&& o) noexcept : handle_(o.handle_), device_(o.device_) { o.handle_ = nullptr; }
  DevicePool& operator=(DevicePool&& o) noexcept;
  ~DevicePool();
  DevicePool(const DevicePool&) = delete;
  DevicePool& operator=(const DevicePool&) = delete;

  bool valid() const { return handle_ != nullptr; }
  int device() const { return device_; }
  // cudaMallocFromPoolAsync. NoSpace when the device is out of memory.
  StatusOr<void*> AllocAsync(uint64_t bytes, const Stream& s);
  // cudaFreeAsync: the memory is reusable once `s` reaches this point.
  Status FreeAsync(void* p, const Stream& s);
  // Gives unused reserved memory back to the device, keeping `keep_bytes`.
  Status TrimTo(uint64_t keep_bytes);
  // Bytes the pool holds from the device / bytes handed out.
  uint64_t reserved_bytes() const;
  uint64_t used_bytes() const;

 private:
  DevicePool(void* h, int device) : handle_(h), device_(device) {}
  void* handle_ = nullptr;  // cudaMemPool_t
  int device_ = 0;
};

// Page-locked host memory. cudaMallocHost is slow (about 0.5 s per GiB on an
// H200 machine): allocate it once, in the background (PinnedHostAllocator).
StatusOr<void*> MallocHost(uint64_t bytes);
void FreeHost(void* p);
// Pins an existing host range (portable to every device).
Status HostRegister(void* p, uint64_t bytes);
Status HostUnregister(void* p);

// Managed (unified) memory. REQUIRES: `bytes` fits in the device's free
// memory: over-subscribing managed memory can hang the GPU. MallocManaged
// checks cudaMemGetInfo first and answers NoSpace rather than over-subscribe.
StatusOr<void*> MallocManaged(int device, uint64_t bytes);
// Location for PrefetchAsync meaning host memory.
inline constexpr int kHostLocation = -1;
// cudaMemPrefetchAsync to `location` (a device ordinal or kHostLocation).
Status PrefetchAsync(const void* p, uint64_t bytes, int location, const Stream& s);

// ---- configuration -------------------------------------------------------------

// Total memory of every visible device, in device order; empty without CUDA,
// without a driver or without devices (config's DetectGpus reads this).
std::vector<uint64_t> VisibleDeviceTotalBytes();

}  // namespace spillway::cuda
