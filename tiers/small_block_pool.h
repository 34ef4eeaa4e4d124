// SmallBlockPool: the memory of host objects below HostBlockCache's range
// (up to kMaxBytes), reused instead of going back to the C library on every
// free.
//
// Why: a spill of small objects allocates each one on the caller's thread
// (Put) and frees it on a mover thread once it is on disk. glibc gives back a
// chunk to the arena it came from, under that arena's lock, so the two
// threads took turns on one lock per object, and a spill of small objects
// left the disk idle a quarter of the time (docs/performance.md#tuning-constants-file-tier).
//
// How: per size class, every thread keeps a magazine of free blocks (no
// lock); a full magazine hands half its blocks to a process-wide depot and an
// empty one takes up to half a magazine from it, so the depot's mutex is
// taken once per batch of blocks, not per object. Size classes: multiples of
// 64 bytes up to 1 KiB, then eighths of each power of two (a block serves
// sizes up to 12.5% smaller); blocks are 64-byte aligned.
//
// Bounds: the depot keeps at most kDepotMaxBytes and a thread at most
// kThreadMaxBytes; beyond them a freed block goes back to the C library. A
// thread's blocks go to the depot (or are freed) when it exits. SetKeeping(false)
// frees what the depot holds and keeps nothing from then on (a process that
// sets a memory limit, as a Dask worker's store does: its memory manager
// reads the resident set). Under AddressSanitizer the pool is off, so a use
// after free of an object's memory is still caught.
//
// Thread-safety: every function may be called from any thread; memory from
// Allocate may be freed by another thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace spillway {

struct SmallBlockPoolStats {
  uint64_t depot_bytes = 0;   // kept in the depot now
  uint64_t thread_bytes = 0;  // kept in the calling thread's magazines now
  uint64_t depot_refills = 0; // magazines refilled from the depot (total)
  uint64_t depot_flushes = 0; // half-magazines handed to the depot (total)
};

class SmallBlockPool {
 public:
  // Off under AddressSanitizer: every block then comes from and goes back to
  // the C library, so a use after free is still caught.
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kPooling = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  static constexpr bool kPooling = false;
#else
  static constexpr bool kPooling = true;
#endif
#else
  static constexpr bool kPooling = true;
#endif
  static constexpr uint64_t kMaxBytes = 64u << 10;  // larger sizes: HostBlockCache / the C library
  static constexpr uint64_t kDepotMaxBytes = 16u << 20;
  static constexpr uint64_t kThreadMaxBytes = 1u << 20;

  // At least `bytes` (<= kMaxBytes), 64-byte aligned; null when out of memory.
  static std::byte* Allocate(uint64_t bytes);
  // Memory from Allocate(bytes), with the same `bytes`; null is ignored.
  static void Free(std::byte* p, uint64_t bytes);
  // The size class serving `bytes` (what a block of it really holds).
  static uint64_t ClassBytes(uint64_t bytes);

  // False: frees the depot's and the calling thread's blocks, and blocks
  // freed from now on go back to the C library (other threads' magazines
  // empty as they allocate, or at their exit). True: keeps again.
  static void SetKeeping(bool keep);
  static bool keeping();
  static SmallBlockPoolStats Stats();
};

}  // namespace spillway
