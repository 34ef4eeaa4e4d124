// Names of the config enums, as spelled in YAML files and printed in messages.
#include "spillway/config.h"

#include <array>
#include <utility>

namespace spillway {
namespace {

template <typename E, size_t N>
std::optional<E> FromName(const std::array<std::pair<const char*, E>, N>& table,
                          std::string_view name) {
  for (const auto& [text, value] : table) {
    if (name == text) return value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
const char* ToName(const std::array<std::pair<const char*, E>, N>& table, E value) {
  for (const auto& [text, v] : table) {
    if (v == value) return text;
  }
  return "?";
}

constexpr std::array<std::pair<const char*, TierKind>, 3> kTierKinds{{
    {"gpu", TierKind::kGpu}, {"host", TierKind::kHost}, {"file", TierKind::kFile}}};
constexpr std::array<std::pair<const char*, Medium>, 4> kMedia{{
    {"nvme", Medium::kNvme}, {"ssd", Medium::kSsd}, {"hdd", Medium::kHdd}, {"nfs", Medium::kNfs}}};
constexpr std::array<std::pair<const char*, CodecKind>, 3> kCodecs{{
    {"none", CodecKind::kNone}, {"zstd", CodecKind::kZstd}, {"lz4", CodecKind::kLz4}}};
constexpr std::array<std::pair<const char*, GpuMemory>, 2> kGpuMemory{{
    {"device", GpuMemory::kDevice}, {"managed", GpuMemory::kManaged}}};
constexpr std::array<std::pair<const char*, IoEngine>, 3> kIoEngines{{
    {"auto", IoEngine::kAuto}, {"uring", IoEngine::kUring}, {"posix", IoEngine::kPosix}}};

}  // namespace

const char* TierKindName(TierKind k) { return ToName(kTierKinds, k); }
const char* MediumName(Medium m) {
  return m == Medium::kUnspecified ? "unspecified" : ToName(kMedia, m);
}
const char* CodecKindName(CodecKind c) { return ToName(kCodecs, c); }
const char* GpuMemoryName(GpuMemory m) { return ToName(kGpuMemory, m); }
const char* IoEngineName(IoEngine e) { return ToName(kIoEngines, e); }

std::optional<TierKind> TierKindFromName(std::string_view name) { return FromName(kTierKinds, name); }
std::optional<Medium> MediumFromName(std::string_view name) { return FromName(kMedia, name); }
std::optional<CodecKind> CodecKindFromName(std::string_view name) { return FromName(kCodecs, name); }
std::optional<GpuMemory> GpuMemoryFromName(std::string_view name) { return FromName(kGpuMemory, name); }
std::optional<IoEngine> IoEngineFromName(std::string_view name) { return FromName(kIoEngines, name); }

int DefaultCodecLevel(CodecKind c) {
  switch (c) {
    case CodecKind::kZstd: return 3;
    case CodecKind::kLz4: return 1;
    case CodecKind::kNone: return 0;
  }
  return 0;
}

}  // namespace spillway
