// MakeCodec and the adaptive encoding shared by every codec: sample first,
// compress only what will shrink, store the rest raw.
//
// Why sample: zstd compresses incompressible data at only ~400 MB/s (LIMITS.md)
// while a raw copy runs at memory bandwidth, so compressing a whole random
// object just to throw the result away would make incompressible data cost
// several times codec none. A few slices spread over the input predict the
// outcome for a few percent of the work. Before any codec runs, the order-0
// entropy of (part of) the sample screens out random-looking data for well
// under a microsecond per object, so even a 64 KiB incompressible object costs
// about what codec none costs.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "codecs/codec.h"
#include "codecs/codec_factories.h"

namespace spillway {
namespace {

inline constexpr size_t kMinSliceBytes = 4u << 10;
inline constexpr size_t kMaxSliceBytes = 16u << 10;
// Slices of inputs below kSampleThreshold (entropy only).
inline constexpr size_t kSmallSliceBytes = 256;
// Bytes of each slice the entropy screen counts.
inline constexpr size_t kEntropySliceBytes = 2u << 10;

// c * log2(c) for the counts a histogram of at most
// kSampleSlices * kEntropySliceBytes bytes can hold.
const std::array<float, kSampleSlices * kEntropySliceBytes + 1>& CLog2C() {
  static const auto table = [] {
    std::array<float, kSampleSlices * kEntropySliceBytes + 1> t{};
    for (size_t c = 1; c < t.size(); ++c) t[c] = static_cast<float>(c * std::log2(static_cast<double>(c)));
    return t;
  }();
  return table;
}

Status CheckOutRoom(const Codec& codec, size_t in_size, size_t out_size) {
  size_t need = std::max(codec.MaxEncodedSize(in_size), in_size);
  if (out_size >= need) return Status::OK();
  return Status::InvalidArgument("encode: output buffer of " + std::to_string(out_size) +
                                 " bytes, need " + std::to_string(need) + " for " +
                                 std::to_string(in_size) + " input bytes");
}

EncodeResult CopyRaw(std::span<const std::byte> in, std::span<std::byte> out) {
  if (!in.empty()) std::memcpy(out.data(), in.data(), in.size());
  return EncodeResult{in.size(), true};
}

}  // namespace

std::unique_ptr<Codec> MakeCodec(const CodecConfig& config) {
  switch (config.kind) {
    case CodecKind::kZstd:
      return NewZstdCodec(config.level);
    case CodecKind::kLz4:
      return NewLz4Codec(config.level);
    case CodecKind::kNone:
      break;
  }
  return NewNoneCodec();
}

size_t SampleSliceBytes(size_t raw_size) {
  if (raw_size < kSampleThreshold) return std::min(kSmallSliceBytes, raw_size / kSampleSlices);
  return std::clamp(raw_size / 128, kMinSliceBytes, kMaxSliceBytes);
}

double SampleEntropyBits(std::span<const std::span<const std::byte>> slices) {
  uint32_t counts[256] = {};
  size_t n = 0;
  // At most kSampleSlices slices of kEntropySliceBytes: n stays inside CLog2C.
  for (const auto& slice : slices.first(std::min(slices.size(), kSampleSlices))) {
    const size_t len = std::min(slice.size(), kEntropySliceBytes);
    for (size_t i = 0; i < len; ++i) counts[static_cast<uint8_t>(slice[i])]++;
    n += len;
  }
  if (n == 0) return 0;
  const auto& clog2c = CLog2C();
  double sum = 0;
  int used = 0;
  for (uint32_t c : counts) {
    sum += clog2c[c];
    used += c != 0;
  }
  // H = log2(n) - sum(c log2 c) / n, plus the Miller-Madow correction for the
  // bias of a small sample ((used - 1) / (2 n ln 2)).
  const double dn = static_cast<double>(n);
  return std::log2(dn) - sum / dn + (used - 1) / (2.0 * dn * std::log(2.0));
}

bool LooksIncompressible(std::span<const std::span<const std::byte>> slices, double min_savings) {
  if (!(min_savings > 0)) min_savings = 0;
  // Order-0 coding alone could not save even half of min_savings; matches
  // (LZ) rarely rescue data whose bytes are this evenly spread.
  return SampleEntropyBits(slices) >= 8.0 * (1.0 - std::min(min_savings, 1.0) / 2);
}

size_t SampleSliceOffset(size_t raw_size, size_t i) {
  size_t slice = std::min(SampleSliceBytes(raw_size), raw_size);
  return (raw_size - slice) / (kSampleSlices - 1) * std::min(i, kSampleSlices - 1);
}

bool WorthKeeping(size_t encoded, size_t raw, double min_savings) {
  if (encoded >= raw) return false;
  if (!(min_savings > 0)) return true;  // also catches NaN
  return static_cast<double>(encoded) <= static_cast<double>(raw) * (1.0 - min_savings);
}

StatusOr<bool> SampleShrinks(const Codec& codec, double min_savings,
                             std::span<const std::span<const std::byte>> slices) {
  if (LooksIncompressible(slices, min_savings)) return false;
  size_t sampled = 0;
  for (const auto& slice : slices) sampled += slice.size();
  // Slices of a small input: compressing them would cost as much as the answer.
  if (sampled < kSampleSlices * kMinSliceBytes) return true;
  // Slices are small (<= 16 KiB), so one reused per-thread scratch suffices.
  thread_local std::vector<std::byte> scratch;
  size_t raw = 0, encoded = 0;
  for (const auto& slice : slices) {
    size_t need = codec.MaxEncodedSize(slice.size());
    if (scratch.size() < need) scratch.resize(need);
    StatusOr<size_t> n = codec.Encode(slice, std::span<std::byte>(scratch.data(), need));
    if (!n.ok()) return n.status();
    raw += slice.size();
    encoded += *n;
  }
  return WorthKeeping(encoded, raw, min_savings);
}

StatusOr<EncodeResult> EncodeOrCopy(const Codec& codec, double min_savings,
                                    std::span<const std::byte> in, std::span<std::byte> out) {
  SPILLWAY_RETURN_IF_ERROR(CheckOutRoom(codec, in.size(), out.size()));
  if (in.empty() || codec.kind() == CodecKind::kNone) return CopyRaw(in, out);
  StatusOr<size_t> n = codec.Encode(in, out);
  if (!n.ok()) return n.status();
  if (WorthKeeping(*n, in.size(), min_savings)) return EncodeResult{*n, false};
  return CopyRaw(in, out);
}

StatusOr<EncodeResult> EncodeAdaptive(const Codec& codec, double min_savings,
                                      std::span<const std::byte> in, std::span<std::byte> out) {
  SPILLWAY_RETURN_IF_ERROR(CheckOutRoom(codec, in.size(), out.size()));
  if (codec.kind() != CodecKind::kNone && in.size() >= kMinSampledInput) {
    const size_t slice = SampleSliceBytes(in.size());
    std::span<const std::byte> slices[kSampleSlices];
    for (size_t i = 0; i < kSampleSlices; ++i) {
      slices[i] = in.subspan(SampleSliceOffset(in.size(), i), slice);
    }
    StatusOr<bool> shrinks = SampleShrinks(codec, min_savings, slices);
    if (!shrinks.ok()) return shrinks.status();
    if (!*shrinks) return CopyRaw(in, out);
  }
  return EncodeOrCopy(codec, min_savings, in, out);
}

}  // namespace spillway
