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
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "engine/handle.h"
#include "engine/stats.h"
#include "engine/status.h"

namespace spillway {

class FileIo;

struct EngineOptions {
  // File I/O used by file tiers; null picks io_uring or POSIX per tier config.
  // Not owned; must outlive the engine. Tests pass a FaultFileIo here.
  FileIo* file_io = nullptr;
  // Run the background mover. Off makes demotion happen only on the caller's
  // thread (deterministic tests).
  bool background_mover = true;
  // Profile to select when opening from a file (empty: SPILLWAY_PROFILE or hostname rules).
  std::string profile;
};

struct PutOptions {
  // Buffers are device pointers (gpu tiers only); detected when left kAny.
  Where memory = Where::kAny;
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
  virtual bool Contains(std::string_view key) = 0;
  // Waits until background moves are done and no tier is above its high
  // watermark, then makes persistent tiers durable (data synced).
  virtual Status Flush() = 0;
  virtual EngineStats Stats() = 0;
  // The resolved configuration the engine runs with.
  virtual const Config& config() const = 0;
};

}  // namespace spillway
