// Codecs turn an object's raw bytes into the bytes a tier stores.
//
// A Codec is immutable and thread-safe: implementations keep their
// compression contexts per thread (no hidden shared state). The adaptive
// logic (store raw when data does not shrink) lives in EncodeAdaptive so every
// codec gets it once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "config/config.h"
#include "engine/status.h"

namespace spillway {

class Codec {
 public:
  virtual ~Codec() = default;
  virtual CodecKind kind() const = 0;
  // Upper bound of Encode's output for `raw_size` input bytes.
  virtual size_t MaxEncodedSize(size_t raw_size) const = 0;
  // Encodes `in` into `out` (at least MaxEncodedSize bytes); returns bytes written.
  virtual StatusOr<size_t> Encode(std::span<const std::byte> in, std::span<std::byte> out) const = 0;
  // Decodes `in` into exactly `out.size()` bytes; anything else is Corruption.
  virtual Status Decode(std::span<const std::byte> in, std::span<std::byte> out) const = 0;
};

// Returns the codec for `config` (kNone gives a copying codec). Never null.
std::unique_ptr<Codec> MakeCodec(const CodecConfig& config);

// Result of EncodeAdaptive.
struct EncodeResult {
  size_t size = 0;      // bytes written to `out`
  bool stored_raw = false;  // true: `out` holds the input unchanged
};

// Encodes with `codec` unless a cheap sample shows the data will not shrink by
// `min_savings`, or the full encode does not; then copies raw. `out` must have
// room for max(MaxEncodedSize(in.size()), in.size()).
StatusOr<EncodeResult> EncodeAdaptive(const Codec& codec, double min_savings,
                                      std::span<const std::byte> in, std::span<std::byte> out);

// xxh3-64 of `data`; the checksum of every record on disk.
uint64_t Checksum64(const void* data, size_t size, uint64_t seed = 0);

}  // namespace spillway
