// `spillway stress --device`: the stress test with device objects.
#pragma once

#include <cstdint>
#include <string>

namespace spillway::cli {

struct DeviceStressOptions {
  std::string config;
  std::string profile;
  int threads = 4;
  uint64_t ops = 20000;
  double seconds = 0;
  uint64_t seed = 1;
  std::string sizes;  // empty: 4096:4194304
  uint64_t keys = 400;
  bool json = false;
  bool verify = true;
};

// Random device Puts (adopted allocations and device copies, one to three
// buffers, overwrites), Get(kDevice), Get(kAny), Acquire(kDevice), Erase and
// Flush from several threads against a reference model; every byte read is
// copied back from the device and compared. Exit status: 0 clean, 1 lost or
// corrupt objects, 2 unusable setup (no gpu tier, bad options).
int RunDeviceStress(const DeviceStressOptions& o);

}  // namespace spillway::cli
