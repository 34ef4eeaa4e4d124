// Engine::CheckDevices: every object in a gpu tier lives on its
// tier's device, checked by UUID, after copied Puts, adopted allocations,
// AllocateDevice and promotions back to the device; a chain with a gpu tier
// on each of two devices (skips visibly with one GPU); and a `device: auto`
// config opened as worker 0 lands on the device the worker sees first.
#include "tiers/gpu/gpu_test_util.h"

#include <cstdlib>

#include "engine/engine_test_util.h"
#include "spillway/config_loader.h"
#include "spillway/engine.h"

using namespace spillway;
using namespace spillway::testing;

namespace {

TierConfig GpuTierOn(const std::string& name, int device, uint64_t cap) {
  TierConfig g;
  g.name = name;
  g.kind = TierKind::kGpu;
  g.device = device;
  g.capacity_bytes = cap;
  g.capacity_text = std::to_string(cap);
  return g;
}

Config Chain(const std::string& dir, std::vector<TierConfig> gpus) {
  Config c;
  c.source = "<gpu-devices-test>";
  c.tiers = std::move(gpus);
  TierConfig h = HostTierConfig("host", 128ull << 20);
  h.pinned = true;
  c.tiers.push_back(h);
  c.tiers.push_back(FileTierConfig("disk", dir + "/disk", 4ull << 30, CodecKind::kLz4));
  return c;
}

std::unique_ptr<Engine> OpenChain(const Config& c) {
  auto e = Engine::Open(c);
  REQUIRE_MESSAGE(e.ok(), e.status().ToString());
  return std::move(*e);
}

int VisibleDevices() {
  auto n = cuda::DeviceCount();
  return n.ok() ? *n : 0;
}

}  // namespace

TEST_CASE("engine gpu: CheckDevices finds every gpu-tier object on the tier's device") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu-dev");
  auto e = OpenChain(Chain(dir.path(), {GpuTierOn("gpu0", 0, 64ull << 20)}));
  const uint64_t obj = 1ull << 20;
  DeviceBuffer dev(obj);
  for (int i = 0; i < 96; ++i) {  // 96 MiB through a 64 MiB tier: some spill to the host
    dev.Upload(RandomBytes(obj, i));
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("copy" + std::to_string(i), one).ok());
  }
  for (int i = 0; i < 4; ++i) {
    auto p = cuda::Malloc(0, obj);
    REQUIRE(p.ok());
    REQUIRE(e->PutDeviceAllocation("adopt" + std::to_string(i), *p, {obj}, [](void* q) { cuda::Free(q); }).ok());
  }
  auto alloc = e->AllocateDevice(obj);
  REQUIRE(alloc.ok());
  REQUIRE(e->Flush().ok());
  {
    auto h = e->Get("copy0", Where::kDevice);  // demoted earlier: promoted back to the device
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
  }
  auto check = e->CheckDevices();
  REQUIRE_MESSAGE(check.ok(), check.status().ToString());
  REQUIRE(check->tiers.size() == 1);
  const auto& t = check->tiers[0];
  CHECK(t.tier == "gpu0");
  CHECK(t.device == 0);
  CHECK(t.uuid == cuda::GetDeviceIdentity(0)->uuid);
  CHECK_FALSE(t.pci_bus_id.empty());
  CHECK(t.objects == e->Stats().tiers[0].objects);
  CHECK(t.objects > 0);
  CHECK(t.misplaced == 0);
  CHECK_MESSAGE(check->ok(), check->first_problem);
  MESSAGE("checked " << t.objects << " objects on " << t.uuid << " (" << t.pci_bus_id << ")");
}

TEST_CASE("engine gpu: a config with device: auto, opened as worker 0, uses the first visible device") {
  SPILLWAY_REQUIRE_GPU();
  TempDir dir("gpu-auto");
  const std::string yaml = "version: 1\n"
                           "tiers:\n"
                           "  - {name: gpu, kind: gpu, device: auto, capacity: 256MiB}\n"
                           "  - {name: host, kind: host, capacity: 64MiB}\n"
                           "  - {name: disk, kind: file, capacity: 1GiB, paths: ['" + dir.sub("disk") + "']}\n";
  LoadOptions o;
  o.worker = 0;
  LoadResult r = LoadConfigString(yaml, "auto.yaml", o);
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.tiers[0].device == 0);
  auto e = OpenChain(r.config);
  DeviceBuffer dev(1 << 20);
  std::span<const std::byte> one[1] = {dev.span()};
  REQUIRE(e->Put("k", one).ok());
  auto check = e->CheckDevices();
  REQUIRE(check.ok());
  CHECK(check->ok());
  CHECK(check->tiers[0].uuid == cuda::GetDeviceIdentity(0)->uuid);
}

TEST_CASE("engine gpu: two gpu tiers on two devices keep their objects apart") {
  SPILLWAY_REQUIRE_GPU();
  const int n = VisibleDevices();
  if (n < 2) SPILLWAY_SKIP_TEST("needs 2 CUDA devices, found " + std::to_string(n) + " (run on a multi-GPU machine)");
  TempDir dir("gpu-two");
  auto e = OpenChain(Chain(dir.path(), {GpuTierOn("gpu0", 0, 32ull << 20), GpuTierOn("gpu1", 1, 64ull << 20)}));
  const uint64_t obj = 1ull << 20;
  DeviceBuffer dev(obj, 0);
  for (int i = 0; i < 80; ++i) {  // gpu0 fills and demotes into gpu1 (a device-to-device copy)
    dev.Upload(RandomBytes(obj, 50 + i));
    std::span<const std::byte> one[1] = {dev.span()};
    REQUIRE(e->Put("k" + std::to_string(i), one).ok());
  }
  REQUIRE(e->Flush().ok());
  auto s = e->Stats();
  CHECK(s.tiers[1].objects > 0);
  auto check = e->CheckDevices();
  REQUIRE_MESSAGE(check.ok(), check.status().ToString());
  REQUIRE(check->tiers.size() == 2);
  CHECK(check->tiers[0].uuid != check->tiers[1].uuid);
  CHECK(check->tiers[0].objects == s.tiers[0].objects);
  CHECK(check->tiers[1].objects == s.tiers[1].objects);
  CHECK_MESSAGE(check->ok(), check->first_problem);
  for (int i = 0; i < 80; i += 9) {
    auto h = e->Get("k" + std::to_string(i), Where::kHost);
    REQUIRE_MESSAGE(h.ok(), h.status().ToString());
    CHECK(HandleEquals(*h, RandomBytes(obj, 50 + i)));
  }
}
