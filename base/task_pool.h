// A small process-wide pool of worker threads for data-parallel loops, used
// to encode and decode the chunks of large records.
//
// Why a pool rather than a thread per call: codec contexts are per thread
// (thread_local), so long-lived workers keep warm contexts; a fresh thread
// would allocate and fault in a new zstd context for every record.
#pragma once

#include <cstddef>
#include <functional>

namespace spillway {

// Runs fn(i) for every i in [0, n) and returns when all calls have returned.
// The calling thread works too, so the loop always progresses even when every
// worker is busy with other callers' loops; at most hardware_concurrency()
// threads run one loop. Safe to call from many threads at once. `fn` must not
// throw and must not call ParallelFor itself.
void ParallelFor(size_t n, const std::function<void(size_t)>& fn);

// Threads one ParallelFor can use, the caller included (>= 1).
size_t ParallelWidth();

}  // namespace spillway
