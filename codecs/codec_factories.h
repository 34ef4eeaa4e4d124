// Internal: constructors of the concrete codecs, one per .cc file, so that
// each third-party header (zstd.h, lz4.h) stays inside the file that uses it.
// Callers outside codecs/ use MakeCodec (codec.h).
#pragma once

#include <memory>

#include "codecs/codec.h"

namespace spillway {

// Levels as CodecConfig documents them: 0 means "the codec's default".
inline constexpr int kZstdDefaultLevel = 3;
inline constexpr int kZstdMinLevel = -7;
inline constexpr int kZstdMaxLevel = 22;
inline constexpr int kLz4DefaultAcceleration = 1;

// Copies bytes; the codec of tiers that do not compress.
std::unique_ptr<Codec> NewNoneCodec();

// zstd at `level` (0: kZstdDefaultLevel; clamped to [kZstdMinLevel, kZstdMaxLevel]).
std::unique_ptr<Codec> NewZstdCodec(int level);

// lz4 LZ4_compress_fast with `acceleration` (<= 0: kLz4DefaultAcceleration).
std::unique_ptr<Codec> NewLz4Codec(int acceleration);

}  // namespace spillway
