// base/cuda_runtime.h against a real device: classification, copies, the
// gather kernel, pools, managed memory and the config probe.
#include <algorithm>
#include <cstdlib>
#include <random>

#include "spillway/config_loader.h"
#include "test_util.h"
#include "tiers/gpu/gpu_test_util.h"

namespace spillway {
namespace {

using testing::DeviceBuffer;
using testing::Download;
using testing::RandomBytes;

TEST_CASE("cuda: device count and memory info") {
  SPILLWAY_REQUIRE_GPU();
  auto n = cuda::DeviceCount();
  REQUIRE_MESSAGE(n.ok(), n.status().ToString());
  CHECK(*n >= 1);
  auto info = cuda::GetMemInfo(0);
  REQUIRE(info.ok());
  CHECK(info->total_bytes > 0);
  CHECK(info->free_bytes <= info->total_bytes);
  auto total = cuda::DeviceTotalBytes(0);
  REQUIRE(total.ok());
  CHECK(*total == info->total_bytes);
  CHECK(cuda::CheckDevice(*n).code() == StatusCode::kNotSupported);  // one past the last
}

TEST_CASE("cuda: pointers are classified host, pinned, device and managed") {
  SPILLWAY_REQUIRE_GPU();
  std::vector<std::byte> pageable(4096);
  auto k = cuda::Classify(pageable.data());
  REQUIRE(k.ok());
  CHECK(k->kind == cuda::PointerKind::kPageable);

  DeviceBuffer d(1 << 20);
  k = cuda::Classify(d.data() + 100);  // interior pointers too
  REQUIRE(k.ok());
  CHECK(k->kind == cuda::PointerKind::kDevice);
  CHECK(k->device == 0);

  auto h = cuda::MallocHost(1 << 20);
  REQUIRE(h.ok());
  k = cuda::Classify(*h);
  CHECK(k->kind == cuda::PointerKind::kPinnedHost);
  cuda::FreeHost(*h);

  void* reg = std::aligned_alloc(4096, 1 << 20);
  REQUIRE(cuda::HostRegister(reg, 1 << 20).ok());
  CHECK(cuda::Classify(reg)->kind == cuda::PointerKind::kPinnedHost);
  CHECK(cuda::HostUnregister(reg).ok());
  std::free(reg);

  auto m = cuda::MallocManaged(0, 1 << 20);
  REQUIRE_MESSAGE(m.ok(), m.status().ToString());
  CHECK(cuda::Classify(*m)->kind == cuda::PointerKind::kManaged);
  cuda::Free(*m);
}

TEST_CASE("cuda: async copies in every direction round-trip, timed with events") {
  SPILLWAY_REQUIRE_GPU();
  const uint64_t n = 8 << 20;
  auto src = RandomBytes(n, 1);
  auto s = cuda::Stream::Create(0);
  REQUIRE(s.ok());
  auto pinned = cuda::MallocHost(n);
  REQUIRE(pinned.ok());
  DeviceBuffer a(n), b(n);
  auto t0 = cuda::Event::Create(0, true);
  auto t1 = cuda::Event::Create(0, true);
  REQUIRE(t0.ok());
  REQUIRE(t1.ok());
  std::memcpy(*pinned, src.data(), n);
  CHECK(t0->Record(*s).ok());
  CHECK(cuda::MemcpyAsync(a.data(), *pinned, n, *s).ok());       // H2D pinned
  CHECK(cuda::MemcpyAsync(b.data(), a.data(), n, *s).ok());      // D2D
  CHECK(t1->Record(*s).ok());
  std::vector<std::byte> back(n);
  CHECK(cuda::MemcpyAsync(back.data(), b.data(), n, *s).ok());   // D2H pageable
  CHECK(s->Synchronize().ok());
  CHECK(back == src);
  auto ms = cuda::Event::ElapsedMs(*t0, *t1);
  REQUIRE(ms.ok());
  CHECK(*ms > 0);
  auto done = t1->Done();
  REQUIRE(done.ok());
  CHECK(*done);
  cuda::FreeHost(*pinned);
}

TEST_CASE("cuda: the gather kernel copies pieces of any size and alignment") {
  SPILLWAY_REQUIRE_GPU();
  Status ks = cuda::CopyKernelStatus();
  CHECK_MESSAGE(ks.ok(), "gather kernel not loaded (falls back to one DMA per piece): " << ks.ToString());
  const uint64_t n = 32 << 20;
  auto src = RandomBytes(n, 7);
  DeviceBuffer in(n), out(n);
  in.Upload(src);
  auto s = cuda::Stream::Create(0);
  REQUIRE(s.ok());
  REQUIRE(cuda::MemsetAsync(out.data(), 0, n, *s).ok());
  // Non-overlapping pieces at odd offsets, including 0-byte and > 256 KiB ones,
  // more than one launch's worth (160).
  std::mt19937_64 rng(3);
  std::vector<cuda::CopyPiece> pieces;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // (src_off, len), dst_off = n - src_off - len
  uint64_t off = 0;
  while (pieces.size() < 700) {
    const uint64_t len = pieces.size() % 50 == 7 ? 0 : (pieces.size() % 97 == 3 ? 700000 : rng() % 40000);
    const uint64_t gap = rng() % 17;
    if (off + gap + len > n / 2) break;
    off += gap;
    pieces.push_back({in.data() + off, out.data() + (n - off - len), len});
    ranges.emplace_back(off, len);
    off += len;
  }
  REQUIRE(pieces.size() > 300);
  REQUIRE(cuda::CopyPiecesAsync(pieces, *s).ok());
  REQUIRE(s->Synchronize().ok());
  auto got = Download(out.data(), n);
  size_t bad = 0;
  for (auto [so, len] : ranges) {
    if (std::memcmp(got.data() + (n - so - len), src.data() + so, len) != 0) ++bad;
  }
  CHECK(bad == 0);
}

TEST_CASE("cuda: a device pool allocates stream-ordered and trims") {
  SPILLWAY_REQUIRE_GPU();
  auto pool = cuda::DevicePool::Create(0, 64 << 20);
  REQUIRE_MESSAGE(pool.ok(), pool.status().ToString());
  auto s = cuda::Stream::Create(0);
  REQUIRE(s.ok());
  std::vector<void*> ps;
  for (int i = 0; i < 16; ++i) {
    auto p = pool->AllocAsync(4 << 20, *s);
    REQUIRE(p.ok());
    ps.push_back(*p);
  }
  REQUIRE(s->Synchronize().ok());
  CHECK(pool->used_bytes() >= 64ull << 20);
  for (void* p : ps) CHECK(pool->FreeAsync(p, *s).ok());
  REQUIRE(s->Synchronize().ok());
  CHECK(pool->used_bytes() == 0);
  CHECK(pool->TrimTo(0).ok());
  CHECK(pool->reserved_bytes() == 0);
  // Out of memory is NoSpace, not an internal error.
  auto info = cuda::GetMemInfo(0);
  REQUIRE(info.ok());
  auto huge = pool->AllocAsync(info->total_bytes * 2, *s);
  CHECK(huge.status().code() == StatusCode::kNoSpace);
  CHECK(s->Synchronize().ok());
}

TEST_CASE("cuda: managed memory prefetches both ways and refuses over-subscription") {
  SPILLWAY_REQUIRE_GPU();
  const uint64_t n = 16 << 20;
  auto m = cuda::MallocManaged(0, n);
  REQUIRE(m.ok());
  auto* p = static_cast<std::byte*>(*m);
  auto src = RandomBytes(n, 11);
  std::memcpy(p, src.data(), n);  // host touch
  auto s = cuda::Stream::Create(0);
  REQUIRE(s.ok());
  CHECK(cuda::PrefetchAsync(p, n, 0, *s).ok());
  CHECK(cuda::PrefetchAsync(p, n, cuda::kHostLocation, *s).ok());
  CHECK(s->Synchronize().ok());
  CHECK(std::memcmp(p, src.data(), n) == 0);
  cuda::Free(p);
  auto info = cuda::GetMemInfo(0);
  REQUIRE(info.ok());
  auto too_big = cuda::MallocManaged(0, info->free_bytes);
  CHECK(too_big.status().code() == StatusCode::kNoSpace);
}

TEST_CASE("cuda: the config probe reports the devices") {
  SPILLWAY_REQUIRE_GPU();
  GpuProbe p = DetectGpus();
  CHECK(p.built_with_cuda);
  REQUIRE(!p.device_total_bytes.empty());
  CHECK(p.device_total_bytes[0] == *cuda::DeviceTotalBytes(0));
}

TEST_CASE("cuda: without a usable device every call reports why") {
  // Runs everywhere: on a GPU machine it checks an absent device ordinal.
  auto n = cuda::DeviceCount();
  if (!n.ok()) {
    CHECK(n.status().code() == StatusCode::kNotSupported);
    MESSAGE("no device: " << n.status().ToString());
    CHECK(cuda::Stream::Create(0).status().code() == StatusCode::kNotSupported);
    CHECK(cuda::Classify(&n)->kind == cuda::PointerKind::kPageable);
    return;
  }
  CHECK(cuda::Stream::Create(*n + 3).status().code() != StatusCode::kOk);
}

}  // namespace
}  // namespace spillway
