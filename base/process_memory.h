// This process's memory as the kernel counts it: the resident set that a
// cgroup limit and Dask's memory manager act on.
#pragma once

#include <cstdint>

namespace spillway {

// Resident bytes of this process (/proc/self/statm); 0 where it cannot be read.
uint64_t ProcessResidentBytes();

// Hands memory freed to the C allocator back to the kernel (glibc's
// malloc_trim), so that the resident set shows what was freed. Costs a walk
// of the heap: call it when the figure matters, not per operation.
void TrimProcessHeap();

}  // namespace spillway
