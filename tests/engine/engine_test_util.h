// Builders for engine tests: small host -> file chains in scratch
// directories, opening an engine, and which tier serves a key.
#pragma once

#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "spillway/config.h"
#include "spillway/engine.h"
#include "spillway/file_io.h"
#include "test_util.h"

namespace spillway::testing {

inline TierConfig HostTierConfig(const std::string& name, uint64_t capacity) {
  TierConfig t;
  t.name = name;
  t.kind = TierKind::kHost;
  t.capacity_bytes = capacity;
  t.capacity_text = std::to_string(capacity);
  t.pinned = false;
  return t;
}

inline TierConfig FileTierConfig(const std::string& name, const std::string& dir, uint64_t capacity,
                                 CodecKind codec = CodecKind::kNone, int level = 0) {
  TierConfig t;
  t.name = name;
  t.kind = TierKind::kFile;
  t.capacity_bytes = capacity;
  t.capacity_text = std::to_string(capacity);
  t.medium = Medium::kSsd;
  t.paths = {dir};
  t.codec.kind = codec;
  t.codec.level = level != 0 ? level : (codec == CodecKind::kZstd ? 3 : 1);
  t.io.segment_bytes = 8ull << 20;
  return t;
}

// host (host_cap) -> file (file_cap) under `dir`.
inline Config HostFileChain(const std::string& dir, uint64_t host_cap, uint64_t file_cap,
                            CodecKind codec = CodecKind::kNone) {
  Config c;
  c.source = "<test>";
  c.tiers.push_back(HostTierConfig("host", host_cap));
  c.tiers.push_back(FileTierConfig("disk", dir + "/disk", file_cap, codec));
  return c;
}

inline std::vector<std::byte> Bytes(size_t n, uint64_t seed) { return RandomBytes(n, seed); }

inline bool HandleEquals(const Handle& h, const std::vector<std::byte>& want) {
  if (h.size() != want.size()) return false;
  size_t off = 0;
  for (size_t i = 0; i < h.num_buffers(); ++i) {
    auto b = h.buffer(i);
    if (b.size() && std::memcmp(b.data(), want.data() + off, b.size()) != 0) return false;
    off += b.size();
  }
  return off == want.size();
}

inline const TierStats& TierNamed(const EngineStats& s, const std::string& name) {
  for (auto& t : s.tiers) {
    if (t.name == name) return t;
  }
  throw std::runtime_error("no tier " + name);
}

// Opens `c` with `o` or fails the test case.
inline std::unique_ptr<Engine> MustOpen(const Config& c, const EngineOptions& o) {
  auto e = Engine::Open(c, o);
  REQUIRE_MESSAGE(e.ok(), e.status().ToString());
  return std::move(*e);
}

// Opens `c` or fails the test case; by default without the background mover
// (Put demotes on its own thread).
inline std::unique_ptr<Engine> MustOpen(const Config& c, FileIo* io = nullptr, bool background = false) {
  EngineOptions o;
  o.file_io = io;
  o.background_mover = background;
  return MustOpen(c, o);
}

// Index of the tier whose hit counter a Get bumps (-1 when the Get fails).
// Reads from a file tier may promote, so call it at most once per check.
inline int ServingTier(Engine& e, std::string_view key) {
  auto before = e.Stats();
  auto h = e.Get(key);
  if (!h.ok()) return -1;
  auto after = e.Stats();
  for (size_t i = 0; i < after.tiers.size(); ++i) {
    if (after.tiers[i].hits != before.tiers[i].hits) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace spillway::testing
