// Builders for engine tests: small host -> file chains in scratch directories.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/config.h"
#include "engine/engine.h"
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

}  // namespace spillway::testing
