// The FileIo implementations a conformance case runs over: POSIX, io_uring
// where the kernel allows it (a visible MESSAGE otherwise, never a silent
// pass) and the in-memory FileIo, unless the case needs a real kernel.
#pragma once

#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spillway/file_io.h"
#include "tiers/io/mem_file_io.h"

namespace spillway::testing {

enum class IoSet { kAll, kKernel };  // kKernel: cases that need real files (procfs, rlimits, fork)

inline void ForEachIo(const std::function<void(FileIo&)>& body, IoSet set = IoSet::kAll) {
  std::vector<std::unique_ptr<FileIo>> impls;
  impls.push_back(MakePosixFileIo());
  if (auto uring = MakeUringFileIo(); uring.ok()) {
    impls.push_back(std::move(uring).value());
  } else {
    MESSAGE(uring.status().message() << " (io_uring half of this case skipped)");
  }
  if (set == IoSet::kAll) impls.push_back(std::make_unique<MemFileIo>());
  for (auto& io : impls) {
    INFO("FileIo implementation: " << std::string(io->name()));
    body(*io);
  }
}

}  // namespace spillway::testing
