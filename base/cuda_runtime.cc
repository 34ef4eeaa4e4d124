// The CUDA runtime wrapper (base/cuda_runtime.h): the only file in spillway
// that includes a CUDA header. Compiled only when CUDA is found
// (SPILLWAY_HAVE_CUDA); base/cuda_runtime_stub.cc stands in otherwise.
#include "base/cuda_runtime.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <vector>


namespace spillway::cuda {
namespace {

Status Err(cudaError_t e, const std::string& what) {
  std::string m = what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
  cudaGetLastError();  // clear a non-sticky error so the next call does not see it
  switch (e) {
    case cudaErrorMemoryAllocation:
      return Status::NoSpace(m);
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorNotSupported:
    case cudaErrorSystemNotReady:
    case cudaErrorSystemDriverMismatch:
    case cudaErrorCompatNotSupportedOnDevice:
    case cudaErrorDevicesUnavailable:
    case cudaErrorStubLibrary:
    case cudaErrorInitializationError:
    case cudaErrorJitCompilerNotFound:
    case cudaErrorUnsupportedPtxVersion:
      return Status::NotSupported(m);
    case cudaErrorInvalidDevice:
      return Status::InvalidArgument(m);
    default:
      return Status::Internal(m);
  }
}

#define SPW_CUDA(call, what)                          \
  do {                                                \
    cudaError_t _e = (call);                          \
    if (_e != cudaSuccess) return Err(_e, (what));    \
  } while (0)

// Makes `device` current for one call and restores the caller's device after,
// so a library call (a Blob's deleter on an application thread, say) never
// changes which device the application's thread works on.
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) : device_(device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) {
      cudaGetLastError();
      prev_ = -1;
    }
    if (prev_ != device_) err_ = cudaSetDevice(device_);
  }
  ~ScopedDevice() {
    if (prev_ >= 0 && prev_ != device_ && err_ == cudaSuccess) cudaSetDevice(prev_);
  }
  Status status() const {
    return err_ == cudaSuccess ? Status::OK() : Err(err_, "cudaSetDevice(" + std::to_string(device_) + ")");
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int device_;
  int prev_ = -1;
  cudaError_t err_ = cudaSuccess;
};

#define SPW_ON_DEVICE(d)         \
  ScopedDevice _dev_guard(d);    \
  SPILLWAY_RETURN_IF_ERROR(_dev_guard.status())

cudaStream_t S(const Stream& s) { return static_cast<cudaStream_t>(s.native()); }

// ---- the gather/scatter kernel ------------------------------------------------
//
// spillway builds no .cu files (the project's languages are C and C++), so the
// kernel travels as PTX, JIT-compiled by the driver on first use for whatever
// GPU is present (sm_75 and newer). Source, compiled with
//   nvcc -ptx -arch=compute_75 -O3 copy_pieces.cu     (CUDA 13.0)
//
//   struct Piece { unsigned long long src, dst; unsigned int size, pad; };
//   struct CopyArgs { unsigned int n, pad; Piece pieces[160]; };
//   extern "C" __global__ void __launch_bounds__(256) spillway_copy_pieces(CopyArgs args) {
//     const unsigned i = blockIdx.x;
//     if (i >= args.n) return;
//     const Piece p = args.pieces[i];
//     const unsigned char* s = reinterpret_cast<const unsigned char*>(p.src);
//     unsigned char* d = reinterpret_cast<unsigned char*>(p.dst);
//     const unsigned n = p.size;
//     if (((p.src | p.dst) & 15) == 0) {
//       const uint4* s4 = reinterpret_cast<const uint4*>(s);
//       uint4* d4 = reinterpret_cast<uint4*>(d);
//       const unsigned n4 = n >> 4;
//       for (unsigned k = threadIdx.x; k < n4; k += blockDim.x) d4[k] = s4[k];
//       for (unsigned k = (n4 << 4) + threadIdx.x; k < n; k += blockDim.x) d[k] = s[k];
//     } else {
//       for (unsigned k = threadIdx.x; k < n; k += blockDim.x) d[k] = s[k];
//     }
//   }
//
// The descriptors travel by value as the kernel's parameter (3,848 bytes, under
// the 4 KiB every architecture accepts), so no descriptor upload is needed and
// the host may reuse its array as soon as the launch returns.
const char kCopyPiecesPtx[] = R"PTX(
.version 9.0
.target sm_75
.address_size 64

.visible .entry spillway_copy_pieces(
	.param .align 8 .b8 spillway_copy_pieces_param_0[3848]
)
.maxntid 256, 1, 1
{
	.reg .pred 	%p<9>;
	.reg .b16 	%rs<3>;
	.reg .b32 	%r<29>;
	.reg .b64 	%rd<21>;

	mov.b64 	%rd6, spillway_copy_pieces_param_0;
	ld.param.u32 	%r16, [spillway_copy_pieces_param_0];
	mov.u32 	%r1, %ctaid.x;
	setp.ge.u32 	%p1, %r1, %r16;
	@%p1 bra 	$L__BB0_11;

	mul.wide.u32 	%rd7, %r1, 24;
	add.s64 	%rd8, %rd6, %rd7;
	ld.param.u64 	%rd9, [%rd8+16];
	cvta.to.global.u64 	%rd2, %rd9;
	ld.param.u32 	%r2, [%rd8+24];
	ld.param.u64 	%rd3, [%rd8+8];
	cvta.to.global.u64 	%rd4, %rd3;
	or.b64  	%rd10, %rd3, %rd9;
	and.b64  	%rd11, %rd10, 15;
	setp.eq.s64 	%p2, %rd11, 0;
	@%p2 bra 	$L__BB0_5;

	mov.u32 	%r26, %tid.x;
	setp.ge.u32 	%p3, %r26, %r2;
	@%p3 bra 	$L__BB0_11;

	mov.u32 	%r4, %ntid.x;

$L__BB0_4:
	cvt.u64.u32 	%rd12, %r26;
	add.s64 	%rd13, %rd4, %rd12;
	ld.global.u8 	%rs1, [%rd13];
	add.s64 	%rd14, %rd2, %rd12;
	st.global.u8 	[%rd14], %rs1;
	add.s32 	%r26, %r26, %r4;
	setp.lt.u32 	%p4, %r26, %r2;
	@%p4 bra 	$L__BB0_4;
	bra.uni 	$L__BB0_11;

$L__BB0_5:
	mov.u32 	%r7, %tid.x;
	shr.u32 	%r8, %r2, 4;
	setp.ge.u32 	%p5, %r7, %r8;
	@%p5 bra 	$L__BB0_8;

	mov.u32 	%r9, %ntid.x;
	mov.u32 	%r27, %r7;

$L__BB0_7:
	mul.wide.u32 	%rd15, %r27, 16;
	add.s64 	%rd16, %rd2, %rd15;
	add.s64 	%rd17, %rd4, %rd15;
	ld.global.v4.u32 	{%r17, %r18, %r19, %r20}, [%rd17];
	st.global.v4.u32 	[%rd16], {%r17, %r18, %r19, %r20};
	add.s32 	%r27, %r27, %r9;
	setp.lt.u32 	%p6, %r27, %r8;
	@%p6 bra 	$L__BB0_7;

$L__BB0_8:
	and.b32  	%r25, %r2, -16;
	add.s32 	%r28, %r25, %r7;
	setp.ge.u32 	%p7, %r28, %r2;
	@%p7 bra 	$L__BB0_11;

	mov.u32 	%r13, %ntid.x;

$L__BB0_10:
	cvt.u64.u32 	%rd18, %r28;
	add.s64 	%rd19, %rd4, %rd18;
	ld.global.u8 	%rs2, [%rd19];
	add.s64 	%rd20, %rd2, %rd18;
	st.global.u8 	[%rd20], %rs2;
	add.s32 	%r28, %r28, %r13;
	setp.lt.u32 	%p8, %r28, %r2;
	@%p8 bra 	$L__BB0_10;

$L__BB0_11:
	ret;
}
)PTX";

constexpr unsigned kMaxPieces = 160;
constexpr uint64_t kMaxPieceBytes = 256u << 10;
constexpr unsigned kThreads = 256;

struct KernelPiece {
  unsigned long long src, dst;
  unsigned int size, pad;
};
struct KernelArgs {
  unsigned int n, pad;
  KernelPiece pieces[kMaxPieces];
};
static_assert(sizeof(KernelArgs) == 3848, "must match the PTX parameter size");

struct CopyKernel {
  std::once_flag once;
  cudaKernel_t kernel = nullptr;
  Status status = Status::NotSupported("not loaded");
};
CopyKernel& Kernel() {
  static CopyKernel k;
  return k;
}

void LoadKernel() {
  CopyKernel& k = Kernel();
  std::call_once(k.once, [&k] {
    cudaLibrary_t lib = nullptr;
    cudaError_t e = cudaLibraryLoadData(&lib, kCopyPiecesPtx, nullptr, nullptr, 0, nullptr, nullptr, 0);
    if (e != cudaSuccess) {
      k.status = Err(e, "cudaLibraryLoadData(copy kernel PTX)");
      return;
    }
    e = cudaLibraryGetKernel(&k.kernel, lib, "spillway_copy_pieces");
    if (e != cudaSuccess) {
      k.status = Err(e, "cudaLibraryGetKernel(spillway_copy_pieces)");
      return;
    }
    k.status = Status::OK();  // the library stays loaded for the process
  });
}

}  // namespace

std::vector<uint64_t> VisibleDeviceTotalBytes() {
  std::vector<uint64_t> out;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return out;
  }
  for (int d = 0; d < n; ++d) {
    auto total = DeviceTotalBytes(d);
    out.push_back(total.ok() ? *total : 0);
  }
  return out;
}

bool BuiltWithCuda() { return true; }

StatusOr<int> DeviceCount() {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) return Err(e, "cudaGetDeviceCount");
  if (n == 0) return Status::NotSupported("no CUDA device visible");
  return n;
}

Status CheckDevice(int device) {
  auto n = DeviceCount();
  if (!n.ok()) return n.status();
  if (device < 0 || device >= *n) {
    return Status::NotSupported("CUDA device " + std::to_string(device) + " does not exist (" +
                                std::to_string(*n) + " visible)");
  }
  SPW_ON_DEVICE(device);
  SPW_CUDA(cudaFree(nullptr), "creating the context of device " + std::to_string(device));
  return Status::OK();
}

StatusOr<MemInfo> GetMemInfo(int device) {
  SPW_ON_DEVICE(device);
  size_t free_b = 0, total_b = 0;
  SPW_CUDA(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return MemInfo{free_b, total_b};
}

StatusOr<uint64_t> DeviceTotalBytes(int device) {
  cudaDeviceProp prop;
  SPW_CUDA(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties(" + std::to_string(device) + ")");
  return static_cast<uint64_t>(prop.totalGlobalMem);
}

StatusOr<DeviceIdentity> GetDeviceIdentity(int device) {
  // The ordinal -> GPU mapping cannot change within a process; reading the
  // properties takes tens of microseconds, and the device check of every
  // stored object asks once per object.
  static std::mutex mu;
  static std::vector<std::optional<DeviceIdentity>> cache;
  {
    std::lock_guard<std::mutex> l(mu);
    if (device >= 0 && static_cast<size_t>(device) < cache.size() && cache[device]) return *cache[device];
  }
  cudaDeviceProp prop;
  SPW_CUDA(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties(" + std::to_string(device) + ")");
  DeviceIdentity id;
  id.ordinal = device;
  id.name = prop.name;
  id.total_bytes = static_cast<uint64_t>(prop.totalGlobalMem);
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  char buf[64];
  std::snprintf(buf, sizeof buf, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  id.uuid = buf;
  std::snprintf(buf, sizeof buf, "%04x:%02x:%02x.0", static_cast<unsigned>(prop.pciDomainID),
                static_cast<unsigned>(prop.pciBusID), static_cast<unsigned>(prop.pciDeviceID));
  id.pci_bus_id = buf;
  std::lock_guard<std::mutex> l(mu);
  if (cache.size() <= static_cast<size_t>(device)) cache.resize(device + 1);
  cache[device] = id;
  return id;
}

StatusOr<PointerInfo> Classify(const void* p) {
  cudaPointerAttributes a;
  std::memset(&a, 0, sizeof(a));
  cudaError_t e = cudaPointerGetAttributes(&a, p);
  if (e != cudaSuccess) {
    // No driver, no device, or a pointer CUDA never saw: it cannot be device memory.
    cudaGetLastError();
    return PointerInfo{PointerKind::kPageable, -1};
  }
  switch (a.type) {
    case cudaMemoryTypeHost:
      return PointerInfo{PointerKind::kPinnedHost, a.device};
    case cudaMemoryTypeDevice:
      return PointerInfo{PointerKind::kDevice, a.device};
    case cudaMemoryTypeManaged:
      return PointerInfo{PointerKind::kManaged, a.device};
    default:
      return PointerInfo{PointerKind::kPageable, -1};
  }
}

const char* PointerKindName(PointerKind k) {
  switch (k) {
    case PointerKind::kPageable: return "pageable";
    case PointerKind::kPinnedHost: return "pinned-host";
    case PointerKind::kDevice: return "device";
    case PointerKind::kManaged: return "managed";
  }
  return "?";
}

// ---- Stream / Event ------------------------------------------------------------

StatusOr<Stream> Stream::Create(int device) {
  SPW_ON_DEVICE(device);
  cudaStream_t s = nullptr;
  SPW_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return Stream(s, device);
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    handle_ = o.handle_;
    device_ = o.device_;
    o.handle_ = nullptr;
  }
  return *this;
}

Stream::~Stream() {
  if (handle_) cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
}

Status Stream::Synchronize() const {
  SPW_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize");
  return Status::OK();
}

StatusOr<Event> Event::Create(int device, bool timing) {
  SPW_ON_DEVICE(device);
  cudaEvent_t e = nullptr;
  SPW_CUDA(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming),
           "cudaEventCreateWithFlags");
  return Event(e, device);
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    handle_ = o.handle_;
    device_ = o.device_;
    o.handle_ = nullptr;
  }
  return *this;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

Status Event::Record(const Stream& s) {
  SPW_ON_DEVICE(s.device());
  SPW_CUDA(cudaEventRecord(static_cast<cudaEvent_t>(handle_), S(s)), "cudaEventRecord");
  return Status::OK();
}

Status Event::Synchronize() const {
  SPW_CUDA(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
  return Status::OK();
}

StatusOr<bool> Event::Done() const {
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  return Err(e, "cudaEventQuery");
}

StatusOr<float> Event::ElapsedMs(const Event& start, const Event& end) {
  float ms = 0;
  SPW_CUDA(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start.handle_),
                                static_cast<cudaEvent_t>(end.handle_)),
           "cudaEventElapsedTime");
  return ms;
}

Status StreamWaitEvent(const Stream& s, const Event& e) {
  SPW_CUDA(cudaStreamWaitEvent(S(s), static_cast<cudaEvent_t>(e.native()), 0), "cudaStreamWaitEvent");
  return Status::OK();
}

Status StreamWaitLegacyDefault(const Stream& s) {
  SPW_ON_DEVICE(s.device());
  cudaEvent_t ev = nullptr;
  SPW_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cudaError_t err = cudaEventRecord(ev, cudaStreamLegacy);
  if (err == cudaSuccess) err = cudaStreamWaitEvent(S(s), ev, 0);
  cudaEventDestroy(ev);  // released once the wait is satisfied
  SPW_CUDA(err, "waiting for the legacy default stream");
  return Status::OK();
}

Status SynchronizeForeignStream(uintptr_t stream) {
  cudaStream_t st = stream == 0 || stream == 1 ? cudaStreamLegacy
                    : stream == 2              ? cudaStreamPerThread
                                               : reinterpret_cast<cudaStream_t>(stream);
  SPW_CUDA(cudaStreamSynchronize(st), "cudaStreamSynchronize of a caller's stream");
  return Status::OK();
}

// ---- copies ----------------------------------------------------------------------

Status MemcpyAsync(void* dst, const void* src, uint64_t bytes, const Stream& s) {
  if (bytes == 0) return Status::OK();
  SPW_ON_DEVICE(s.device());
  SPW_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, S(s)),
           "cudaMemcpyAsync of " + std::to_string(bytes) + " bytes");
  return Status::OK();
}

Status Memcpy(void* dst, const void* src, uint64_t bytes) {
  if (bytes == 0) return Status::OK();
  SPW_CUDA(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "cudaMemcpy of " + std::to_string(bytes) + " bytes");
  return Status::OK();
}

Status MemsetAsync(void* dst, int value, uint64_t bytes, const Stream& s) {
  if (bytes == 0) return Status::OK();
  SPW_ON_DEVICE(s.device());
  SPW_CUDA(cudaMemsetAsync(dst, value, bytes, S(s)), "cudaMemsetAsync");
  return Status::OK();
}

Status MemcpyBatchAsync(std::span<void* const> dsts, std::span<const void* const> srcs,
                        std::span<const size_t> sizes, const Stream& s) {
  if (dsts.size() != srcs.size() || dsts.size() != sizes.size()) {
    return Status::InvalidArgument("MemcpyBatchAsync: arrays differ in length");
  }
  if (dsts.empty()) return Status::OK();
  SPW_ON_DEVICE(s.device());
  cudaMemcpyAttributes attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t idx = 0;
#if CUDART_VERSION >= 13000
  SPW_CUDA(cudaMemcpyBatchAsync(const_cast<void**>(dsts.data()), const_cast<const void**>(srcs.data()),
                                const_cast<size_t*>(sizes.data()), dsts.size(), &attr, &idx, 1, S(s)),
           "cudaMemcpyBatchAsync");
#else
  size_t fail = 0;
  SPW_CUDA(cudaMemcpyBatchAsync(const_cast<void**>(dsts.data()), const_cast<void**>(srcs.data()),
                                const_cast<size_t*>(sizes.data()), dsts.size(), &attr, &idx, 1, &fail, S(s)),
           "cudaMemcpyBatchAsync");
#endif
  return Status::OK();
}

Status CopyKernelStatus() {
  LoadKernel();
  return Kernel().status;
}

Status CopyPiecesAsync(std::span<const CopyPiece> pieces, const Stream& s) {
  if (pieces.empty()) return Status::OK();
  SPW_ON_DEVICE(s.device());
  LoadKernel();
  CopyKernel& k = Kernel();
  if (!k.status.ok()) {
    for (const CopyPiece& p : pieces) SPILLWAY_RETURN_IF_ERROR(MemcpyAsync(p.dst, p.src, p.bytes, s));
    return Status::OK();
  }
  KernelArgs args;
  args.n = 0;
  args.pad = 0;
  auto launch = [&]() -> Status {
    if (args.n == 0) return Status::OK();
    void* params[] = {&args};
    SPW_CUDA(cudaLaunchKernel(reinterpret_cast<const void*>(k.kernel), dim3(args.n), dim3(kThreads), params, 0, S(s)),
             "launching spillway_copy_pieces");
    args.n = 0;
    return Status::OK();
  };
  for (const CopyPiece& p : pieces) {
    for (uint64_t off = 0; off < p.bytes; off += kMaxPieceBytes) {
      const uint64_t n = std::min(kMaxPieceBytes, p.bytes - off);
      KernelPiece& kp = args.pieces[args.n++];
      kp.src = reinterpret_cast<uintptr_t>(p.src) + off;
      kp.dst = reinterpret_cast<uintptr_t>(p.dst) + off;
      kp.size = static_cast<unsigned>(n);
      kp.pad = 0;
      if (args.n == kMaxPieces) SPILLWAY_RETURN_IF_ERROR(launch());
    }
  }
  return launch();
}

// ---- memory ----------------------------------------------------------------------

StatusOr<void*> Malloc(int device, uint64_t bytes) {
  SPW_ON_DEVICE(device);
  void* p = nullptr;
  SPW_CUDA(cudaMalloc(&p, std::max<uint64_t>(bytes, 1)), "cudaMalloc of " + std::to_string(bytes) + " bytes");
  return p;
}

void Free(void* p) {
  if (p) cudaFree(p);
}

StatusOr<DevicePool> DevicePool::Create(int device, uint64_t release_threshold) {
  SPW_ON_DEVICE(device);
  int supported = 0;
  SPW_CUDA(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device),
           "cudaDeviceGetAttribute(MemoryPoolsSupported)");
  if (!supported) return Status::NotSupported("device " + std::to_string(device) + " has no stream-ordered memory pools");
  cudaMemPoolProps props;
  std::memset(&props, 0, sizeof(props));
  props.allocType = cudaMemAllocationTypePinned;
  props.handleTypes = cudaMemHandleTypeNone;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  cudaMemPool_t pool = nullptr;
  SPW_CUDA(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
  uint64_t threshold = release_threshold;
  cudaError_t e = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  if (e != cudaSuccess) {
    cudaMemPoolDestroy(pool);
    return Err(e, "cudaMemPoolSetAttribute(ReleaseThreshold)");
  }
  return DevicePool(pool, device);
}

DevicePool& DevicePool::operator=(DevicePool&& o) noexcept {
  if (this != &o) {
    if (handle_) cudaMemPoolDestroy(static_cast<cudaMemPool_t>(handle_));
    handle_ = o.handle_;
    device_ = o.device_;
    o.handle_ = nullptr;
  }
  return *this;
}

DevicePool::~DevicePool() {
  if (handle_) cudaMemPoolDestroy(static_cast<cudaMemPool_t>(handle_));
}

StatusOr<void*> DevicePool::AllocAsync(uint64_t bytes, const Stream& s) {
  SPW_ON_DEVICE(device_);
  void* p = nullptr;
  SPW_CUDA(cudaMallocFromPoolAsync(&p, std::max<uint64_t>(bytes, 1), static_cast<cudaMemPool_t>(handle_), S(s)),
           "cudaMallocFromPoolAsync of " + std::to_string(bytes) + " bytes on device " + std::to_string(device_));
  return p;
}

Status DevicePool::FreeAsync(void* p, const Stream& s) {
  if (!p) return Status::OK();
  SPW_ON_DEVICE(device_);
  SPW_CUDA(cudaFreeAsync(p, S(s)), "cudaFreeAsync");
  return Status::OK();
}

Status DevicePool::TrimTo(uint64_t keep_bytes) {
  SPW_CUDA(cudaMemPoolTrimTo(static_cast<cudaMemPool_t>(handle_), keep_bytes), "cudaMemPoolTrimTo");
  return Status::OK();
}

uint64_t DevicePool::reserved_bytes() const {
  uint64_t v = 0;
  if (cudaMemPoolGetAttribute(static_cast<cudaMemPool_t>(handle_), cudaMemPoolAttrReservedMemCurrent, &v) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}

uint64_t DevicePool::used_bytes() const {
  uint64_t v = 0;
  if (cudaMemPoolGetAttribute(static_cast<cudaMemPool_t>(handle_), cudaMemPoolAttrUsedMemCurrent, &v) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}

StatusOr<void*> MallocHost(uint64_t bytes) {
  void* p = nullptr;
  SPW_CUDA(cudaMallocHost(&p, std::max<uint64_t>(bytes, 1)), "cudaMallocHost of " + std::to_string(bytes) + " bytes");
  return p;
}

void FreeHost(void* p) {
  if (p) cudaFreeHost(p);
}

Status HostRegister(void* p, uint64_t bytes) {
  SPW_CUDA(cudaHostRegister(p, bytes, cudaHostRegisterPortable),
           "cudaHostRegister of " + std::to_string(bytes) + " bytes");
  return Status::OK();
}

Status HostUnregister(void* p) {
  SPW_CUDA(cudaHostUnregister(p), "cudaHostUnregister");
  return Status::OK();
}

StatusOr<void*> MallocManaged(int device, uint64_t bytes) {
  // Never over-subscribe: keep a margin for the context and other allocations.
  constexpr uint64_t kMargin = 256ull << 20;
  auto info = GetMemInfo(device);
  if (!info.ok()) return info.status();
  if (bytes + kMargin > info->free_bytes) {
    return Status::NoSpace("managed allocation of " + std::to_string(bytes) + " bytes refused: device " +
                           std::to_string(device) + " has " + std::to_string(info->free_bytes) +
                           " bytes free (over-subscribing managed memory can hang the GPU)");
  }
  void* p = nullptr;
  SPW_CUDA(cudaMallocManaged(&p, std::max<uint64_t>(bytes, 1), cudaMemAttachGlobal),
           "cudaMallocManaged of " + std::to_string(bytes) + " bytes");
  return p;
}

Status PrefetchAsync(const void* p, uint64_t bytes, int location, const Stream& s) {
  if (bytes == 0) return Status::OK();
  SPW_ON_DEVICE(s.device());
#if CUDART_VERSION >= 13000
  cudaMemLocation loc;
  std::memset(&loc, 0, sizeof(loc));
  if (location == kHostLocation) {
    loc.type = cudaMemLocationTypeHost;
    loc.id = 0;
  } else {
    loc.type = cudaMemLocationTypeDevice;
    loc.id = location;
  }
  SPW_CUDA(cudaMemPrefetchAsync(p, bytes, loc, 0, S(s)), "cudaMemPrefetchAsync");
#else
  SPW_CUDA(cudaMemPrefetchAsync(p, bytes, location == kHostLocation ? cudaCpuDeviceId : location, S(s)),
           "cudaMemPrefetchAsync");
#endif
  return Status::OK();
}


}  // namespace spillway::cuda
