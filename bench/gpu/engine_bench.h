// Engine-level GPU benchmark, run by gpu_bench (--engine,
// or --engine-only to skip the tier-level sections).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "spillway/file_io.h"
#include "spillway/status.h"

namespace spillway {

struct EngineBenchArgs {
  std::string dir;       // file tier and disk reference folder (removed afterwards)
  uint64_t gib = 4;      // working set per object size
  int reps = 3;
};

// Prints markdown lines through `line`. Device objects (8 MiB and 64 MiB) are
// adopted by an Engine (PutDeviceAllocation) whose gpu tier holds a quarter
// of the working set: spill gpu -> pinned host and unspill (Acquire(kDevice))
// against pinned cudaMemcpyAsync D2H / H2D in the same object-size chunks,
// measured in the same run; then a gpu -> pinned host -> file chain against
// min(pinned D2H, disk), the disk measured with the project's FileIo at the
// file tier's request size (O_DIRECT, 1 MiB requests, fresh preallocated file, the faster of queue depths 32 and 64).
// The disk reference's requests: `bytes` of `buf` written to `file` from
// offset 0 in `block`-sized writes (used by both GPU benchmarks).
std::vector<IoRequest> SequentialWrites(const FileHandle& file, std::byte* buf, uint64_t bytes, uint64_t block);

Status RunEngineBench(const EngineBenchArgs& args, const std::function<void(const std::string&)>& line);

}  // namespace spillway
