// GpuTier on a real device: objects stored from device and host memory,
// copied back to the host singly, batched and streamed, adopted without a
// copy, in managed mode, concurrently, and with the pinned pool exhausted.
#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "gpu_test_util.h"

#ifndef SPILLWAY_HAVE_CUDA
// GpuTier is compiled only with CUDA.
TEST_CASE("gpu tier: needs a build with CUDA") { SPILLWAY_REQUIRE_GPU(); }
#else

#include "test_util.h"
#include "tiers/gpu_tier.h"
#include "tiers/pinned_pool.h"

namespace spillway {
namespace {

using namespace std::chrono_literals;
using testing::DeviceBuffer;
using testing::Download;
using testing::RandomBytes;

TierConfig GpuConfig(uint64_t capacity, GpuMemory memory = GpuMemory::kDevice) {
  TierConfig c;
  c.name = "gpu0";
  c.kind = TierKind::kGpu;
  c.capacity_bytes = capacity;
  c.device = 0;
  c.memory = memory;
  return c;
}

std::unique_ptr<PinnedHostAllocator> Pool(uint64_t capacity, uint64_t warm) {
  PinnedPoolOptions o;
  o.capacity_bytes = capacity;
  o.slab_bytes = 64 << 20;
  o.initial_bytes = warm;
  auto p = std::make_unique<PinnedHostAllocator>(o);
  Status st = p->WaitForFree(warm, 60s);
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return p;
}

std::unique_ptr<GpuTier> OpenTier(uint64_t capacity, GpuTierOptions opt = {},
                                  GpuMemory memory = GpuMemory::kDevice) {
  auto t = std::make_unique<GpuTier>(GpuConfig(capacity, memory), 0, opt);
  Status st = t->Open();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return t;
}

// Objects kept on the device as sources, with their expected bytes.
struct Source {
  std::vector<std::byte> bytes;
  std::vector<uint64_t> split;  // buffer sizes
  std::unique_ptr<DeviceBuffer> dev;
};

std::vector<Source> MakeSources(const std::vector<uint64_t>& sizes, uint64_t seed) {
  std::vector<Source> out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Source s;
    s.bytes = RandomBytes(sizes[i], seed + i);
    const uint64_t first = sizes[i] / 3;
    s.split = i % 2 ? std::vector<uint64_t>{first, sizes[i] - first} : std::vector<uint64_t>{sizes[i]};
    s.dev = std::make_unique<DeviceBuffer>(std::max<uint64_t>(sizes[i], 1));
    if (sizes[i]) s.dev->Upload(s.bytes);
    out.push_back(std::move(s));
  }
  return out;
}

// Stores every source (device buffers) through Tier::Store.
std::vector<Location> StoreAll(GpuTier& tier, const std::vector<Source>& src, size_t batch = 64) {
  std::vector<Location> locs;
  for (size_t b = 0; b < src.size(); b += batch) {
    std::vector<std::vector<std::span<const std::byte>>> bufs;
    std::vector<std::string> keys;
    const size_t e = std::min(src.size(), b + batch);
    for (size_t i = b; i < e; ++i) {
      std::vector<std::span<const std::byte>> v;
      uint64_t off = 0;
      for (uint64_t n : src[i].split) {
        v.emplace_back(src[i].dev->data() + off, n);
        off += n;
      }
      bufs.push_back(std::move(v));
      keys.push_back("k" + std::to_string(i));
    }
    std::vector<ObjectView> views;
    for (size_t i = 0; i < bufs.size(); ++i) views.push_back(ObjectView{keys[i], bufs[i]});
    for (auto& v : views) REQUIRE(tier.TryReserve(tier.ReserveEstimate(v)));
    auto got = tier.Store(views);
    REQUIRE_MESSAGE(got.ok(), got.status().ToString());
    for (auto& l : *got) locs.push_back(std::move(l));
  }
  return locs;
}

void CheckHostBlob(const BlobPtr& b, const Source& s) {
  REQUIRE(b);
  CHECK(b->kind() == MemoryKind::kHost);
  REQUIRE(b->size() == s.bytes.size());
  CHECK(b->buffer_sizes() == s.split);
  CHECK(testing::SameBytes(b->data(), s.bytes));
}

TEST_CASE("gpu tier: device objects of every size round-trip through the host") {
  SPILLWAY_REQUIRE_GPU();
  auto pool = Pool(1 << 30, 256 << 20);
  GpuTierOptions opt;
  opt.host_allocator = pool.get();
  auto tier = OpenTier(1 << 30, opt);
  const std::vector<uint64_t> sizes = {0, 1, 100, 4096, 65536, 65537, (1 << 20) - 1, 1 << 20, (8 << 20) + 3,
                                       (70 << 20) + 5};
  auto src = MakeSources(sizes, 100);
  auto locs = StoreAll(*tier, src);
  uint64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    total += sizes[i];
    CHECK(locs[i].blob->kind() == MemoryKind::kDevice);
    CHECK(cuda::Classify(locs[i].blob->data())->kind == cuda::PointerKind::kDevice);
    CHECK(locs[i].blob->buffer_sizes() == src[i].split);
    CHECK(Download(locs[i].blob->data(), sizes[i]) == src[i].bytes);
  }
  CHECK(tier->used_bytes() == total);
  CHECK(tier->counters().objects == sizes.size());

  SUBCASE("one at a time (Tier::Load)") {
    for (size_t i = 0; i < sizes.size(); ++i) {
      auto b = tier->Load(locs[i], "k");
      REQUIRE_MESSAGE(b.ok(), b.status().ToString());
      CheckHostBlob(*b, src[i]);
    }
  }
  SUBCASE("all at once (LoadToHost)") {
    auto blobs = tier->LoadToHost(locs);
    REQUIRE_MESSAGE(blobs.ok(), blobs.status().ToString());
    for (size_t i = 0; i < sizes.size(); ++i) CheckHostBlob((*blobs)[i], src[i]);
    // The host copies come from the pinned pool.
    for (auto& b : *blobs) CHECK(pool->IsFromPool(b->data()));
  }
  for (auto& l : locs) tier->Free(l);
  CHECK(tier->used_bytes() == 0);
  CHECK(tier->counters().objects == 0);
}

TEST_CASE("gpu tier: thousands of small objects are gathered in batches") {
  SPILLWAY_REQUIRE_GPU();
  auto pool = Pool(256 << 20, 192 << 20);
  GpuTierOptions opt;
  opt.host_allocator = pool.get();
  opt.staging_bytes = 1 << 20;  // many batches
  opt.small_object_bytes = 64 << 10;
  opt.window = 3;
  auto tier = OpenTier(256 << 20, opt);
  std::mt19937_64 rng(9);
  std::vector<uint64_t> sizes;
  for (int i = 0; i < 3000; ++i) sizes.push_back(i % 10 == 0 ? (64 << 10) + rng() % 5000 : rng() % (64 << 10));
  auto src = MakeSources(sizes, 500);
  auto locs = StoreAll(*tier, src, 500);
  const uint64_t before = pool->stats().allocated_bytes;

  std::vector<int> seen(sizes.size(), 0);
  std::vector<BlobPtr> blobs(sizes.size());
  Status st = tier->LoadToHostStreaming(locs, [&](size_t i, BlobPtr b) {
    seen[i]++;
    blobs[i] = std::move(b);
    return Status::OK();
  });
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  size_t bad = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (seen[i] != 1 || !blobs[i] || blobs[i]->size() != sizes[i] || !testing::SameBytes(blobs[i]->data(), src[i].bytes)) {
      ++bad;
    }
  }
  CHECK(bad == 0);
  CHECK(pool->stats().fallback_allocations == 0);
  // Each object's part of a batch is freed on its own, in any order.
  std::shuffle(blobs.begin(), blobs.end(), rng);
  blobs.clear();
  CHECK(pool->stats().allocated_bytes == before);

  // A `ready` error stops the call and is returned.
  size_t calls = 0;
  st = tier->LoadToHostStreaming(locs, [&](size_t, BlobPtr) {
    return ++calls == 10 ? Status::IOError("disk full") : Status::OK();
  });
  CHECK(st.code() == StatusCode::kIOError);
  CHECK(calls == 10);
  CHECK(pool->stats().allocated_bytes == before);
  for (auto& l : locs) tier->Free(l);
  CHECK(tier->used_bytes() == 0);
}

TEST_CASE("gpu tier: host buffers are stored to the device (promotion)") {
  SPILLWAY_REQUIRE_GPU();
  auto pool = Pool(256 << 20, 128 << 20);
  auto tier = OpenTier(256 << 20);
  const uint64_t n = (24 << 20) + 17;
  auto bytes = RandomBytes(n, 42);
  std::byte* pinned = pool->TryAllocatePinned(n);
  REQUIRE(pinned != nullptr);
  std::memcpy(pinned, bytes.data(), n);
  std::span<const std::byte> from_pinned[] = {{pinned, 1000}, {pinned + 1000, n - 1000}};
  std::span<const std::byte> from_pageable[] = {{bytes.data(), n}};
  ObjectView views[] = {{"pinned", from_pinned}, {"pageable", from_pageable}};
  for (auto& v : views) REQUIRE(tier->TryReserve(v.raw_size()));
  auto locs = tier->Store(views);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  for (auto& l : *locs) {
    CHECK(l.blob->kind() == MemoryKind::kDevice);
    CHECK(Download(l.blob->data(), n) == bytes);
  }
  CHECK((*locs)[0].blob->buffer_sizes() == std::vector<uint64_t>{1000, n - 1000});
  pool->Free(pinned, n);
  for (auto& l : *locs) tier->Free(l);
  CHECK(tier->used_bytes() == 0);
}

TEST_CASE("gpu tier: a caller's device allocation is adopted without a copy") {
  SPILLWAY_REQUIRE_GPU();
  auto tier = OpenTier(64 << 20);
  const uint64_t n = 3 << 20;
  auto bytes = RandomBytes(n, 77);
  auto mem = cuda::Malloc(0, n);
  REQUIRE(mem.ok());
  REQUIRE(cuda::Memcpy(*mem, bytes.data(), n).ok());
  std::atomic<int> released{0};
  BlobPtr blob = GpuTier::WrapDeviceAllocation(*mem, n, {n / 2, n - n / 2}, [&](void* p) {
    released++;
    cuda::Free(p);
  });
  REQUIRE(tier->TryReserve(n));
  auto loc = tier->Adopt(blob, n);
  REQUIRE_MESSAGE(loc.ok(), loc.status().ToString());
  CHECK(loc->blob->data() == static_cast<std::byte*>(*mem));  // zero copy
  CHECK(tier->used_bytes() == n);
  blob.reset();
  auto host = tier->Load(*loc, "k");
  REQUIRE(host.ok());
  CHECK(testing::SameBytes((*host)->data(), bytes));
  CHECK(released == 0);
  tier->Free(*loc);
  CHECK(released == 1);
  CHECK(tier->used_bytes() == 0);

  // Host memory cannot be adopted; device memory of the pool can.
  auto host_blob = std::make_shared<Blob>(Blob::AllocateHost(16), 16, std::vector<uint64_t>{16}, MemoryKind::kHost);
  CHECK(tier->Adopt(host_blob, 16).status().code() == StatusCode::kInvalidArgument);
  auto fresh = tier->NewDeviceBlob(1 << 20, {1 << 20});
  REQUIRE(fresh.ok());
  CHECK(cuda::Classify((*fresh)->data())->kind == cuda::PointerKind::kDevice);
  REQUIRE(tier->TryReserve(1 << 20));
  auto l2 = tier->Adopt(*fresh, 1 << 20);
  REQUIRE(l2.ok());
  fresh->reset();
  tier->Free(*l2);
  CHECK(tier->used_bytes() == 0);
}

TEST_CASE("gpu tier: managed mode demotes by prefetching to the host") {
  SPILLWAY_REQUIRE_GPU();
  auto tier = OpenTier(256 << 20, {}, GpuMemory::kManaged);
  CHECK(tier->managed());
  auto src = MakeSources({(8 << 20) + 1, 4096, 0}, 900);
  auto locs = StoreAll(*tier, src);
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(locs[i].blob->kind() == MemoryKind::kManaged);
    CHECK(cuda::Classify(locs[i].blob->data())->kind == cuda::PointerKind::kManaged);
  }
  auto host = tier->LoadToHost(locs);
  REQUIRE_MESSAGE(host.ok(), host.status().ToString());
  for (size_t i = 0; i < src.size(); ++i) {
    CheckHostBlob((*host)[i], src[i]);
    CHECK((*host)[i]->data() == locs[i].blob->data());  // same memory, now on the host
  }
  CHECK(tier->PrefetchToDevice(locs).ok());
  CHECK(tier->PrefetchToHost(locs).ok());
  // The tier's space comes back when it frees the object, even while the
  // host side still holds the pages.
  for (auto& l : locs) tier->Free(l);
  CHECK(tier->used_bytes() == 0);
  CheckHostBlob((*host)[0], src[0]);
  host->clear();
  // Capacity beyond the free device memory is refused at Open.
  auto info = cuda::GetMemInfo(0);
  REQUIRE(info.ok());
  GpuTier big(GpuConfig(info->total_bytes, GpuMemory::kManaged), 0);
  CHECK(big.Open().code() == StatusCode::kInvalidArgument);
}

TEST_CASE("gpu tier: concurrent stores and loads") {
  SPILLWAY_REQUIRE_GPU();
  auto pool = Pool(1 << 30, 256 << 20);
  GpuTierOptions opt;
  opt.host_allocator = pool.get();
  auto tier = OpenTier(1 << 30, opt);
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        std::vector<uint64_t> sizes;
        for (int i = 0; i < 40; ++i) sizes.push_back(i % 8 == 0 ? (2 << 20) + i : 1000 * i + t);
        auto src = MakeSources(sizes, 10000 * t + 100 * round);
        auto locs = StoreAll(*tier, src, 16);
        auto host = tier->LoadToHost(locs);
        if (!host.ok()) {
          failures++;
          continue;
        }
        for (size_t i = 0; i < sizes.size(); ++i) {
          if (!testing::SameBytes((*host)[i]->data(), src[i].bytes)) failures++;
        }
        for (auto& l : locs) tier->Free(l);
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(tier->used_bytes() == 0);
}

TEST_CASE("gpu tier: without pinned memory copies still arrive (pageable fallback)") {
  SPILLWAY_REQUIRE_GPU();
  // A pool too small for the data, and no allocator at all.
  PinnedPoolOptions small;
  small.capacity_bytes = 2 << 20;
  small.slab_bytes = 2 << 20;
  small.initial_bytes = 2 << 20;
  PinnedHostAllocator tiny(small);
  REQUIRE(tiny.WaitForFree(2 << 20, 30s).ok());
  for (HostAllocator* alloc : {static_cast<HostAllocator*>(&tiny), static_cast<HostAllocator*>(nullptr)}) {
    GpuTierOptions opt;
    opt.host_allocator = alloc;
    opt.staging_bytes = 4 << 20;
    auto tier = OpenTier(128 << 20, opt);
    std::vector<uint64_t> sizes;
    for (int i = 0; i < 200; ++i) sizes.push_back(i % 50 == 0 ? (5 << 20) + i : 30000 + i);
    auto src = MakeSources(sizes, 3000);
    auto locs = StoreAll(*tier, src);
    auto host = tier->LoadToHost(locs);
    REQUIRE_MESSAGE(host.ok(), host.status().ToString());
    size_t bad = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (!testing::SameBytes((*host)[i]->data(), src[i].bytes)) ++bad;
    }
    CHECK(bad == 0);
    host->clear();
    for (auto& l : locs) tier->Free(l);
  }
  CHECK(tiny.stats().fallback_allocations > 0);
  CHECK(tiny.stats().allocated_bytes == 0);
}

TEST_CASE("gpu tier: capacity beyond the device is refused at Open") {
  SPILLWAY_REQUIRE_GPU();
  auto total = cuda::DeviceTotalBytes(0);
  REQUIRE(total.ok());
  GpuTier t(GpuConfig(*total + 1), 0);
  CHECK(t.Open().code() == StatusCode::kInvalidArgument);
  GpuTier bad_device([] {
    TierConfig c = GpuConfig(1 << 20);
    c.device = 99;
    return c;
  }(), 0);
  CHECK(bad_device.Open().code() == StatusCode::kNotSupported);
}

}  // namespace
}  // namespace spillway

#endif  // SPILLWAY_HAVE_CUDA
