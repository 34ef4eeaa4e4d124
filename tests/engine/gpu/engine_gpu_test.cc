// The engine over a gpu -> host -> file chain: device objects several times
// larger than the gpu tier are stored and read back verified, Acquire pins,
// allocation failure demotes, managed mode, device pressure from outside the
// engine (headroom), and pin_at_open. Skips visibly without a GPU.
#include "tiers/gpu/gpu_test_util.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "engine/engine_test_util.h"
#include "spillway/engine.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

Config GpuChain(const std::string& dir, uint64_t gpu_cap, uint64_t host_cap, GpuMemory memory = GpuMemory::kDevice) {
  Config c;
  c.source = "<gpu-test>";
  TierConfig g;
  g.name = "gpu0";
  g.kind = TierKind::kGpu;
  g.capacity_bytes = gpu_cap;
  g.capacity_text = std::to_string(gpu_cap);
  g.memory = memory;
  c.tiers.push_back(g);
  TierConfig h = HostTierConfig("host", host_cap);
  h.pinned = true;
  c.tiers.push_back(h);
  c.tiers.push_back(FileTierConfig("disk", dir + "/disk", 8ull << 30, CodecKind::kLz4));
  return c;
}

std::unique_ptr<Engine> OpenGpu(const Config& c) {
  auto e = Engine::Open(c);
  REQUIRE_MESSAGE(e.ok(), e.status().ToString());
  return std::move(*e);
}

}  // namespace

TEST_CASE("engine gpu: device objects 4x the gpu tier spill down and come back verified") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  auto e = OpenGpu(GpuChain(dir.path(), 256ull << 20, 256ull << 20));
  const uint64_t obj = 8ull << 20;
  const int n = 128;  // 1 GiB: 4x the gpu tier, 2x gpu + host
  DeviceBuffer dev(obj);
  for (int i = 0; i < n; ++i) {
    dev.Upload(RandomBytes(obj, i));
    std::span<const std::byte> one[1] = {dev.span()};
    Status st = e->Put("d" + std::to_string(i), one);  // detected as device memory
    REQUIRE_MESSAGE(st.ok(), st.ToString());
  }
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.tiers[0].used_bytes <= 256ull << 20);
  CHECK(s.tiers[0].demotions_out > 0);
  CHECK(s.tiers[2].objects > 0);
  for (int i = 0; i < n; i += 7) {
    auto h = e->Get("d" + std::to_string(i), Where::kDevice);
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(h->where() == Where::kDevice);
    CHECK(SameBytes(Download(h->buffer(0).data(), obj).data(), RandomBytes(obj, i)));
  }
  for (int i = 1; i < n; i += 5) {
    auto h = e->Get("d" + std::to_string(i), Where::kHost);
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(h->where() == Where::kHost);
    const auto want = RandomBytes(obj, i);
    const bool same = HandleEquals(*h, want);
    if (!same) {
      // Say what came back: where the bytes first differ, and whose they are.
      const std::byte* got = h->buffer(0).data();
      size_t first = 0;
      while (first < obj && got[first] == want[first]) ++first;
      int owner = -1;
      for (int j = 0; j < n && owner < 0; ++j) {
        const auto other = RandomBytes(obj, j);
        if (std::memcmp(got + first, other.data() + first, std::min<size_t>(4096, obj - first)) == 0) owner = j;
      }
      MESSAGE("object " << i << ": " << h->num_buffers() << " buffer(s) of " << h->buffer(0).size()
                        << " bytes; first difference at byte " << first << "; the bytes there belong to object "
                        << owner << "; all zero there: "
                        << (std::all_of(got + first, got + std::min<size_t>(obj, first + 4096),
                                        [](std::byte b) { return b == std::byte{0}; })));
    }
    CHECK_MESSAGE(same, "object " << i);
  }
}

TEST_CASE("engine gpu: Acquire brings a set to the device and pins it") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  auto e = OpenGpu(GpuChain(dir.path(), 64ull << 20, 64ull << 20));
  std::vector<std::string> keys;
  for (int i = 0; i < 40; ++i) {  // 160 MiB of host objects: most end up on disk
    keys.push_back("h" + std::to_string(i));
    REQUIRE(e->Put(keys.back(), RandomBytes(4 << 20, 100 + i)).ok());
  }
  REQUIRE(e->Flush().ok());
  std::vector<std::string> want(keys.begin(), keys.begin() + 8);
  auto acquired = e->Acquire(want, Where::kDevice);
  REQUIRE_MESSAGE(acquired.ok(), acquired.status().ToString());
  REQUIRE(acquired->size() == 8);
  for (size_t i = 0; i < 8; ++i) {
    CHECK((*acquired)[i].where() == Where::kDevice);
  }
  // Pressure from more device objects must not move the pinned ones.
  DeviceBuffer dev(4 << 20);
  for (int i = 0; i < 30; ++i) {
    dev.Upload(RandomBytes(4 << 20, 500 + i));
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("x" + std::to_string(i), one, PutOptions{Where::kDevice}).ok());
  }
  REQUIRE(e->Flush().ok());
  for (size_t i = 0; i < 8; ++i) {
    CHECK(SameBytes(Download((*acquired)[i].buffer(0).data(), 4 << 20).data(), RandomBytes(4 << 20, 100 + i)));
  }
  CHECK(e->Stats().tiers[0].pinned_bytes == 8ull * (4 << 20));
  acquired->clear();
  CHECK(e->Stats().tiers[0].pinned_bytes == 0);
  auto missing = e->Acquire(std::vector<std::string>{"h1", "nope"}, Where::kDevice);
  CHECK(missing.status().IsNotFound());
  CHECK(missing.status().message().find("nope") != std::string::npos);
}

TEST_CASE("engine gpu: AllocateDevice demotes to make room, and adopted allocations are released") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  auto e = OpenGpu(GpuChain(dir.path(), 512ull << 20, 1ull << 30));
  auto mem = e->AllocateDevice(64 << 20);
  REQUIRE_MESSAGE(mem.ok(), mem.status().ToString());
  CHECK(mem->get() != nullptr);
  int released = 0;
  auto own = cuda::Malloc(0, 1 << 20);
  REQUIRE(own.ok());
  {
    auto bytes = RandomBytes(1 << 20, 9);
    REQUIRE(cuda::Memcpy(*own, bytes.data(), bytes.size()).ok());
    Status st = e->PutDeviceAllocation("adopted", *own, {1 << 20}, [&](void* p) {
      ++released;
      cuda::Free(p);
    });
    REQUIRE_MESSAGE(st.ok(), st.ToString());
    auto h = e->Get("adopted");
    REQUIRE(h.ok());
    CHECK(h->buffer(0).data() == static_cast<std::byte*>(*own));  // zero copy
    CHECK(SameBytes(Download(h->buffer(0).data(), 1 << 20).data(), bytes));
  }
  CHECK(released == 0);
  REQUIRE(e->Erase("adopted").ok());
  CHECK(released == 1);
  // With the tier holding objects, a large allocation still succeeds.
  for (int i = 0; i < 8; ++i) {
    DeviceBuffer dev(32 << 20);
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("fill" + std::to_string(i), one).ok());
  }
  auto big = e->AllocateDevice(128 << 20);
  CHECK_MESSAGE(big.ok(), big.status().ToString());
}

TEST_CASE("engine gpu: managed memory mode stores and demotes by prefetch") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  auto e = OpenGpu(GpuChain(dir.path(), 128ull << 20, 256ull << 20, GpuMemory::kManaged));
  DeviceBuffer dev(8 << 20);
  for (int i = 0; i < 48; ++i) {  // 384 MiB: 3x the managed tier
    dev.Upload(RandomBytes(8 << 20, 700 + i));
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("m" + std::to_string(i), one).ok());
  }
  REQUIRE(e->Flush().ok());
  CHECK(e->Stats().tiers[0].demotions_out > 0);
  for (int i = 0; i < 48; i += 5) {
    auto h = e->Get("m" + std::to_string(i), Where::kHost);
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(HandleEquals(*h, RandomBytes(8 << 20, 700 + i)));
  }
}

TEST_CASE("engine gpu: headroom demotes when memory taken outside the engine leaves too little free") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  auto before = cuda::GetMemInfo(0);
  REQUIRE(before.ok());
  // Headroom 2 GiB below what is free now: the engine's 512 MiB (and its
  // pool's slack) leave free memory above it; an outside allocation of 2 GiB
  // takes it below, and the mover's tick (every 100 ms) must demote.
  Config c = GpuChain(dir.path(), 1ull << 30, 1ull << 30);
  c.tiers[0].headroom_bytes = before->free_bytes - (2ull << 30);
  auto e = OpenGpu(c);
  const uint64_t obj = 32ull << 20;
  DeviceBuffer dev(obj);
  for (int i = 0; i < 16; ++i) {  // 512 MiB, half the tier: no watermark pressure
    dev.Upload(RandomBytes(obj, i));
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("h" + std::to_string(i), one).ok());
  }
  REQUIRE(e->Flush().ok());
  const uint64_t held = e->Stats().tiers[0].used_bytes;
  CHECK(held == 16 * obj);  // nothing demoted yet
  auto outside = cuda::Malloc(0, 2ull << 30);
  REQUIRE(outside.ok());
  uint64_t now = held;
  for (int i = 0; i < 50 && now + (64ull << 20) > held; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    now = e->Stats().tiers[0].used_bytes;
  }
  cuda::Free(*outside);
  INFO("gpu tier held " << held << " bytes, " << now << " after the outside allocation");
  CHECK(now + (64ull << 20) <= held);  // at least 64 MiB given back
  // What was demoted is intact below.
  for (int i = 0; i < 16; ++i) {
    auto h = e->Get("h" + std::to_string(i), Where::kHost);
    REQUIRE(h.ok());
    CHECK(SameBytes(h->buffer(0).data(), RandomBytes(obj, i)));
  }
}

TEST_CASE("engine gpu: pin_at_open page-locks the host tier before Open returns, so a spill burst uses no plain memory") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  Config c = GpuChain(dir.path(), 128ull << 20, 1ull << 30);
  c.tiers[1].pin_at_open_fraction = 1.0;  // pin_at_open: 100%
  auto e = OpenGpu(c);
  const EngineStats at_open = e->Stats();
  // The pool pins 256 MiB in the background by default; all 1 GiB now.
  CHECK(at_open.pinned_pool_bytes >= (1ull << 30));
  const uint64_t obj = 8ull << 20;
  DeviceBuffer dev(obj);
  for (int i = 0; i < 96; ++i) {  // 768 MiB into a 128 MiB gpu tier
    dev.Upload(RandomBytes(obj, i));
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("p" + std::to_string(i), one).ok());
  }
  REQUIRE(e->Flush().ok());
  const EngineStats s = e->Stats();
  CHECK(s.tiers[0].demotions_out > 0);
  CHECK(s.pinned_fallback_bytes == 0);
}

TEST_CASE("engine gpu: a process memory limit leaves a host tier in the pinned pool alone") {
  // Its slabs stay pinned whatever they hold: demoting from it would free
  // nothing, and RelieveMemory would wait for moves that cannot help.
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu");
  Config c = GpuChain(dir.path(), 128ull << 20, 256ull << 20);
  c.tiers[1].pin_at_open_fraction = 1.0;
  auto e = OpenGpu(c);
  const uint64_t obj = 4ull << 20;
  for (int i = 0; i < 16; ++i) REQUIRE(e->Put("h" + std::to_string(i), Bytes(obj, i)).ok());  // host memory
  REQUIRE(e->Flush().ok());
  REQUIRE(e->Stats().tiers[1].used_bytes == 16 * obj);
  e->SetProcessMemoryLimit(1);  // below any resident set
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_FALSE(e->RelieveMemory(obj));  // cannot fit, and returns at once
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1));
  REQUIRE(e->Flush().ok());  // the mover's pressure: none for this tier either
  CHECK(e->Stats().tiers[1].used_bytes == 16 * obj);
  CHECK(e->Stats().tiers[1].demotions_out == 0);
  e->SetProcessMemoryLimit(0);
}
