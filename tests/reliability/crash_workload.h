// The crash test's workload, shared by the child that runs it
// (crash_child.cc) and the parent that checks what survived (crash_test.cc).
//
// Op i of a run is a pure function of (run_seed, i): a Put of a key from a
// small pool with bytes given by a 64-bit content seed, so the parent
// regenerates every version the child may have written and needs no copy of
// the bytes. Objects are larger than the host tier, so every Put lands on the
// persistent file tier directly.
//
// Side files the child writes in the tier's root directory:
//   durable   text lines "N\n", appended and fsynced after each successful
//             Flush: ops [0, N) are durable (the oracle)
//   started   8 bytes, rewritten (not synced) before each op: the index of the
//             op in progress; page cache survives SIGKILL of the process
#pragma once

#include <cstdint>
#include <string>

#include "base/pattern.h"
#include "spillway/config.h"

namespace spillway::crash {

inline constexpr uint64_t kKeys = 48;
inline constexpr uint64_t kMinSize = 20 << 10;   // > host tier
inline constexpr uint64_t kMaxSize = 3 << 20;    // several 1 MiB write requests
inline constexpr uint64_t kFlushEvery = 8;       // ops between Flushes
inline constexpr uint64_t kMaxOps = 1u << 20;    // a run that is never killed ends here

struct Op {
  std::string key;
  uint64_t content = 0;  // pattern seed of the bytes (never 0)
  uint64_t size = 0;
  uint32_t buffers = 1;
  bool erase = false;
};

inline Op OpAt(uint64_t run_seed, uint64_t i) {
  uint64_t x = run_seed * 0x9E3779B97F4A7C15ull ^ (i + 1) * 0xD1B54A32D192ED03ull;
  Op op;
  op.key = "crash/" + std::to_string(SplitMix64(x) % kKeys);
  op.content = SplitMix64(x) | 1;
  // Log-ish sizes: mostly small records, some spanning several blocks and requests.
  const uint64_t r = SplitMix64(x);
  const uint64_t span = (r % 4 == 0) ? kMaxSize - kMinSize : (r % 4 == 1 ? 256 << 10 : 40 << 10);
  op.size = kMinSize + SplitMix64(x) % span;
  op.buffers = 1 + static_cast<uint32_t>(SplitMix64(x) % 3);
  return op;
}

inline TierConfig CrashHostTier() {
  TierConfig t;
  t.name = "host";
  t.kind = TierKind::kHost;
  t.capacity_bytes = 16 << 10;
  t.capacity_text = "16KiB";
  t.pinned = false;
  return t;
}

inline Config CrashConfig(const std::string& root, CodecKind codec = CodecKind::kNone) {
  Config c;
  c.source = "<crash test>";
  c.tiers.push_back(CrashHostTier());
  TierConfig f;
  f.name = "durable";
  f.kind = TierKind::kFile;
  f.capacity_bytes = 1ull << 30;
  f.capacity_text = "1GiB";
  f.medium = Medium::kSsd;
  f.paths = {root + "/tier"};
  f.persistent = true;
  f.io.segment_bytes = 8ull << 20;
  f.codec.kind = codec;
  f.codec.level = DefaultCodecLevel(codec);
  c.tiers.push_back(f);
  return c;
}

}  // namespace spillway::crash
