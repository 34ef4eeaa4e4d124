// The config loader sees this machine's GPUs without being told: validate,
// info, the Python module and Engine::Open all load with LoadOptions::gpu left
// unset. (Before the probe was passed through LoadOptions, a required gpu
// tier was refused on a GPU machine with "device 0 not found (0 CUDA devices
// visible)" by every caller that forgot to register a global provider.)
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "base/cuda_runtime.h"
#include "spillway/config_loader.h"
#include "tiers/gpu/gpu_test_util.h"

namespace spillway {
namespace {

const char* kRequiredGpuChain =
    "version: 1\n"
    "tiers:\n"
    "  - {name: gpu0, kind: gpu, device: 0, capacity: 1GiB}\n"
    "  - {name: host, kind: host, capacity: 1GiB}\n";

TEST_CASE("config: a required gpu tier loads with the default probe on a GPU machine") {
  SPILLWAY_REQUIRE_GPU();
  LoadOptions lo;  // gpu unset: DetectGpus()
  lo.check_filesystem = false;
  LoadResult r = LoadConfigString(kRequiredGpuChain, "gpu.yaml", lo);
  INFO(r.Summary());
  REQUIRE(r.ok());
  REQUIRE(r.config.tiers.size() == 2);
  CHECK(r.config.tiers[0].kind == TierKind::kGpu);
  GpuProbe p = DetectGpus();
  CHECK(p.built_with_cuda);
  CHECK(p.device_total_bytes.size() == static_cast<size_t>(*cuda::DeviceCount()));
}

TEST_CASE("config: spillway validate accepts a required gpu tier on a GPU machine") {
  SPILLWAY_REQUIRE_GPU();
  const char* cli = std::getenv("SPILLWAY_CLI_BIN");
  if (cli == nullptr) SPILLWAY_SKIP_TEST("SPILLWAY_CLI_BIN not set (scripts/gpu_run.sh sets it to the carried CLI)");
  const std::string file = "/tmp/spillway-gpu-probe-test.yaml";
  {
    FILE* f = std::fopen(file.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(kRequiredGpuChain, f);
    std::fclose(f);
  }
  const std::string cmd = std::string(cli) + " validate " + file + " >/tmp/spillway-gpu-probe-test.out 2>&1";
  const int rc = std::system(cmd.c_str());
  CHECK_MESSAGE(rc == 0, "spillway validate exit " << rc << "; see /tmp/spillway-gpu-probe-test.out");
  std::remove(file.c_str());
}

}  // namespace
}  // namespace spillway
