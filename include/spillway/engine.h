// spillway's public API. An Engine stores objects (a key and one or more byte
// buffers) in a chain of tiers declared in a YAML file, fastest first, and
// moves them down the chain under memory pressure and back up when read.
//
//   auto engine = spillway::Engine::OpenFile("tiers.yaml");
//   if (!engine.ok()) { ... engine.status().ToString() ... }
//   Status s = (*engine)->Put("key", bytes);
//   auto h = (*engine)->Get("key");   // pins the object until h is released
//
// Thread-safety: every method may be called from any number of threads.
// Errors are Status values: NotFound, NoSpace (no tier can hold the object),
// Corruption (checksum mismatch; never wrong bytes), IOError.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "spillway/config.h"
#include "spillway/external.h"
#include "spillway/handle.h"
#include "spillway/stats.h"
#include "spillway/status.h"

namespace spillway {

class FileIo;
class Logger;
class Scheduler;

struct EngineOptions {
  // File I/O used by file tiers; null picks io_uring or POSIX per tier config.
  // Not owned; must outlive the engine. Tests pass a FaultFileIo here.
  FileIo* file_io = nullptr;
  // Not owned; must outlive the engine. Warnings the engine and its FileIo
  // report (O_DIRECT refused, records skipped at open, a failing event log).
  // Null: file_io's logger, else stderr. File tiers log through their
  // FileIo's logger(): the FileIos the engine makes get this one.
  Logger* logger = nullptr;
  // Run the background mover. Off makes demotion happen only on the caller's
  // thread (deterministic tests).
  bool background_mover = true;
  // Where background demotion batches run (base/scheduler.h). Not owned;
  // must outlive the engine. Null: a thread pool owned by the engine when
  // background_mover, else none. Tests pass a ManualScheduler and step it.
  Scheduler* scheduler = nullptr;
  // Profile to select when opening from a file (empty: SPILLWAY_PROFILE or hostname rules).
  std::string profile;
};

struct PutOptions {
  // Where the caller's buffers are. kAny: detected (cudaPointerGetAttributes
  // in a CUDA build with a gpu tier; host otherwise). Device buffers go to
  // the first gpu tier with room, else are copied to host memory.
  Where memory = Where::kAny;
};

// What Engine::CheckDevices found: for each gpu tier, its device (by the
// identity that survives CUDA_VISIBLE_DEVICES renumbering) and how many of
// its objects live elsewhere.
struct DeviceCheck {
  struct TierDevice {
    std::string tier;        // tier name
    int device = -1;         // CUDA ordinal in this process
    std::string uuid;        // "GPU-8e9f0a1b-...", as nvidia-smi -L prints it
    std::string pci_bus_id;  // "0000:3b:00.0"
    uint64_t objects = 0;    // objects checked
    uint64_t misplaced = 0;  // objects whose memory is not on the tier's device
  };
  std::vector<TierDevice> tiers;  // one per gpu tier, in chain order
  std::string first_problem;      // the first misplaced object, with its key
  bool ok() const {
    for (const TierDevice& t : tiers) {
      if (t.misplaced != 0) return false;
    }
    return true;
  }
};

// One stored object, as Engine::ListKeys reports it.
struct KeyInfo {
  std::string key;
  int tier = -1;           // index in config().tiers of the tier holding it
  uint64_t raw_bytes = 0;  // its size before any codec
};

class Engine {
 public:
  // Validates `config` and opens every tier. Persistent file tiers are
  // recovered; scratch file tiers are wiped.
  static StatusOr<std::unique_ptr<Engine>> Open(const Config& config, const EngineOptions& options = {});
  // Loads the YAML file at `path` (see README "Configuration") and opens it.
  static StatusOr<std::unique_ptr<Engine>> OpenFile(const std::string& path, const EngineOptions& options = {});

  virtual ~Engine() = default;

  // Stores an object made of `buffers` under `key` (any bytes), replacing any
  // previous object of that key. The bytes are copied; the caller may reuse
  // them when Put returns. NoSpace when no tier can hold the object; then the
  // engine is unchanged.
  virtual Status Put(std::string_view key, std::span<const std::span<const std::byte>> buffers,
                     const PutOptions& options = {}) = 0;
  Status Put(std::string_view key, std::span<const std::byte> data) {
    std::span<const std::byte> one[1] = {data};
    return Put(key, one);
  }
  // Returns a Handle pinning the object. Reading from a file tier verifies the
  // checksum and, with policy.promote_on_read, moves the object up.
  virtual StatusOr<Handle> Get(std::string_view key, Where where = Where::kAny) = 0;
  // Removes the object; its space is reclaimed once no Handle pins it.
  // NotFound when absent.
  virtual Status Erase(std::string_view key) = 0;

  // ---- GPU (gpu tiers; NotSupported in an engine without one) ----
  // Stores a caller's device allocation without copying: the engine owns it
  // from now on and calls `release(ptr)` when the object is erased, replaced
  // or demoted off the device. `buffer_sizes` splits it into buffers.
  // (Put of device pointers copies them instead; both are documented here.)
  // Stream ordering: Put's copies of device buffers run after all work queued
  // on the legacy default stream (so a cudaMemcpy into the buffer, even from
  // pageable memory, is complete). Work on other streams that writes the
  // buffer, and every write to an allocation handed to PutDeviceAllocation,
  // must be finished (stream synchronized) before the call.
  virtual Status PutDeviceAllocation(std::string_view key, void* device_ptr,
                                     std::vector<uint64_t> buffer_sizes,
                                     std::function<void(void*)> release) = 0;
  // Stores the caller's host memory without copying (a Python buffer, a
  // NumPy array): `data` holds the object's buffers back to back. The first
  // host tier with room adopts it, accounting `sum(buffer_sizes)` bytes like
  // any object it stores, and moves it down the chain like any other (the
  // demotion reads `data`). `release(data)` runs exactly once, when the
  // engine no longer needs the memory (erase, replace, a committed demotion,
  // the engine's destruction; or at once after a copy, below). It runs on
  // whichever thread drops the last reference, engine threads included,
  // with no engine lock held: it must not block (hand slow work, e.g.
  // taking Python's GIL, to another thread). No host tier with room: the
  // bytes are copied down the chain as Put does, then released.
  // REQUIRES: the memory stays valid until `release`. A write to it is seen
  // by readers while the object is in a host tier and may or may not reach a
  // copy being demoted (as with writable views of Put objects).
  // (engine/engine_adopt.cc)
  virtual Status PutHostAllocation(std::string_view key, const std::byte* data, std::vector<uint64_t> buffer_sizes,
                                   std::function<void(const std::byte*)> release) = 0;
  // Stores a live object of the caller (spillway/external.h) under `key`
  // without any bytes: the first host tier with room holds it, accounting
  // `accounted_bytes` (the caller's measure of it, e.g. Dask's sizeof), and
  // the mover demotes it like any object, calling object->Materialize() on
  // its materializer thread (never a batch thread of the mover) when it
  // picks the object, and storing those bytes below. The object is released
  // when its demotion commits, or on erase, replace, the engine's
  // destruction. A Get of the key returns a Handle of no buffers while it is
  // external (use GetExternal), its bytes once demoted. NoSpace when no host
  // tier can take it (nothing stored; the caller still has its object).
  // (engine/engine_external.cc)
  virtual Status PutExternal(std::string_view key, uint64_t accounted_bytes,
                             std::shared_ptr<ExternalObject> object) = 0;
  // The external object under `key` while it is still held live (not yet
  // demoted): a reference of the caller's own, valid even if a demotion
  // commits right after. Null when the key is held as bytes (Get it then).
  // NotFound when absent. Counts as a use for the eviction policy.
  virtual StatusOr<std::shared_ptr<ExternalObject>> GetExternal(std::string_view key) = 0;
  // Brings every key to `where` and pins each until the returned handles
  // are released: call it before launching a kernel on those inputs. Keys in
  // file tiers are read concurrently, not one after another, and each is
  // verified before it is returned. On any failure nothing stays pinned and
  // the error names the key.
  virtual StatusOr<std::vector<Handle>> Acquire(std::span<const std::string> keys, Where where) = 0;
  // The read-ahead hint (the Dask store calls it for a task's inputs): like
  // Acquire, but returns at once; in the background the keys in file tiers
  // are read, a bounded amount of memory at a time, and promoted into the
  // first host tier (whatever policy.promote_on_read says: that governs
  // Gets), then unpinned, so a later Get is a memory hit. Where that tier
  // is full, the read-ahead waits for the mover to make room, for a bounded
  // time while nothing moves; a key that still finds no room is left where
  // it is. A Get of a key a Prefetch is reading waits (for a bounded time)
  // for that read instead of reading the record a second time. Best effort:
  // keys that are missing or erased meanwhile are skipped, errors are
  // dropped, and nothing is demoted or written on the caller's thread.
  virtual void Prefetch(std::span<const std::string> keys, Where where) = 0;
  // Device memory of `bytes` for the caller, from the engine's pool on the
  // first gpu tier. On allocation failure it demotes enough objects to fit
  // and retries once, then returns NoSpace. Freed when the pointer's last
  // copy goes away.
  virtual StatusOr<std::shared_ptr<void>> AllocateDevice(uint64_t bytes) = 0;
  virtual bool Contains(std::string_view key) = 0;
  // The index (in config().tiers order) of the tier holding `key`, or -1 when
  // absent: a snapshot, a move may follow at once. For callers that report
  // where their objects are (the Dask store's fast/slow). (engine/engine_locate.cc)
  virtual int TierOf(std::string_view key) = 0;
  // Waits until the mover is idle, then makes persistent tiers durable
  // (docs/reliability.md states what a returned Flush guarantees on disk). The mover's WaitIdle contract: it returns once no
  // demotion batch is queued or running and no tier is above its high
  // watermark, or every boundary still above it has just run a batch that
  // moved nothing (its objects pinned, or no room in the tiers below). Every
  // move started before the call has committed or aborted by then. With an
  // injected manual scheduler the queued batches run on the caller's thread.
  virtual Status Flush() = 0;
  virtual EngineStats Stats() = 0;
  // Checks every object held in a gpu tier: the device its tier recorded for
  // it and the device its memory is on must both be the tier's own,
  // compared by UUID. One driver query per object, made without holding up
  // Put or Get: for tests and the multi-GPU benchmark, not the data path.
  // Objects moving meanwhile are checked where they were. NotSupported in
  // an engine without a gpu tier.
  // (engine/engine_devices.cc)
  virtual StatusOr<DeviceCheck> CheckDevices() = 0;

  // Every key stored now, with its tier and size, in no particular order.
  // Consistent per key, not across keys: an object put or erased while the
  // list is taken may or may not appear. Copies every key (memory grows with
  // the number of objects): for tools, tests and a store rebuilding its own
  // bookkeeping, not the data path. (engine/engine_locate.cc)
  virtual std::vector<KeyInfo> ListKeys() = 0;
  // The host tiers demote while this process's resident memory is above
  // `bytes`: as much as the excess, as far as their contents go, to a tier
  // below that stores bytes; 0 (the default) turns it off. Memory the process
  // holds outside the engine then shrinks what the host tier keeps, as Dask's
  // memory manager spills by process memory: a Dask worker's store sets it
  // from the worker's memory limit (python/spillway/dask_preload.py). A host
  // tier in the pinned pool (pinned: true with a GPU) does not yield: the
  // pool's slabs stay pinned whatever they hold, so demoting frees nothing.
  // The background mover checks the resident set against the limit several
  // times a second and at each Flush (RelieveMemory checks it at once).
  // Setting a limit frees what the engine keeps only to go faster (idle I/O
  // buffers, freed blocks kept for reuse, here and in the process-wide pool
  // of small blocks) and hands freed heap memory back to the kernel; from
  // then on freed host memory is not kept for reuse, and while the process
  // is above the limit, idle I/O buffers and freed heap memory are given
  // back, at bounded intervals, before more is demoted for them. So an
  // excess is demoted once, not again for memory already freed that has yet
  // to leave the process, and demoting for the limit alone adds little
  // resident memory of its own. (engine/memory_governor.cc)
  virtual void SetProcessMemoryLimit(uint64_t bytes) = 0;
  // Makes room in this process for `incoming_bytes` more: while the resident
  // set plus them is above the SetProcessMemoryLimit limit, the host tiers
  // that yield to it demote the difference (as far as their unpinned
  // contents go) at once, not at the mover's next tick. With `wait` the call
  // waits until the mover has moved it and returns whether the process then
  // fits (it may block for as long as the disk takes to write that much);
  // without, it returns once the demotions are started (false when any
  // were needed). True at once when no limit is set. The caller's thread
  // only waits (it demotes itself only without a background mover); memory
  // held outside the engine is the caller's to free. For a store that, like
  // Dask's SpillBuffer, evicts when a value arrives and before one is read
  // back (python/spillway/dask.py). (engine/memory_governor.cc)
  virtual bool RelieveMemory(uint64_t incoming_bytes, bool wait = true) = 0;
  // The resolved configuration the engine runs with.
  virtual const Config& config() const = 0;
};

}  // namespace spillway
