// One worker per GPU: `device: auto` and `device: [list]` resolve
// to the worker's device; validate checks every device a chain names, for
// every worker of the node, with file:line:column; workers_per_node divides
// host and file percentages. All against a fake GPU probe.
#include <cstdlib>

#include "config_test_util.h"
#include "config/fs_probe.h"

namespace spillway {
namespace {

using testing::FindError;
using testing::FindWarning;
using testing::LoadYaml;

LoadOptions Gpus(std::vector<uint64_t> devices, std::optional<int> worker = std::nullopt,
                 std::optional<std::string> visible = std::nullopt) {
  LoadOptions o = testing::NoMachine();
  o.gpu.emplace();
  o.gpu->built_with_cuda = true;
  o.gpu->device_total_bytes = std::move(devices);
  for (size_t d = 0; d < o.gpu->device_total_bytes.size(); ++d) {
    o.gpu->device_uuids.push_back("GPU-0000000" + std::to_string(d) + "-aaaa-bbbb-cccc-dddddddddddd");
  }
  if (visible) {
    o.gpu->cuda_visible_devices_set = true;
    o.gpu->cuda_visible_devices = *visible;
  }
  o.worker = worker;
  return o;
}

// line 4: the gpu tier's device; `extra` goes before the tiers.
std::string Chain(const std::string& device, const std::string& capacity = "50%", const std::string& extra = "",
                  bool optional = false) {
  return "version: 1\n" + extra +
         "tiers:\n"
         "  - name: gpu0\n"
         "    device: " + device + "\n"
         "    kind: gpu\n"
         "    capacity: " + capacity + "\n" +
         (optional ? "    optional: true\n" : "") +
         "  - {name: host, kind: host, capacity: 1GiB}\n";
}

constexpr uint64_t kGiB = 1ull << 30;

}  // namespace

TEST_CASE("device: auto without CUDA_VISIBLE_DEVICES gives worker i device i") {
  for (int w : {0, 1}) {
    LoadResult r = LoadYaml(Chain("auto"), Gpus({16 * kGiB, 8 * kGiB}, w));
    REQUIRE_MESSAGE(r.ok(), r.Summary());
    CHECK(r.config.tiers[0].device == w);
    CHECK(r.config.worker == w);
    CHECK(r.config.tiers[0].capacity_bytes == (w == 0 ? 8 * kGiB : 4 * kGiB));  // 50% of its own device
  }
  LoadResult none = LoadYaml(Chain("auto"), Gpus({16 * kGiB, 8 * kGiB}));
  REQUIRE_MESSAGE(none.ok(), none.Summary());
  CHECK(none.config.tiers[0].device == 0);
  CHECK(none.config.worker == -1);

  LoadResult beyond = LoadYaml(Chain("auto"), Gpus({16 * kGiB, 8 * kGiB}, 2));
  std::optional<Diagnostic> d = FindError(beyond, "tiers[0].device", "device 2 not found (2 CUDA devices visible) for worker 2");
  REQUIRE_MESSAGE(d, beyond.Summary());
  CHECK(d->line == 4);
  CHECK(d->column == 13);
  CHECK(d->message.find("CUDA_VISIBLE_DEVICES") != std::string::npos);
}

TEST_CASE("device: auto under CUDA_VISIBLE_DEVICES (dask-cuda) gives every worker its first visible device") {
  LoadResult r = LoadYaml(Chain("auto"), Gpus({16 * kGiB, 8 * kGiB}, 1, "1,0"));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.tiers[0].device == 0);
  LoadResult four = LoadYaml(Chain("auto", "50%", "defaults: {workers_per_node: 4}\n"), Gpus({16 * kGiB}, 3, "3"));
  REQUIRE_MESSAGE(four.ok(), four.Summary());
  CHECK(four.config.tiers[0].device == 0);
}

TEST_CASE("device: [list] is indexed by the worker, and every entry is checked") {
  LoadResult r = LoadYaml(Chain("[1, 0]"), Gpus({16 * kGiB, 8 * kGiB}, 1));
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.tiers[0].device == 0);
  CHECK(r.config.tiers[0].device_list == std::vector<int>{1, 0});

  // Worker 0's device is fine, worker 1's does not exist: still an error, at the entry.
  LoadResult bad = LoadYaml(Chain("[0, 3]"), Gpus({16 * kGiB, 8 * kGiB}, 0));
  std::optional<Diagnostic> d = FindError(bad, "tiers[0].device[1]", "device 3 not found (2 CUDA devices visible) for worker 1");
  REQUIRE_MESSAGE(d, bad.Summary());
  CHECK(d->line == 4);
  CHECK(d->column == 17);

  LoadResult short_list = LoadYaml(Chain("[0]"), Gpus({16 * kGiB, 8 * kGiB}, 1));
  CHECK_MESSAGE(FindError(short_list, "tiers[0].device", "worker 1 has no device: the list names 1"),
                short_list.Summary());

  LoadResult too_few = LoadYaml(Chain("[0]", "50%", "defaults: {workers_per_node: 2}\n"), Gpus({16 * kGiB, 8 * kGiB}));
  std::optional<Diagnostic> w = FindError(too_few, "tiers[0].device", "workers_per_node is 2 but the device list names 1 device");
  REQUIRE_MESSAGE(w, too_few.Summary());
  CHECK(w->line == 5);

  LoadResult twice = LoadYaml(Chain("[0, 0]"), Gpus({16 * kGiB}));
  CHECK(FindWarning(twice, "tiers[0].device[1]", "listed twice"));
  CHECK(FindError(LoadYaml(Chain("[]"), Gpus({16 * kGiB})), "tiers[0].device", "the device list is empty"));
  CHECK(FindError(LoadYaml(Chain("[a]"), Gpus({16 * kGiB})), "tiers[0].device[0]", "expected an integer"));
  CHECK(FindError(LoadYaml(Chain("{x: 1}"), Gpus({16 * kGiB})), "tiers[0].device", "expected a device number, auto or a list"));
}

TEST_CASE("a capacity in bytes must fit every device the workers use, named with its UUID") {
  LoadResult r = LoadYaml(Chain("[0, 1]", "12GiB"), Gpus({16 * kGiB, 8 * kGiB}, 0));
  std::optional<Diagnostic> d = FindError(r, "tiers[0].capacity", "exceeds GPU 1 (GPU-00000001-");
  REQUIRE_MESSAGE(d, r.Summary());
  CHECK(d->message.find("for worker 1") != std::string::npos);
  CHECK(d->line == 6);
  // The worker's own device too (was a warning: GpuTier::Open refuses it).
  LoadResult own = LoadYaml(Chain("0", "20GiB"), Gpus({16 * kGiB}));
  CHECK_MESSAGE(FindError(own, "tiers[0].capacity", "exceeds GPU 0"), own.Summary());
  LoadResult fits = LoadYaml(Chain("[0, 1]", "8GiB"), Gpus({16 * kGiB, 8 * kGiB}, 1));
  CHECK_MESSAGE(fits.ok(), fits.Summary());
}

TEST_CASE("auto with workers_per_node checks the devices of every worker of the node") {
  const std::string extra = "defaults: {workers_per_node: 3}\n";
  LoadResult r = LoadYaml(Chain("auto", "50%", extra), Gpus({16 * kGiB, 8 * kGiB}, 0));
  std::optional<Diagnostic> d = FindError(r, "tiers[0].device", "device 2 not found (2 CUDA devices visible) for worker 2");
  REQUIRE_MESSAGE(d, r.Summary());
  // Optional: a warning that the worker leaves the tier out; worker 0 keeps it.
  LoadResult opt = LoadYaml(Chain("auto", "50%", extra, true), Gpus({16 * kGiB, 8 * kGiB}, 0));
  REQUIRE_MESSAGE(opt.ok(), opt.Summary());
  CHECK(FindWarning(opt, "tiers[0].device", "that worker leaves the optional tier out"));
  CHECK(opt.config.tiers.size() == 2);
}

TEST_CASE("a profile gives a node shape per-worker devices") {
  const std::string yaml =
      "version: 1\n"
      "tiers:\n"
      "  - {name: gpu0, kind: gpu, device: 0, capacity: 50%}\n"
      "  - {name: host, kind: host, capacity: 1GiB}\n"
      "profiles:\n"
      "  dgx:\n"
      "    defaults: {workers_per_node: 2}\n"
      "    tiers:\n"
      "      gpu0: {device: [0, 5]}\n";
  LoadOptions o = Gpus({16 * kGiB, 8 * kGiB}, 1);
  o.profile = "dgx";
  LoadResult r = LoadYaml(yaml, o);
  std::optional<Diagnostic> d = FindError(r, "profiles.dgx.tiers.gpu0.device[1]", "device 5 not found");
  REQUIRE_MESSAGE(d, r.Summary());
  CHECK(d->line == 9);
  CHECK(d->column == 26);
}

TEST_CASE("workers_per_node divides host and file percentages") {
  LoadResult one = LoadYaml("version: 1\ntiers:\n  - {name: h, kind: host, capacity: 50%}\n");
  LoadResult two = LoadYaml("version: 1\ndefaults: {workers_per_node: 2}\ntiers:\n  - {name: h, kind: host, capacity: 50%}\n");
  REQUIRE(one.ok());
  REQUIRE_MESSAGE(two.ok(), two.Summary());
  CHECK(two.config.workers_per_node == 2);
  CHECK(two.config.tiers[0].capacity_bytes == PhysicalMemoryBytes() / 2 / 2);
  CHECK(FindError(LoadYaml("version: 1\ndefaults: {workers_per_node: 0}\ntiers:\n  - {name: h, kind: host, capacity: 1GiB}\n"),
                  "defaults.workers_per_node", "expected an integer from 1"));
  // A fixed size over this worker's share of the memory warns.
  LoadResult big = LoadYaml("version: 1\ndefaults: {workers_per_node: 4096}\ntiers:\n  - {name: h, kind: host, capacity: 1GiB}\n");
  if (PhysicalMemoryBytes() / 4096 < (1ull << 30)) {
    CHECK_MESSAGE(FindWarning(big, "tiers[0].capacity", "/ 4096 workers_per_node"), big.Summary());
  }
}

TEST_CASE("the worker index comes from SPILLWAY_WORKER_INDEX when not given") {
  ::setenv("SPILLWAY_WORKER_INDEX", "1", 1);
  LoadResult r = LoadYaml(Chain("auto"), Gpus({16 * kGiB, 8 * kGiB}));
  ::setenv("SPILLWAY_WORKER_INDEX", "one", 1);
  LoadResult bad = LoadYaml(Chain("auto"), Gpus({16 * kGiB, 8 * kGiB}));
  ::unsetenv("SPILLWAY_WORKER_INDEX");
  REQUIRE_MESSAGE(r.ok(), r.Summary());
  CHECK(r.config.worker == 1);
  CHECK(r.config.tiers[0].device == 1);
  CHECK_MESSAGE(FindError(bad, "SPILLWAY_WORKER_INDEX", "$SPILLWAY_WORKER_INDEX='one' is not a worker index"),
                bad.Summary());
}

}  // namespace spillway
