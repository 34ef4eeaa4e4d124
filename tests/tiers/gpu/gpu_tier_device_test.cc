// Device identity: a device's UUID and PCI bus id, recorded on
// every object a gpu tier stores or adopts, and GpuTier::CheckObjectDevice,
// which must pass for the tier's own objects and fail for one recorded or
// living elsewhere. The second-device cases skip visibly with one GPU.
#include "gpu_test_util.h"

#ifndef SPILLWAY_HAVE_CUDA
TEST_CASE("gpu tier device identity: needs a build with CUDA") { SPILLWAY_REQUIRE_GPU(); }
#else

#include <regex>

#include "test_util.h"
#include "tiers/gpu_tier.h"

namespace spillway {
namespace {

using testing::DeviceBuffer;
using testing::RandomBytes;

std::unique_ptr<GpuTier> OpenOn(int device, uint64_t capacity = 64ull << 20) {
  TierConfig c;
  c.name = "gpu" + std::to_string(device);
  c.kind = TierKind::kGpu;
  c.capacity_bytes = capacity;
  c.device = device;
  auto t = std::make_unique<GpuTier>(c, 0);
  Status st = t->Open();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  return t;
}

std::vector<Location> StoreFrom(GpuTier& tier, const DeviceBuffer& src, int n) {
  std::vector<std::span<const std::byte>> one{src.span()};
  std::vector<ObjectView> views;
  for (int i = 0; i < n; ++i) views.push_back(ObjectView{"k", one});
  for (auto& v : views) REQUIRE(tier.TryReserve(v.raw_size()));
  auto locs = tier.Store(views);
  REQUIRE_MESSAGE(locs.ok(), locs.status().ToString());
  return std::move(*locs);
}

int VisibleDevices() {
  auto n = cuda::DeviceCount();
  return n.ok() ? *n : 0;
}

}  // namespace

TEST_CASE("device identity: a UUID as nvidia-smi prints it and a PCI bus id") {
  SPILLWAY_REQUIRE_GPU();
  auto id = cuda::GetDeviceIdentity(0);
  REQUIRE_MESSAGE(id.ok(), id.status().ToString());
  CAPTURE(id->uuid);
  CAPTURE(id->pci_bus_id);
  CHECK(std::regex_match(id->uuid, std::regex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")));
  CHECK(std::regex_match(id->pci_bus_id, std::regex("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.0")));
  CHECK(id->uuid != "GPU-00000000-0000-0000-0000-000000000000");
  CHECK(id->ordinal == 0);
  CHECK(id->total_bytes > 0);
  CHECK_FALSE(cuda::GetDeviceIdentity(VisibleDevices()).ok());  // one past the last device
  MESSAGE("device 0: " << cuda::DescribeDevice(*id) << " " << id->name);
}

TEST_CASE("gpu tier: stored, adopted and allocated objects record the tier's device and pass the check") {
  SPILLWAY_REQUIRE_GPU();
  auto tier = OpenOn(0);
  CHECK(tier->device_identity() == *cuda::GetDeviceIdentity(0));
  DeviceBuffer src(1 << 20);
  src.Upload(RandomBytes(1 << 20, 3));
  std::vector<Location> locs = StoreFrom(*tier, src, 4);
  for (const Location& l : locs) {
    CHECK(l.blob->device() == 0);
    std::string uuid;
    Status st = tier->CheckObjectDevice(l, &uuid);
    CHECK_MESSAGE(st.ok(), st.ToString());
    CHECK(uuid == tier->device_identity().uuid);
  }
  auto fresh = tier->NewDeviceBlob(1 << 20, {1 << 20});
  REQUIRE(fresh.ok());
  CHECK((*fresh)->device() == 0);
  auto p = cuda::Malloc(0, 4096);
  REQUIRE(p.ok());
  BlobPtr wrapped = GpuTier::WrapDeviceAllocation(*p, 4096, {4096}, [](void* q) { cuda::Free(q); });
  CHECK(wrapped->device() == -1);  // not recorded until a tier adopts it
  REQUIRE(tier->TryReserve(4096));
  auto adopted = tier->Adopt(wrapped, 4096);
  REQUIRE_MESSAGE(adopted.ok(), adopted.status().ToString());
  CHECK(adopted->blob->device() == 0);
  CHECK(tier->CheckObjectDevice(*adopted).ok());
  for (Location& l : locs) tier->Free(l);
  tier->Free(*adopted);
}

TEST_CASE("gpu tier: the device check fails for an object recorded elsewhere, unrecorded, or in host memory") {
  SPILLWAY_REQUIRE_GPU();
  auto tier = OpenOn(0);
  DeviceBuffer src(1 << 16);
  std::vector<Location> locs = StoreFrom(*tier, src, 1);
  Location& l = locs[0];
  l.blob->set_device(-1);
  Status st = tier->CheckObjectDevice(l);
  CHECK(st.code() == StatusCode::kInternal);
  CHECK(st.ToString().find("never recorded") != std::string::npos);
  l.blob->set_device(VisibleDevices());  // a device that does not exist
  CHECK_FALSE(tier->CheckObjectDevice(l).ok());
  l.blob->set_device(0);
  CHECK(tier->CheckObjectDevice(l).ok());
  tier->Free(l);

  Location host;
  host.blob = std::make_shared<Blob>(Blob::AllocateHost(64), 64, std::vector<uint64_t>{64}, MemoryKind::kHost);
  st = tier->CheckObjectDevice(host);
  CHECK(st.code() == StatusCode::kInvalidArgument);
  CHECK(st.ToString().find("host memory") != std::string::npos);
  // Device-kind blob over pageable memory: the pointer query tells the truth.
  Location lie;
  lie.blob = std::make_shared<Blob>(Blob::AllocateHost(64), 64, std::vector<uint64_t>{64}, MemoryKind::kDevice,
                                    [](std::byte* p, uint64_t) { std::free(p); });
  lie.blob->set_device(0);
  st = tier->CheckObjectDevice(lie);
  CHECK(st.code() == StatusCode::kInternal);
  CHECK(st.ToString().find("not device memory") != std::string::npos);
}

TEST_CASE("gpu tier on a second device: objects live on device 1, and device 0's tier rejects them by UUID") {
  SPILLWAY_REQUIRE_GPU();
  const int n = VisibleDevices();
  if (n < 2) SPILLWAY_SKIP_TEST("needs 2 CUDA devices, found " + std::to_string(n) + " (run on a multi-GPU machine)");
  auto t0 = OpenOn(0);
  auto t1 = OpenOn(1);
  REQUIRE(t0->device_identity().uuid != t1->device_identity().uuid);
  DeviceBuffer src(1 << 20, 0);  // on device 0: Store copies it to device 1 (peer copy)
  src.Upload(RandomBytes(1 << 20, 9));
  std::vector<Location> locs = StoreFrom(*t1, src, 3);
  for (Location& l : locs) {
    CHECK(l.blob->device() == 1);
    std::string uuid;
    CHECK(t1->CheckObjectDevice(l, &uuid).ok());
    CHECK(uuid == t1->device_identity().uuid);
    // The same object judged as device 0's: recorded and living on device 1.
    Status st = t0->CheckObjectDevice(l);
    CHECK(st.code() == StatusCode::kInternal);
    CHECK(st.ToString().find(t1->device_identity().uuid) != std::string::npos);
  }
  // Adopting device 1's memory into device 0's tier is refused.
  auto p = cuda::Malloc(1, 4096);
  REQUIRE(p.ok());
  BlobPtr foreign = GpuTier::WrapDeviceAllocation(*p, 4096, {4096}, [](void* q) { cuda::Free(q); });
  REQUIRE(t0->TryReserve(4096));
  CHECK(t0->Adopt(foreign, 4096).status().code() == StatusCode::kInvalidArgument);
  t0->Unreserve(4096);
  for (Location& l : locs) t1->Free(l);
}

}  // namespace spillway

#endif  // SPILLWAY_HAVE_CUDA
