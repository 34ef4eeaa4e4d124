// The Tier conformance suite (tier_conformance.h) over the host tier and the
// file tier with each codec, over the kernel's FileIo (io_uring where the
// kernel allows it, else POSIX: the name is printed) and the in-memory one.
// The gpu tier registers in tests/tiers/gpu/gpu_tier_conformance_test.cc.
#include <memory>

#include "file_tier_test_util.h"
#include "tier_conformance.h"
#include "tiers/file_tier.h"
#include "tiers/host_tier.h"
#include "tiers/io/mem_file_io.h"
#include "tiers/segment.h"

namespace spillway {
namespace {

using testing::TempDir;
using testing::TierSpec;
using testing::TierUnderTest;

TierUnderTest MakeHost(const TierSpec& spec) {
  TierConfig c;
  c.name = "host";
  c.kind = TierKind::kHost;
  c.capacity_bytes = spec.capacity_bytes;
  c.pinned = false;
  TierUnderTest t;
  t.tier = std::make_unique<HostTier>(c, 0, nullptr);
  return t;
}

enum class Backing { kKernel, kMemory };

TierUnderTest MakeFile(const TierSpec& spec, CodecKind codec, Backing backing) {
  TierUnderTest t;
  std::shared_ptr<FileIo> io;
  std::string dir;
  if (backing == Backing::kMemory) {
    MemFileIo::Options o;
    o.capacity_bytes = spec.device_bytes;
    io = std::make_shared<MemFileIo>(o);
    dir = "/tier";
    t.device_bounded = true;
  } else {
    auto tmp = std::make_shared<TempDir>("tierconf");
    dir = tmp->path();
    t.keep.push_back(tmp);
    io = MakeFileIo(IoEngine::kAuto);
    MESSAGE("file tier over FileIo '" << std::string(io->name()) << "' in " << dir);
  }
  t.keep.push_back(io);
  TierConfig c;
  c.name = "file";
  c.kind = TierKind::kFile;
  c.capacity_bytes = spec.capacity_bytes;
  c.paths = {dir};
  c.codec.kind = codec;
  c.codec.level = codec == CodecKind::kZstd ? 3 : 1;
  c.io.segment_bytes = 8ull << 20;
  auto tier = std::make_unique<FileTier>(c, 1, io.get(), nullptr);
  Status st = tier->Open();
  REQUIRE_MESSAGE(st.ok(), st.ToString());
  t.tier = std::move(tier);
  FileIo* raw = io.get();
  t.corrupt = [raw, dir](const Location& loc) { return testing::FlipByteAt(*raw, dir, loc.segment, loc.offset + loc.length / 2); };
  return t;
}

}  // namespace

SPILLWAY_TIER_CONFORMANCE("host", MakeHost)
SPILLWAY_TIER_CONFORMANCE("file/none/kernel", [](const TierSpec& s) { return MakeFile(s, CodecKind::kNone, Backing::kKernel); })
SPILLWAY_TIER_CONFORMANCE("file/zstd/kernel", [](const TierSpec& s) { return MakeFile(s, CodecKind::kZstd, Backing::kKernel); })
SPILLWAY_TIER_CONFORMANCE("file/lz4/kernel", [](const TierSpec& s) { return MakeFile(s, CodecKind::kLz4, Backing::kKernel); })
SPILLWAY_TIER_CONFORMANCE("file/none/memory", [](const TierSpec& s) { return MakeFile(s, CodecKind::kNone, Backing::kMemory); })
SPILLWAY_TIER_CONFORMANCE("file/zstd/memory", [](const TierSpec& s) { return MakeFile(s, CodecKind::kZstd, Backing::kMemory); })
SPILLWAY_TIER_CONFORMANCE("file/lz4/memory", [](const TierSpec& s) { return MakeFile(s, CodecKind::kLz4, Backing::kMemory); })

}  // namespace spillway
